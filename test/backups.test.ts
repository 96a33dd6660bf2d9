/**
 * Backups (DESIGN §9), through the real HTTP API on SQLite and PostgreSQL: snapshots taken by a
 * job, listed, restored exactly (items, users, files and their bytes), restored across a template
 * upgrade, undone by a point-in-time restore, capped per plan, expired, deleted, refused where
 * they must be.
 */
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAY_MS } from "../src/clock.ts";
import { dailyBackups } from "../src/domains/backups/jobs.ts";
import { backupDir, snapshotSchema } from "../src/domains/backups/snapshot.ts";
import { onWorkspace } from "../src/domains/projects/workspace-db.ts";
import { backupFilesPrefix, fileKey } from "../src/storage/keys.ts";
import {
  addMember,
  call,
  callWorkspace,
  createActiveProject,
  createApiKey,
  createOrg,
  dialect,
  expectError,
  expectNoContent,
  expectValidation,
  inParallel,
  type Mailbox,
  type Receiver,
  signUp,
  sleep,
  startApp,
  startMailbox,
  startReceiver,
  storedKeys,
  type TestApp,
  type TestUser,
  until,
} from "./harness.ts";

type Item = { id: string; n: number; note?: string; createdAt: string; updatedAt: string };
type Project = { id: string; slug: string; adminToken: string };

