import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addMember,
  call,
  callWorkspace,
  createActiveProject,
  createApiKey,
  createOrg,
  expectError,
  expectValidation,
  inParallel,
  type Mailbox,
  type Receiver,
  signUp,
  sleep,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
  type TestUser,
  until,
} from "./harness.ts";

type Item = { id: string; n: number; note?: string; createdAt: string; updatedAt: string };

describe("point-in-time restore from continuous history", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let receiver: Receiver;
  let owner: TestUser;
  let slug: string;
  let project: { id: string; slug: string; adminToken: string };

  const ws = (method: string, path: string, body?: unknown) =>
    callWorkspace(app, project.id, method, path, {
      token: project.adminToken,
      ...(body === undefined ? {} : { body }),
    });
  const restore = (timestamp: unknown, who: { cookie?: string; token?: string } = { cookie: owner.cookie }) =>
    call(app, "POST", `/org/${slug}/projects/${project.slug}/restore`, { ...who, body: { timestamp } });

  /** Every item of `things`, by id. */
  async function items(): Promise<Map<string, Item>> {
    const all = new Map<string, Item>();
    for (let offset = 0; ; offset += 500) {
      const page = await ws("GET", `/items/things?limit=500&offset=${offset}`);
      expect(page.status).toBe(200);
      for (const item of page.body.items as Item[]) all.set(item.id, item);
      if (page.body.items.length < 500) return all;
    }
  }

  beforeAll(async () => {
    mailbox = await startMailbox();
    receiver = await startReceiver();
    app = await startApp({
      SMTP_URL: mailbox.url,
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      RATE_LIMIT_PER_MINUTE: "100000",
    });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Restore Org")).slug;
    project = await createActiveProject(app, owner, slug, "Restored");
    expect((await ws("POST", "/collections", { slug: "things" })).status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await receiver?.close();
    await mailbox?.close();
  });

  it("brings back exactly the rows of an instant, and a restore to just after undoes it", async () => {
    await inParallel(
      Array.from({ length: 1_000 }, (_, n) => n),
      async (n) => expect((await ws("POST", "/items/things", { n, note: `it's "item" ${n} ✓` })).status).toBe(201),
    );
    const before = await items();
    expect(before.size).toBe(1_000);
    await sleep(20);
    const beforeChanges = Date.now();
    await sleep(20);
    const ids = [...before.keys()];
    await inParallel(ids.slice(0, 300), async (id) =>
      expect((await ws("DELETE", `/items/things/${id}`)).status).toBe(204),
    );
    await inParallel(ids.slice(300, 500), async (id) =>
      expect((await ws("PATCH", `/items/things/${id}`, { note: "changed" })).status).toBe(200),
    );
    const after = await items();
    expect(after.size).toBe(700);
    await sleep(20);
    const afterChanges = Date.now();
    await sleep(20);

    const back = await restore(beforeChanges);
    expect(back.status, JSON.stringify(back.body)).toBe(200);
    expect(back.body).toEqual({ restoredTo: new Date(beforeChanges).toISOString() });
    const restored = await items();
    expect(restored.size).toBe(1_000);
    for (const [id, item] of before) expect(restored.get(id), id).toEqual(item);

    // The restore is history too: an instant after the changes (and before the restore) undoes it.
    const forward = await restore(afterChanges);
    expect(forward.status).toBe(200);
    const again = await items();
    expect(again.size).toBe(700);
    for (const [id, item] of after) expect(again.get(id), id).toEqual(item);
  }, 120_000);

  it("takes Unix seconds too, and tells the window", async () => {
    const window = await call(app, "GET", `/org/${slug}/projects/${project.slug}/restore-window`, {
      cookie: owner.cookie,
    });
    expect(window.status).toBe(200);
    const earliest = Date.parse(window.body.earliest);
    const latest = Date.parse(window.body.latest);
    expect(latest).toBeGreaterThan(earliest);
    expect(Math.abs(latest - Date.now())).toBeLessThan(5_000);
    const seconds = Math.floor(Date.now() / 1000) - 1;
    const res = await restore(seconds);
    expect(res.status).toBe(200);
    expect(res.body.restoredTo).toBe(new Date(seconds * 1000).toISOString());
  });

  it("refuses an instant outside the window, or a timestamp that is none, naming timestamp", async () => {
    const window = await call(app, "GET", `/org/${slug}/projects/${project.slug}/restore-window`, {
      cookie: owner.cookie,
    });
    for (const timestamp of [Date.parse(window.body.earliest) - 60_000, Date.now() + 60_000]) {
      const res = await restore(timestamp);
      expectValidation(res, "timestamp");
      expect(res.body.error.message).toContain(window.body.earliest.slice(0, 16));
    }
    for (const timestamp of [0, -5, 1.5, "1700000000000", null])
      expectValidation(await restore(timestamp), "timestamp");
    expectValidation(
      await call(app, "POST", `/org/${slug}/projects/${project.slug}/restore`, { cookie: owner.cookie, body: {} }),
      "timestamp",
    );
  });

  it("never shows a reader a mix of before and after", async () => {
    // One request reads the whole collection (at most 500 items), so each count is one read.
    expect((await ws("POST", "/collections", { slug: "mix" })).status).toBe(201);
    const count = async () => {
      const page = await ws("GET", "/items/mix?limit=500");
      expect(page.status).toBe(200);
      return page.body.items.length as number;
    };
    const add = (from: number, n: number) =>
      inParallel(
        Array.from({ length: n }, (_, i) => from + i),
        async (i) => expect((await ws("POST", "/items/mix", { i })).status).toBe(201),
      );
    await add(0, 200);
    await sleep(20);
    const instant = Date.now();
    await sleep(20);
    await add(200, 300);
    expect(await count()).toBe(500);
    const seen = new Set<number>();
    let reading = true;
    const readers = Array.from({ length: 4 }, async () => {
      while (reading) seen.add(await count());
    });
    await sleep(20);
    expect((await restore(instant)).status).toBe(200);
    await sleep(50);
    reading = false;
    await Promise.all(readers);
    expect([...seen].sort()).toEqual(expect.arrayContaining([200]));
    for (const size of seen) expect([200, 500]).toContain(size);
    expect(await count()).toBe(200);
  });

  it("brings a deleted file back with its bytes", async () => {
    const uploaded = await fetch(`${app.url}/w/${project.id}/api/files?name=keep.txt`, {
      method: "POST",
      headers: { authorization: `Bearer ${project.adminToken}`, "content-type": "text/plain" },
      body: "the bytes that matter",
    });
    expect(uploaded.status).toBe(201);
    const { file } = (await uploaded.json()) as { file: { id: string } };
    await sleep(20);
    const instant = Date.now();
    await sleep(20);
    expect((await ws("DELETE", `/files/${file.id}`)).status).toBe(204);
    expect((await ws("GET", `/files/${file.id}`)).status).toBe(404);
    expect((await restore(instant)).status).toBe(200);
    const download = await fetch(`${app.url}/w/${project.id}/api/files/${file.id}`, {
      headers: { authorization: `Bearer ${project.adminToken}` },
    });
    expect(download.status).toBe(200);
    expect(await download.text()).toBe("the bytes that matter");
  });

  it("sends workspace:restored once and project.restored, with a deploy record and an audit row", async () => {
    const hook = await ws("POST", "/webhooks", { name: "resync", url: `${receiver.url}/ws`, events: ["workspace"] });
    expect(hook.status).toBe(201);
    const orgHook = await call(app, "POST", `/org/${slug}/webhooks`, {
      cookie: owner.cookie,
      body: { url: `${receiver.url}/org`, events: ["project.restored"] },
    });
    expect(orgHook.status).toBe(201);
    await sleep(20);
    const instant = Date.now();
    await sleep(20);
    expect((await ws("POST", "/items/things", { n: -1 })).status).toBe(201);
    expect((await restore(instant)).status).toBe(200);
    const workspaceEvent = await receiver.waitFor("workspace:restored", (r) => r.path === "/ws");
    const body = JSON.parse(workspaceEvent.body);
    expect(body).toMatchObject({
      channel: "workspace",
      event: "restored",
      data: { restoredTo: new Date(instant).toISOString(), source: "pitr" },
    });
    const orgEvent = await receiver.waitFor("project.restored", (r) => r.path === "/org");
    expect(JSON.parse(orgEvent.body)).toMatchObject({
      event: "project.restored",
      payload: { projectId: project.id, projectSlug: project.slug, source: "pitr", restoredTo: body.data.restoredTo },
    });
    await sleep(300);
    // One event for the restore, none per item it changed.
    expect(receiver.at("/ws")).toHaveLength(1);
    const deploys = await call(app, "GET", `/org/${slug}/projects/${project.slug}/deploys`, { cookie: owner.cookie });
    expect(deploys.body.deploys[0]).toMatchObject({ kind: "restore", status: "succeeded" });
    const audit = await call(app, "GET", `/org/${slug}/audit?action=project.restored`, { cookie: owner.cookie });
    expect(audit.body.events[0]).toMatchObject({
      action: "project.restored",
      target: { type: "project", id: project.id },
      data: { source: "pitr" },
    });
  });

  it("is for developers and deploy keys; viewers, read-only keys and other orgs are refused", async () => {
    const viewer = await addMember(app, mailbox, owner, slug, "viewer");
    const developer = await addMember(app, mailbox, owner, slug, "developer");
    const deployKey = await createApiKey(app, owner, slug, "deploy");
    const readOnly = await createApiKey(app, owner, slug, "read-only");
    const outsider = await signUp(app);
    await createOrg(app, outsider, "Elsewhere");
    const instant = Date.now() - 1_000;
    expect((await restore(instant, { cookie: developer.user.cookie })).status).toBe(200);
    expect((await restore(instant, { token: deployKey.token })).status).toBe(200);
    expectError(await restore(instant, { cookie: viewer.user.cookie }), 403, "FORBIDDEN");
    expectError(await restore(instant, { token: readOnly.token }), 403, "FORBIDDEN");
    expectError(await restore(instant, { cookie: outsider.cookie }), 404, "NOT_FOUND");
    expectError(await restore(instant, {}), 401, "UNAUTHORIZED");
    // The window is a read: any member.
    const window = await call(app, "GET", `/org/${slug}/projects/${project.slug}/restore-window`, {
      cookie: viewer.user.cookie,
    });
    expect(window.status).toBe(200);
  });

  it("refuses a paused project's neighbours in other states: 409 while provisioning and once deleted", async () => {
    const other = await call(app, "POST", `/org/${slug}/projects`, { cookie: owner.cookie, body: { name: "Fresh" } });
    expect(other.status).toBe(201);
    const path = `/org/${slug}/projects/${other.body.project.slug}`;
    // Provisioning takes a job; right after creation it is usually still provisioning.
    const early = await call(app, "POST", `${path}/restore`, { cookie: owner.cookie, body: { timestamp: Date.now() } });
    expect([409, 422, 200]).toContain(early.status);
    await until("the project to be active", async () => {
      const read = await call(app, "GET", path, { cookie: owner.cookie });
      return read.body.project.status === "active";
    });
    expect((await call(app, "POST", `${path}/pause`, { cookie: owner.cookie })).status).toBe(200);
    await sleep(10);
    expect(
      (await call(app, "POST", `${path}/restore`, { cookie: owner.cookie, body: { timestamp: Date.now() - 5 } }))
        .status,
    ).toBe(200);
    expect((await call(app, "DELETE", path, { cookie: owner.cookie })).status).toBe(200);
    // Deleted, it is still there until its purge, but cannot be restored.
    expectError(
      await call(app, "POST", `${path}/restore`, { cookie: owner.cookie, body: { timestamp: Date.now() } }),
      409,
      "CONFLICT",
    );
    expectError(await call(app, "GET", `${path}/restore-window`, { cookie: owner.cookie }), 404, "NOT_FOUND");
  });
});
