import { mkdirSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { onWorkspace, workspaceFile } from "../src/domains/projects/workspace-db.ts";
import { FILES_PER_WORKSPACE } from "../src/domains/workspace/pool.ts";
import {
  call,
  callWorkspace,
  createOrg,
  dialect,
  type Receiver,
  signUp,
  startApp,
  startReceiver,
  type TestApp,
  type TestUser,
  until,
} from "./harness.ts";

interface Project {
  id: string;
  slug: string;
  adminToken: string;
}

/** Creates `count` projects and waits until every one is active. */
async function createProjects(app: TestApp, owner: TestUser, slug: string, count: number): Promise<Project[]> {
  const projects: Project[] = [];
  for (let i = 0; i < count; i++) {
    const res = await call(app, "POST", `/org/${slug}/projects`, { cookie: owner.cookie, body: { name: `P ${i}` } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    projects.push({ id: res.body.project.id, slug: res.body.project.slug, adminToken: res.body.adminToken });
  }
  await until(
    `${count} projects to be active`,
    async () => {
      const list = await call(app, "GET", `/org/${slug}/projects?limit=500`, { cookie: owner.cookie });
      return list.body.projects.filter((p: { status: string }) => p.status === "active").length === count;
    },
    60_000,
  );
  return projects;
}

/** This process's file descriptors open on workspace databases (a `-wal` and `-shm` included). */
function workspaceDescriptors(app: TestApp): number {
  const dir = `${path.resolve(app.config.dataDir, "workspaces")}/`;
  let count = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(dir)) count++;
    } catch {
      // Closed while listing.
    }
  }
  return count;
}

/** Samples `read` every few ms until stopped; resolves to the highest value seen. */
function sampleMax(read: () => number): { stop(): number } {
  let max = read();
  const timer = setInterval(() => {
    max = Math.max(max, read());
  }, 2);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(max, read());
    },
  };
}

const BOUND = 8;