describe("backups", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let receiver: Receiver;
  let owner: TestUser;
  let slug: string;
  let project: Project;

  const ws = (p: Project, method: string, route: string, body?: unknown) =>
    callWorkspace(app, p.id, method, route, { token: p.adminToken, ...(body === undefined ? {} : { body }) });
  const backups = (p: Project) => `/org/${slug}/projects/${p.slug}/backups`;
  const as = (who: { cookie?: string; token?: string } = { cookie: owner.cookie }) => who;

  /** Asks for a backup and waits until its job has settled it. */
  async function backUp(p: Project, body?: unknown) {
    const created = await call(app, "POST", backups(p), {
      cookie: owner.cookie,
      ...(body === undefined ? {} : { body }),
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.backup.id as string;
    return until(`backup ${id} to settle`, async () => {
      const read = await call(app, "GET", `${backups(p)}/${id}`, { cookie: owner.cookie });
      return read.body.backup?.status !== "pending" ? read.body.backup : undefined;
    });
  }

  async function items(p: Project, collection = "things"): Promise<Map<string, Item>> {
    const all = new Map<string, Item>();
    for (let offset = 0; ; offset += 500) {
      const page = await ws(p, "GET", `/items/${collection}?limit=500&offset=${offset}`);
      expect(page.status).toBe(200);
      for (const item of page.body.items as Item[]) all.set(item.id, item);
      if (page.body.items.length < 500) return all;
    }
  }

  async function upload(p: Project, name: string, bytes: string): Promise<string> {
    const res = await fetch(`${app.url}/w/${p.id}/api/files?name=${name}`, {
      method: "POST",
      headers: { authorization: `Bearer ${p.adminToken}`, "content-type": "text/plain" },
      body: bytes,
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as { file: { id: string } }).file.id;
  }

  async function download(p: Project, id: string): Promise<{ status: number; text: string }> {
    const res = await fetch(`${app.url}/w/${p.id}/api/files/${id}`, {
      headers: { authorization: `Bearer ${p.adminToken}` },
    });
    return { status: res.status, text: await res.text() };
  }

  const signIn = (p: Project, email: string) =>
    callWorkspace(app, p.id, "POST", "/auth/sign-in", { body: { email, password: "correct horse battery" } });
  const signUpUser = (p: Project, email: string) =>
    callWorkspace(app, p.id, "POST", "/auth/sign-up", { body: { email, password: "correct horse battery" } });

  beforeAll(async () => {
    mailbox = await startMailbox();
    receiver = await startReceiver();
    app = await startApp({
      SMTP_URL: mailbox.url,
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      RATE_LIMIT_PER_MINUTE: "100000",
      DEFAULT_PLAN: "pro",
    });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Backup Org")).slug;
    project = await createActiveProject(app, owner, slug, "Backed up");
    expect((await ws(project, "POST", "/collections", { slug: "things" })).status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await receiver?.close();
    await mailbox?.close();
  });

  it("restores exactly the snapshot: items, users, files and their bytes", async () => {
    await inParallel(
      Array.from({ length: 300 }, (_, n) => n),
      async (n) => expect((await ws(project, "POST", "/items/things", { n, note: `"${n}" ✓` })).status).toBe(201),
    );
    expect((await signUpUser(project, "kept@example.com")).status).toBe(201);
    const removed = await signUpUser(project, "removed@example.com");
    expect(removed.status).toBe(201);
    const keptFile = await upload(project, "kept.txt", "bytes kept by the backup");
    const before = await items(project);

    const backup = await backUp(project);
    expect(backup).toMatchObject({
      kind: "manual",
      status: "completed",
      templateVersion: expect.any(String),
      expiresAt: null,
      restoredAt: null,
      error: null,
      projectId: project.id,
    });
    expect(backup.sizeBytes).toBeGreaterThan(0);
    expect(Date.parse(backup.completedAt)).toBeGreaterThanOrEqual(Date.parse(backup.createdAt));

    // Everything changes: items deleted, changed and added, a user gone and one new, a file
    // deleted (and its bytes swept away) and another uploaded.
    const ids = [...before.keys()];
    await inParallel(ids.slice(0, 100), async (id) =>
      expect((await ws(project, "DELETE", `/items/things/${id}`)).status).toBe(204),
    );
    await inParallel(ids.slice(100, 150), async (id) =>
      expect((await ws(project, "PATCH", `/items/things/${id}`, { note: "changed" })).status).toBe(200),
    );
    for (let n = 0; n < 20; n++)
      expect((await ws(project, "POST", "/items/things", { n: 1_000 + n })).status).toBe(201);
    expect((await ws(project, "DELETE", `/users/${removed.body.user.id}`)).status).toBe(204);
    expect((await signUpUser(project, "later@example.com")).status).toBe(201);
    expect((await ws(project, "DELETE", `/files/${keptFile}`)).status).toBe(204);
    await app.server.deps.storage.delete([fileKey(project.id, keptFile)]);
    const laterFile = await upload(project, "later.txt", "uploaded after the backup");
    const changed = await items(project);
    expect(changed.size).toBe(220);
    await sleep(20);
    const beforeRestore = Date.now();
    await sleep(20);

    const restored = await call(app, "POST", `${backups(project)}/${backup.id}/restore`, { cookie: owner.cookie });
    expect(restored.status, JSON.stringify(restored.body)).toBe(200);
    expect(restored.body.backup).toMatchObject({ id: backup.id, status: "completed", restoredAt: expect.any(String) });

    const after = await items(project);
    expect(after.size).toBe(before.size);
    for (const [id, item] of before) expect(after.get(id), id).toEqual(item);
    expect((await signIn(project, "kept@example.com")).status).toBe(200);
    expect((await signIn(project, "removed@example.com")).status).toBe(200);
    expectError(await signIn(project, "later@example.com"), 401);
    const files = await ws(project, "GET", "/files");
    expect(files.body.files.map((f: { id: string }) => f.id)).toEqual([keptFile]);
    expect(await download(project, keptFile)).toEqual({ status: 200, text: "bytes kept by the backup" });
    expect((await download(project, laterFile)).status).toBe(404);

    // A restore is history: a point-in-time restore to just before it undoes it.
    const listed = await call(app, "GET", backups(project), { cookie: owner.cookie });
    expect(listed.body.backups[0]).toMatchObject({ id: backup.id, restoredAt: restored.body.backup.restoredAt });
    const undo = await call(app, "POST", `/org/${slug}/projects/${project.slug}/restore`, {
      cookie: owner.cookie,
      body: { timestamp: beforeRestore },
    });
    expect(undo.status, JSON.stringify(undo.body)).toBe(200);
    const undone = await items(project);
    expect(undone.size).toBe(changed.size);
    for (const [id, item] of changed) expect(undone.get(id), id).toEqual(item);
  }, 120_000);

  it("sends workspace:restored once and project.restored, with a deploy record and an audit row", async () => {
    const p = await createActiveProject(app, owner, slug, "Announced");
    expect((await ws(p, "POST", "/collections", { slug: "things" })).status).toBe(201);
    const backup = await backUp(p);
    expect(
      (
        await ws(p, "POST", "/webhooks", {
          name: "resync",
          url: `${receiver.url}/ws-b`,
          events: ["workspace", "items"],
        })
      ).status,
    ).toBe(201);
    expect(
      (
        await call(app, "POST", `/org/${slug}/webhooks`, {
          cookie: owner.cookie,
          body: { url: `${receiver.url}/org-b`, events: ["project.restored"] },
        })
      ).status,
    ).toBe(201);
    for (let n = 0; n < 5; n++) expect((await ws(p, "POST", "/items/things", { n })).status).toBe(201);
    await receiver.waitFor("5 item events", (r) => r.path === "/ws-b", 5);
    const restored = await call(app, "POST", `${backups(p)}/${backup.id}/restore`, { cookie: owner.cookie });
    expect(restored.status).toBe(200);
    expect((await items(p)).size).toBe(0);
    const event = await receiver.waitFor(
      "workspace:restored",
      (r) => r.path === "/ws-b" && r.body.includes("restored"),
    );
    expect(JSON.parse(event.body)).toMatchObject({
      channel: "workspace",
      event: "restored",
      data: { restoredTo: backup.completedAt, source: "backup" },
    });
    const orgEvent = await receiver.waitFor("project.restored", (r) => r.path === "/org-b");
    expect(JSON.parse(orgEvent.body)).toMatchObject({
      event: "project.restored",
      payload: { projectId: p.id, source: "backup", backupId: backup.id, restoredTo: backup.completedAt },
    });
    await sleep(300);
    // Five item events and the restore's one: no event per item the restore removed.
    expect(receiver.at("/ws-b")).toHaveLength(6);
    // The webhook is configuration: the restore left it.
    expect((await ws(p, "GET", "/webhooks")).body.webhooks).toHaveLength(1);
    const deploys = await call(app, "GET", `/org/${slug}/projects/${p.slug}/deploys`, { cookie: owner.cookie });
    expect(deploys.body.deploys[0]).toMatchObject({ kind: "restore", status: "succeeded" });
    const audit = await call(app, "GET", `/org/${slug}/audit?action=project.restored`, { cookie: owner.cookie });
    expect(audit.body.events[0]).toMatchObject({
      target: { type: "project", id: p.id },
      data: { source: "backup", backupId: backup.id },
    });
    const created = await call(app, "GET", `/org/${slug}/audit?action=backup.created`, { cookie: owner.cookie });
    expect(created.body.events.length).toBeGreaterThan(0);
  });

  it("restores a snapshot of an older template version, migrated forward", async () => {
    const created = await call(app, "POST", `/org/${slug}/projects`, {
      cookie: owner.cookie,
      body: { name: "Old template", template: "default@1.0.0" },
    });
    expect(created.status).toBe(201);
    const p = created.body.project as Project;
    await until("old project active", async () => {
      const read = await call(app, "GET", `/org/${slug}/projects/${p.slug}`, { cookie: owner.cookie });
      return read.body.project?.status === "active";
    });
    expect((await ws(p, "POST", "/collections", { slug: "things" })).status).toBe(201);
    expect((await ws(p, "POST", "/items/things", { n: 1 })).status).toBe(201);
    expect((await signUpUser(p, "old@example.com")).status).toBe(201);
    const backup = await backUp(p);
    expect(backup.templateVersion).toBe("1.0.0");
    const upgraded = await call(app, "POST", `/org/${slug}/projects/${p.slug}/upgrade`, { cookie: owner.cookie });
    expect(upgraded.status, JSON.stringify(upgraded.body)).toBe(200);
    expect((await ws(p, "POST", "/items/things", { n: 2 })).status).toBe(201);

    const restored = await call(app, "POST", `${backups(p)}/${backup.id}/restore`, { cookie: owner.cookie });
    expect(restored.status, JSON.stringify(restored.body)).toBe(200);
    expect(restored.body.backup.templateVersion).toBe("1.1.0");
    const read = await call(app, "GET", `/org/${slug}/projects/${p.slug}`, { cookie: owner.cookie });
    expect(read.body.project.templateVersion).toBe("1.1.0");
    expect([...(await items(p)).values()].map((item) => item.n)).toEqual([1]);
    // The workspace kept 1.1.0's schema: e-mails are unique regardless of case.
    expect((await signIn(p, "old@example.com")).status).toBe(200);
    expectError(await signUpUser(p, "OLD@example.com"), 409);
  });

  it("refuses (409) a snapshot the newer template cannot take, changing nothing; two restores at once migrate it once", async () => {
    const created = await call(app, "POST", `/org/${slug}/projects`, {
      cookie: owner.cookie,
      body: { name: "Case twins", template: "default@1.0.0" },
    });
    const p = created.body.project as Project;
    await until("the project active", async () => {
      const read = await call(app, "GET", `/org/${slug}/projects/${p.slug}`, { cookie: owner.cookie });
      return read.body.project?.status === "active";
    });
    expect((await ws(p, "POST", "/collections", { slug: "things" })).status).toBe(201);
    expect((await signUpUser(p, "twin@example.com")).status).toBe(201);
    const clean = await backUp(p);
    // Two addresses differing in case only, as 1.0.0 allowed (written straight in: sign-up refuses).
    const twin = "usr_twin";
    await onWorkspace(app.server.deps, p.id, (db) =>
      db
        .insertInto("users")
        .values({
          id: twin,
          email: "TWIN@example.com",
          password_hash: "x",
          created_at: "2026-01-01T00:00:00.000Z",
          updated_at: "2026-01-01T00:00:00.000Z",
        })
        .execute(),
    );
    const twins = await backUp(p);
    await onWorkspace(app.server.deps, p.id, (db) => db.deleteFrom("users").where("id", "=", twin).execute());
    expect(
      (await call(app, "POST", `/org/${slug}/projects/${p.slug}/upgrade`, { cookie: owner.cookie })).body,
    ).toMatchObject({
      status: "upgraded",
    });
    expect((await ws(p, "POST", "/items/things", { n: 1 })).status).toBe(201);

    const refused = await call(app, "POST", `${backups(p)}/${twins.id}/restore`, { cookie: owner.cookie });
    expectError(refused, 409, "CONFLICT");
    expect(refused.body.error.message).toContain("1.1.0");
    expect((await items(p)).size).toBe(1);

    const [first, second] = await Promise.all(
      [0, 1].map(() => call(app, "POST", `${backups(p)}/${clean.id}/restore`, { cookie: owner.cookie })),
    );
    expect([first?.status, second?.status]).toEqual([200, 200]);
    expect((await items(p)).size).toBe(0);
    expect(
      (await call(app, "GET", `${backups(p)}/${clean.id}`, { cookie: owner.cookie })).body.backup.templateVersion,
    ).toBe("1.1.0");
  });

  it("never shows a reader a mix of before and after", async () => {
    const p = await createActiveProject(app, owner, slug, "Readers");
    expect((await ws(p, "POST", "/collections", { slug: "mix" })).status).toBe(201);
    const add = (from: number, n: number) =>
      inParallel(
        Array.from({ length: n }, (_, i) => from + i),
        async (i) => expect((await ws(p, "POST", "/items/mix", { i })).status).toBe(201),
      );
    await add(0, 200);
    const backup = await backUp(p);
    await add(200, 300);
    const count = async () => {
      const page = await ws(p, "GET", "/items/mix?limit=500");
      expect(page.status).toBe(200);
      return page.body.items.length as number;
    };
    const seen = new Set<number>();
    let reading = true;
    const readers = Array.from({ length: 4 }, async () => {
      while (reading) seen.add(await count());
    });
    await sleep(20);
    expect((await call(app, "POST", `${backups(p)}/${backup.id}/restore`, { cookie: owner.cookie })).status).toBe(200);
    await sleep(50);
    reading = false;
    await Promise.all(readers);
    for (const size of seen) expect([200, 500]).toContain(size);
    expect(seen.has(200)).toBe(true);
  });

  it("takes no body, {} or kind manual, each a manual backup; refuses another kind naming it (#7)", async () => {
    const p = await createActiveProject(app, owner, slug, "Kinds");
    const bare = await fetch(`${app.url}/api${backups(p)}`, { method: "POST", headers: { cookie: owner.cookie } });
    expect(bare.status).toBe(201);
    expect(((await bare.json()) as { backup: { kind: string } }).backup.kind).toBe("manual");
    // A client that always says JSON, with no body.
    const headerOnly = await call(app, "POST", backups(p), {
      cookie: owner.cookie,
      headers: { "content-type": "application/json" },
    });
    expect(headerOnly.status, JSON.stringify(headerOnly.body)).toBe(201);
    expect(headerOnly.body.backup.kind).toBe("manual");
    const empty = await call(app, "POST", backups(p), { cookie: owner.cookie, body: {} });
    expect(empty.status).toBe(201);
    expect(empty.body.backup).toMatchObject({ kind: "manual", status: "pending" });
    const manual = await backUp(p, { kind: "manual" });
    expect(manual).toMatchObject({ kind: "manual", status: "completed", expiresAt: null });
    for (const kind of ["bogus", 1, null])
      expectValidation(await call(app, "POST", backups(p), { cookie: owner.cookie, body: { kind } }), "kind");
  });

  it("refuses kind auto (422 naming kind), so it cannot pass the manual cap; nothing is created (#7)", async () => {
    const p = await createActiveProject(app, owner, slug, "Auto refused");
    const asAuto = (who: { cookie?: string; token?: string }) =>
      call(app, "POST", backups(p), { ...who, body: { kind: "auto" } });
    const deployKey = await createApiKey(app, owner, slug, "deploy");
    for (const who of [{ cookie: owner.cookie }, { token: deployKey.token }]) {
      const refused = await asAuto(who);
      expectValidation(refused, "kind");
      expect(refused.body.error.details).toEqual([
        { path: "kind", message: "automatic backups are taken by the daily job only" },
      ]);
    }
    // At the pro plan's cap of 10 manual backups, `auto` is no way around it.
    for (let i = 0; i < 10; i++) await backUp(p);
    expectError(await call(app, "POST", backups(p), { cookie: owner.cookie }), 409, "PLAN_LIMIT");
    expectValidation(await asAuto({ cookie: owner.cookie }), "kind");
    const list = await call(app, "GET", backups(p), { cookie: owner.cookie });
    expect(list.body.backups).toHaveLength(10);
    for (const backup of list.body.backups) expect(backup.kind).toBe("manual");
    const audit = await call(app, "GET", `/org/${slug}/audit?action=backup.created&limit=500`, {
      cookie: owner.cookie,
    });
    const created = audit.body.events.filter(
      (event: { data: { projectId?: string } }) => event.data.projectId === p.id,
    );
    expect(created).toHaveLength(10);
    for (const event of created) expect(event.data.kind).toBe("manual");
    // The OpenAPI document still lists both kinds, as Backup.kind has them.
    const document = (await call(app, "GET", "/openapi.json")).body;
    expect(document.components.schemas.BackupInput.properties.kind.enum).toEqual(["auto", "manual"]);
  });

  it("caps manual backups per plan, and deleting one frees its place and its snapshot", async () => {
    const p = await createActiveProject(app, owner, slug, "Capped");
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push((await backUp(p)).id);
    // Automatic backups (the daily job's) do not count.
    await dailyBackups(app.server.deps);
    await until("the automatic backup", async () => {
      const list = await call(app, "GET", backups(p), { cookie: owner.cookie });
      return list.body.backups.some(
        (b: { kind: string; status: string }) => b.kind === "auto" && b.status === "completed",
      );
    });
    const over = await call(app, "POST", backups(p), { cookie: owner.cookie });
    expectError(over, 409, "PLAN_LIMIT");
    expect(over.body.error.details).toEqual({ limit: 10, used: 10, planId: "pro" });

    const gone = ids[0] as string;
    expectNoContent(await call(app, "DELETE", `${backups(p)}/${gone}`, { cookie: owner.cookie }));
    expectError(await call(app, "GET", `${backups(p)}/${gone}`, { cookie: owner.cookie }), 404, "NOT_FOUND");
    expectError(await call(app, "DELETE", `${backups(p)}/${gone}`, { cookie: owner.cookie }), 404, "NOT_FOUND");
    expect(await snapshotExists(p.id, gone)).toBe(false);
    expect(await snapshotExists(p.id, ids[1] as string)).toBe(true);
    expect((await call(app, "POST", backups(p), { cookie: owner.cookie })).status).toBe(201);
    const list = await call(app, "GET", backups(p), { cookie: owner.cookie });
    expect(list.body.backups).toHaveLength(11);
    const listed = list.body.backups.map((b: { id: string }) => b.id);
    expect(listed).toEqual([...listed].sort().reverse());
  });

  async function snapshotExists(projectId: string, backupId: string): Promise<boolean> {
    const { deps } = app.server;
    if (deps.dialect === "sqlite") return existsSync(path.join(backupDir(deps, projectId), `${backupId}.db`));
    const { rows } = await sql<{
      n: number;
    }>`select count(*)::int as n from pg_namespace where nspname = ${snapshotSchema(backupId)}`.execute(deps.db);
    return rows[0]?.n === 1;
  }

  it("takes daily automatic backups and deletes them after the plan's window", async () => {
    const p = await createActiveProject(app, owner, slug, "Daily");
    const { deps } = app.server;
    await dailyBackups(deps);
    const auto = await until("the automatic backup", async () => {
      const list = await call(app, "GET", backups(p), { cookie: owner.cookie });
      const found = list.body.backups.find(
        (b: { kind: string; status: string }) => b.kind === "auto" && b.status === "completed",
      );
      return found;
    });
    // One a day: a second round the same day takes none.
    await dailyBackups(deps);
    await sleep(100);
    const again = await call(app, "GET", backups(p), { cookie: owner.cookie });
    expect(again.body.backups.filter((b: { kind: string }) => b.kind === "auto")).toHaveLength(1);
    expect(await snapshotExists(p.id, auto.id)).toBe(true);
    // The pro plan's 7-day window.
    expect(Date.parse(auto.expiresAt) - Date.parse(auto.completedAt)).toBe(7 * DAY_MS);

    app.clock.advance(8 * DAY_MS);
    try {
      await dailyBackups(deps);
      await until("the expired backup to go", async () => {
        const list = await call(app, "GET", backups(p), { cookie: owner.cookie });
        return !list.body.backups.some((b: { id: string }) => b.id === auto.id);
      });
      expect(await snapshotExists(p.id, auto.id)).toBe(false);
    } finally {
      app.clock.advance(-8 * DAY_MS);
    }
  });

  it("leaves a failed backup with its error and a notification, and nothing half-written", async () => {
    const p = await createActiveProject(app, owner, slug, "Broken");
    const fileId = await upload(p, "gone.txt", "these bytes will vanish");
    await app.server.deps.storage.delete([fileKey(p.id, fileId)]);
    const failed = await backUp(p);
    expect(failed.status).toBe("failed");
    expect(failed.error).toContain(fileId);
    expect(await snapshotExists(p.id, failed.id)).toBe(false);
    const dir = backupDir(app.server.deps, p.id);
    expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
    expect(await storedKeys(app.server.deps, backupFilesPrefix(p.id, failed.id))).toEqual([]);
    const notes = await call(app, "GET", `/org/${slug}/notifications`, { cookie: owner.cookie });
    expect(
      notes.body.notifications.some(
        (n: { kind: string; data: { backupId?: string } }) =>
          n.kind === "backup.failed" && n.data.backupId === failed.id,
      ),
    ).toBe(true);
    // A failed backup cannot be restored, and does not count against the cap.
    expectError(
      await call(app, "POST", `${backups(p)}/${failed.id}/restore`, { cookie: owner.cookie }),
      409,
      "CONFLICT",
    );
  });

  it("refuses pending backups and projects that are not active or paused; 404s unknown ids", async () => {
    const p = await createActiveProject(app, owner, slug, "Lifecycle");
    const other = await createActiveProject(app, owner, slug, "Other");
    const backup = await backUp(p);
    const theirs = await backUp(other);
    const { deps } = app.server;
    await deps.db.updateTable("backups").set({ status: "pending" }).where("id", "=", backup.id).execute();
    expectError(
      await call(app, "POST", `${backups(p)}/${backup.id}/restore`, { cookie: owner.cookie }),
      409,
      "CONFLICT",
    );
    await deps.db.updateTable("backups").set({ status: "completed" }).where("id", "=", backup.id).execute();

    for (const id of [theirs.id, "bkp_00000000000000000000000000", "nonsense", "../x"]) {
      expectError(await call(app, "GET", `${backups(p)}/${encodeURIComponent(id)}`, { cookie: owner.cookie }), 404);
      expectError(
        await call(app, "POST", `${backups(p)}/${encodeURIComponent(id)}/restore`, { cookie: owner.cookie }),
        404,
      );
      expectError(await call(app, "DELETE", `${backups(p)}/${encodeURIComponent(id)}`, { cookie: owner.cookie }), 404);
    }
    expectError(await call(app, "GET", `/org/${slug}/projects/nope/backups`, { cookie: owner.cookie }), 404);

    // Paused: backed up and restored alike.
    expect((await call(app, "POST", `/org/${slug}/projects/${p.slug}/pause`, { cookie: owner.cookie })).status).toBe(
      200,
    );
    expect((await backUp(p)).status).toBe("completed");
    expect((await call(app, "POST", `${backups(p)}/${backup.id}/restore`, { cookie: owner.cookie })).status).toBe(200);
    // Provisioning, failed: 409.
    await deps.db.updateTable("projects").set({ status: "provisioning" }).where("id", "=", p.id).execute();
    expectError(await call(app, "POST", backups(p), { cookie: owner.cookie }), 409, "CONFLICT");
    expectError(
      await call(app, "POST", `${backups(p)}/${backup.id}/restore`, { cookie: owner.cookie }),
      409,
      "CONFLICT",
    );
    await deps.db.updateTable("projects").set({ status: "paused" }).where("id", "=", p.id).execute();
    // Deleted: gone.
    expect((await call(app, "DELETE", `/org/${slug}/projects/${p.slug}`, { cookie: owner.cookie })).status).toBe(200);
    expectError(await call(app, "GET", backups(p), { cookie: owner.cookie }), 404);
    // A deleted project is still there (until its purge) but cannot be restored: 409, not 404.
    expectError(
      await call(app, "POST", `${backups(p)}/${backup.id}/restore`, { cookie: owner.cookie }),
      409,
      "CONFLICT",
    );
    expectError(
      await call(app, "POST", `/org/${slug}/projects/${p.slug}/restore`, {
        cookie: owner.cookie,
        body: { timestamp: Date.now() - 1_000 },
      }),
      409,
      "CONFLICT",
    );
  });

  it("is for developers and deploy keys; viewers read, read-only keys and other orgs are refused", async () => {
    const p = await createActiveProject(app, owner, slug, "Roles");
    const backup = await backUp(p);
    const viewer = await addMember(app, mailbox, owner, slug, "viewer");
    const developer = await addMember(app, mailbox, owner, slug, "developer");
    const deployKey = await createApiKey(app, owner, slug, "deploy");
    const readOnly = await createApiKey(app, owner, slug, "read-only");
    const outsider = await signUp(app);
    await createOrg(app, outsider, "Elsewhere");
    const outsiderKey = await createApiKey(
      app,
      outsider,
      (await call(app, "GET", "/orgs", { cookie: outsider.cookie })).body.orgs[0].slug,
      "full",
    );

    const restore = (who: { cookie?: string; token?: string }) =>
      call(app, "POST", `${backups(p)}/${backup.id}/restore`, as(who));
    expect((await call(app, "POST", backups(p), as({ cookie: developer.user.cookie }))).status).toBe(201);
    expect((await call(app, "POST", backups(p), as({ token: deployKey.token }))).status).toBe(201);
    expect((await restore({ cookie: developer.user.cookie })).status).toBe(200);
    expect((await restore({ token: deployKey.token })).status).toBe(200);
    expect((await call(app, "GET", backups(p), as({ cookie: viewer.user.cookie }))).status).toBe(200);
    expect((await call(app, "GET", backups(p), as({ token: readOnly.token }))).status).toBe(200);
    for (const who of [{ cookie: viewer.user.cookie }, { token: readOnly.token }]) {
      expectError(await call(app, "POST", backups(p), as(who)), 403, "FORBIDDEN");
      expectError(await restore(who), 403, "FORBIDDEN");
      expectError(await call(app, "DELETE", `${backups(p)}/${backup.id}`, as(who)), 403, "FORBIDDEN");
    }
    for (const who of [{ cookie: outsider.cookie }, { token: outsiderKey.token }]) {
      expectError(await call(app, "GET", backups(p), as(who)), 404, "NOT_FOUND");
      expectError(await call(app, "POST", backups(p), as(who)), 404, "NOT_FOUND");
      expectError(await restore(who), 404, "NOT_FOUND");
    }
    expectError(await call(app, "GET", backups(p), {}), 401, "UNAUTHORIZED");
    expect(dialect === "sqlite" || dialect === "postgres").toBe(true);
  });
});
