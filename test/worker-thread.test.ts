import path from "node:path";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SQLite } from "../src/db/sqlite.ts";
import { workspaceSchema } from "../src/domains/projects/workspace-db.ts";
import {
  call,
  callWorkspace,
  createOrg,
  dialect,
  hmacHex,
  type Receiver,
  signUp,
  startApp,
  startReceiver,
  type TestApp,
  type TestUser,
  until,
} from "./harness.ts";

/**
 * A server whose jobs run on a worker thread (WORKER_THREAD=true, the default outside the other
 * tests, which keep jobs on their own event loop for the manual clock): provisioning, control-plane
 * and workspace webhook deliveries, a retry after a failure, and a clean shutdown, all through
 * the real HTTP API with the thread doing the work.
 */

/** Events still in a project's workspace outbox (the thread dispatches them, the server deletes them). */
async function outboxSize(app: TestApp, projectId: string): Promise<number> {
  if (dialect === "postgres") {
    const { rows } = await sql<{
      n: string;
    }>`select count(*) as n from ${sql.id(workspaceSchema(projectId), "events")}`.execute(app.server.deps.db);
    return Number(rows[0]?.n);
  }
  const db = new SQLite(path.join(app.config.dataDir, "workspaces", `${projectId}.db`), { readonly: true });
  try {
    return (db.prepare("select count(*) as n from events").get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe("jobs on a worker thread", () => {
  let app: TestApp;
  let owner: TestUser;
  let orgSlug: string;
  let receiver: Receiver;
  let project: { id: string; slug: string; adminToken: string };

  beforeAll(async () => {
    app = await startApp({
      WORKER_THREAD: "true",
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      WEBHOOK_BACKOFF_BASE_MS: "20",
      RATE_LIMIT_PER_MINUTE: "1000000",
    });
    // /flaky fails its first request.
    receiver = await startReceiver((request) => {
      const first = receiver.at(request.path).length === 1;
      return { status: request.path === "/flaky" && first ? 503 : 200 };
    });
    owner = await signUp(app);
    orgSlug = (await createOrg(app, owner, "Thread Org")).slug;
    const created = await call(app, "POST", `/org/${orgSlug}/projects`, {
      cookie: owner.cookie,
      body: { name: "Threaded" },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    project = created.body.project;
    // Provisioning is a job: the thread runs it.
    await until("the project to be provisioned", async () => {
      const res = await call(app, "GET", `/org/${orgSlug}/projects/${project.slug}`, { cookie: owner.cookie });
      return res.body.project.status === "active";
    });
  });

  afterAll(async () => {
    await app?.close();
    await receiver?.close();
  });

  it("serves writes while the thread writes the same database: 20 projects created at once, all provisioned", async () => {
    // The API thread's transactions read, then write; the thread commits provisioning meanwhile.
    const created = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call(app, "POST", `/org/${orgSlug}/projects`, { cookie: owner.cookie, body: { name: `Busy ${i}` } }),
      ),
    );
    for (const res of created) expect(res.status, JSON.stringify(res.body)).toBe(201);
    await until("every project to be provisioned", async () => {
      const res = await call(app, "GET", `/org/${orgSlug}/projects?limit=100`, { cookie: owner.cookie });
      const busy = (res.body.projects as Array<{ name: string; status: string }>).filter((p) =>
        p.name.startsWith("Busy"),
      );
      return busy.length === 20 && busy.every((p) => p.status === "active");
    });
  });

  it("delivers a control-plane event signed, from a change made through the API", async () => {
    const hook = await call(app, "POST", `/org/${orgSlug}/webhooks`, {
      cookie: owner.cookie,
      body: { url: `${receiver.url}/org`, events: ["project.paused"] },
    });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    const paused = await call(app, "POST", `/org/${orgSlug}/projects/${project.slug}/pause`, { cookie: owner.cookie });
    expect(paused.status, JSON.stringify(paused.body)).toBe(200);

    const request = await receiver.waitFor("project.paused", (r) => r.path === "/org");
    const timestamp = String(request.headers["x-service-timestamp"]);
    expect(request.headers["x-service-signature-v2"]).toBe(hmacHex(hook.body.secret, `${timestamp}.${request.body}`));
    expect(JSON.parse(request.body)).toMatchObject({
      event: "project.paused",
      payload: { projectId: project.id, projectSlug: project.slug },
    });

    const resumed = await call(app, "POST", `/org/${orgSlug}/projects/${project.slug}/resume`, {
      cookie: owner.cookie,
    });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
  });

  it("delivers workspace events through the thread's dispatcher, retrying a failed attempt", async () => {
    const api = (method: string, path: string, body?: unknown) =>
      callWorkspace(app, project.id, method, path, { token: project.adminToken, body });

    expect((await api("POST", "/collections", { slug: "posts" })).status).toBe(201);
    const hook = await api("POST", "/webhooks", {
      name: "thread-hook",
      url: `${receiver.url}/flaky`,
      events: ["items:posts"],
      secret: "s3cret",
    });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);

    const titles = ["one", "two", "three"];
    for (const title of titles) expect((await api("POST", "/items/posts", { title })).status).toBe(201);

    // The first request of all gets 503; its delivery is retried and succeeds.
    await until(
      "every item delivered, one of them after a retry",
      () => receiver.at("/flaky").length >= titles.length + 1,
    );
    const deliveries = await until("attempts recorded", async () => {
      const res = await api("GET", `/webhooks/${hook.body.webhook.id}/deliveries`);
      const rows = res.body.deliveries as Array<{ status: string; attemptCount: number }>;
      return rows.length === titles.length && rows.every((row) => row.status === "succeeded") && rows;
    });
    expect(deliveries.map((row) => row.attemptCount).sort()).toEqual([1, 1, 2]);
    // Dispatched events leave the outbox.
    await until("the outbox to be empty", async () => (await outboxSize(app, project.id)) === 0);
    const received = receiver.at("/flaky").map((r) => JSON.parse(r.body));
    expect(new Set(received.map((body) => body.data.title))).toEqual(new Set(titles));
    const [failed, retried] = receiver
      .at("/flaky")
      .filter((r, _, all) => r.headers["x-service-delivery"] === all[0]?.headers["x-service-delivery"]);
    expect(failed && retried).toBeTruthy();
    for (const request of receiver.at("/flaky")) {
      const timestamp = String(request.headers["x-service-timestamp"]);
      expect(request.headers["x-service-signature-v2"]).toBe(hmacHex("s3cret", `${timestamp}.${request.body}`));
    }
  });
});