describe("many projects, few open workspaces", () => {
  let app: TestApp;
  let owner: TestUser;
  let slug: string;
  let projects: Project[];

  beforeAll(async () => {
    app = await startApp({ WORKSPACE_MAX_OPEN: String(BOUND), RATE_LIMIT_PER_MINUTE: "100000" });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Many Projects")).slug;
    projects = await createProjects(app, owner, slug, 50);
  }, 120_000);
  afterAll(() => app?.close());

  // Every SQLite workspace that wrote syncs its log to disk as it closes, so writes that evict
  // one another are slow (bench/RESULTS.md): a few hundred requests are enough here.
  it("serves round-robin reads and writes across 50 projects with at most the bound open", async () => {
    for (const project of projects) {
      const made = await callWorkspace(app, project.id, "POST", "/collections", {
        token: project.adminToken,
        body: { slug: "things" },
      });
      expect(made.status).toBe(201);
    }
    const pool = app.server.workspaces;
    const descriptors = sampleMax(() => (dialect === "sqlite" ? workspaceDescriptors(app) : 0));
    const statuses: number[] = [];
    let next = 0;
    const client = async () => {
      while (next < 400) {
        const i = next++;
        const project = projects[i % projects.length] as Project;
        const res =
          i % 2 === 0
            ? await callWorkspace(app, project.id, "POST", "/items/things", {
                token: project.adminToken,
                body: { n: i },
              })
            : await callWorkspace(app, project.id, "GET", "/items/things?limit=5", { token: project.adminToken });
        statuses.push(res.status);
      }
    };
    await Promise.all(Array.from({ length: 24 }, client));
    const maxDescriptors = descriptors.stop();
    expect(statuses).toHaveLength(400);
    expect(statuses.filter((status) => status !== 200 && status !== 201)).toEqual([]);
    expect(pool.peak).toBeLessThanOrEqual(BOUND);
    expect(pool.size).toBeLessThanOrEqual(BOUND);
    if (dialect === "sqlite") {
      // Each open workspace: its database, `-wal` and `-shm`, and nothing else.
      expect(maxDescriptors).toBeLessThanOrEqual(BOUND * FILES_PER_WORKSPACE);
      expect(maxDescriptors).toBeGreaterThan(0);
    }
    // Workspaces nobody uses any more are closed (the pool does so a minute after their last use).
    await until("every workspace to be closed once idle (dispatches settle first)", () => {
      pool.closeIdle(performance.now() + 1);
      return pool.size === 0;
    });
    if (dialect === "sqlite") expect(workspaceDescriptors(app)).toBe(0);
  }, 90_000);

  it("pages the project list, and caps the overview's with an exact count", async () => {
    const first = await call(app, "GET", `/org/${slug}/projects?limit=20`, { cookie: owner.cookie });
    expect(first.status).toBe(200);
    expect(first.body.projects).toHaveLength(20);
    const rest = await call(app, "GET", `/org/${slug}/projects?limit=500&offset=20`, { cookie: owner.cookie });
    expect(rest.body.projects).toHaveLength(30);
    const ids = [...first.body.projects, ...rest.body.projects].map((p: { id: string }) => p.id);
    expect(ids).toEqual(projects.map((p) => p.id));
    const byDefault = await call(app, "GET", `/org/${slug}/projects`, { cookie: owner.cookie });
    expect(byDefault.body.projects).toHaveLength(50);
    for (const query of ["limit=0", "limit=501", "limit=ten", "offset=-1"]) {
      const refused = await call(app, "GET", `/org/${slug}/projects?${query}`, { cookie: owner.cookie });
      expect(refused.status, query).toBe(422);
      expect(refused.body.error.details[0].path).toBe(query.split("=")[0]);
    }
    const overview = await call(app, "GET", `/org/${slug}/overview`, { cookie: owner.cookie });
    expect(overview.body.projectCount).toBe(50);
    expect(overview.body.projects).toHaveLength(50);
  });

  it("lists at most 100 projects in the overview, counting them all", async () => {
    for (let i = 0; i < 55; i++) {
      const res = await call(app, "POST", `/org/${slug}/projects`, { cookie: owner.cookie, body: { name: `Q ${i}` } });
      expect(res.status).toBe(201);
    }
    const overview = await call(app, "GET", `/org/${slug}/overview`, { cookie: owner.cookie });
    expect(overview.body.projectCount).toBe(105);
    expect(overview.body.projects).toHaveLength(100);
    const byDefault = await call(app, "GET", `/org/${slug}/projects`, { cookie: owner.cookie });
    expect(byDefault.body.projects).toHaveLength(100);
  });

  it.runIf(dialect === "sqlite")("leaves no descriptor behind when a workspace cannot be opened", async () => {
    const project = projects[0] as Project;
    const file = path.resolve(workspaceFile(app.server.deps, project.id));
    const onFile = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`).startsWith(file);
        } catch {
          return false;
        }
      }).length;
    app.server.workspaces.forget(project.id);
    expect(onFile()).toBe(0);
    // The database opens, then its write-ahead log cannot be.
    rmSync(`${file}-wal`, { force: true });
    mkdirSync(`${file}-wal`);
    try {
      const broken = await callWorkspace(app, project.id, "GET", "/collections", { token: project.adminToken });
      expect(broken.status).toBe(500);
      expect(broken.body.error.code).toBe("INTERNAL");
      expect(onFile()).toBe(0);
    } finally {
      rmSync(`${file}-wal`, { recursive: true, force: true });
    }
    const mended = await callWorkspace(app, project.id, "GET", "/collections", { token: project.adminToken });
    expect(mended.status).toBe(200);
  });
});

describe("every open workspace in use", () => {
  let app: TestApp;
  let projects: Project[];

  beforeAll(async () => {
    app = await startApp({ WORKSPACE_MAX_OPEN: "1" });
    const owner = await signUp(app);
    const slug = (await createOrg(app, owner, "One Slot")).slug;
    projects = await createProjects(app, owner, slug, 2);
  }, 60_000);
  afterAll(() => app?.close());

  it("makes a caller wait for a slot, then answers 503 with Retry-After, never 500", async () => {
    const [a, b] = projects as [Project, Project];
    // A slow upload holds project A's workspace for as long as its body takes.
    let finish: () => void = () => {};
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("first part, "));
        finish = () => {
          controller.enqueue(new TextEncoder().encode("last part"));
          controller.close();
        };
      },
    });
    const upload = fetch(`${app.url}/w/${a.id}/api/files?name=slow.txt`, {
      method: "POST",
      headers: { authorization: `Bearer ${a.adminToken}`, "content-type": "text/plain" },
      body,
      duplex: "half",
    } as RequestInit);
    await until("the upload to hold the only slot", () => app.server.workspaces.size === 1);
    const started = Date.now();
    const refused = await callWorkspace(app, b.id, "GET", "/collections", { token: b.adminToken });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe("UNAVAILABLE");
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    // One that arrives while the slot is held, and gets it once the upload ends.
    const waiting = callWorkspace(app, b.id, "GET", "/collections", { token: b.adminToken });
    await new Promise((resolve) => setTimeout(resolve, 200));
    finish();
    expect((await upload).status).toBe(201);
    expect((await waiting).status).toBe(200);
    expect(app.server.workspaces.peak).toBe(1);
  });
});

describe("a restart with undispatched events in many workspaces", () => {
  let first: TestApp;
  let second: TestApp | undefined;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await startReceiver();
    first = await startApp({ WORKSPACE_MAX_OPEN: String(BOUND), ALLOW_PRIVATE_WEBHOOK_URLS: "true" });
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
    await receiver?.close();
  });

  it("delivers them all without opening more than the bound at once", async () => {
    const owner = await signUp(first);
    const slug = (await createOrg(first, owner, "Crashed")).slug;
    const projects = await createProjects(first, owner, slug, 200);
    for (const project of projects) {
      const hook = await callWorkspace(first, project.id, "POST", "/webhooks", {
        token: project.adminToken,
        body: {
          name: "sink",
          url: `${receiver.url}/${project.id}`,
          events: ["items"],
        },
      });
      expect(hook.status).toBe(201);
    }
    // What a crash after each commit leaves: an event in every outbox, its project hinted, and
    // nothing dispatched.
    const { deps } = first.server;
    const at = new Date().toISOString();
    for (const [n, project] of projects.entries()) {
      await onWorkspace(deps, project.id, (db) =>
        db
          .insertInto("events")
          .values({
            id: `evt_restart_${String(n).padStart(16, "0")}`,
            channel: "items:things",
            event: "created",
            data: JSON.stringify({ id: `itm_${n}` }),
            created_at: at,
          })
          .execute(),
      );
      await deps.db
        .insertInto("workspace_outbox_hints")
        .values({ project_id: project.id, created_at: at })
        .onConflict((oc) => oc.column("project_id").doUpdateSet({ created_at: at }))
        .execute();
    }
    await first.server.close();
    const descriptors = sampleMax(() => (dialect === "sqlite" ? workspaceDescriptors(first) : 0));
    second = await startApp(
      { WORKSPACE_MAX_OPEN: String(BOUND), ALLOW_PRIVATE_WEBHOOK_URLS: "true" },
      { shareDatabaseWith: first },
    );
    await until(
      "every event to be delivered",
      () => new Set(receiver.requests.map((r) => r.path)).size === 200,
      60_000,
    );
    const maxDescriptors = descriptors.stop();
    for (const project of projects) {
      expect(receiver.at(`/${project.id}`).length).toBeGreaterThanOrEqual(1);
    }
    expect(second.server.workspaces.peak).toBeLessThanOrEqual(BOUND);
    if (dialect === "sqlite") expect(maxDescriptors).toBeLessThanOrEqual(BOUND * FILES_PER_WORKSPACE);
  }, 180_000);
});
