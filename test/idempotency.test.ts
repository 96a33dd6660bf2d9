import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pruneIdempotencyKeys } from "../src/http/idempotency.ts";
import {
  addMember,
  type CallResult,
  call,
  callWorkspace,
  createActiveProject,
  createApiKey,
  createOrg,
  type Mailbox,
  signUp,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
  type TestUser,
  until,
} from "./harness.ts";

let app: TestApp;
let mailbox: Mailbox;
let owner: TestUser;
let slug: string;
let key: string;
let projectId: string;
let adminToken: string;

/** A POST to the workspace API as the given bearer, under an Idempotency-Key when one is given. */
function ws(path: string, token: string, body: unknown, idempotencyKey?: string): Promise<CallResult> {
  const options = { token, body };
  return callWorkspace(app, projectId, "POST", path, idempotencyKey ? withKey(idempotencyKey, options) : options);
}

async function items(collection: string): Promise<{ id: string }[]> {
  const res = await callWorkspace(app, projectId, "GET", `/items/${collection}?limit=500`, { token: adminToken });
  return res.body.items;
}

/** A project create by the org's API key, under an Idempotency-Key. */
function createProject(idempotencyKey: string, name: string): Promise<CallResult> {
  return call(app, "POST", `/org/${slug}/projects`, withKey(idempotencyKey, { token: key, body: { name } }));
}

function withKey(idempotencyKey: string, options: Parameters<typeof call>[3] = {}) {
  return { ...options, headers: { ...options.headers, "idempotency-key": idempotencyKey } };
}

beforeAll(async () => {
  mailbox = await startMailbox();
  app = await startApp({ WORKER_POLL_MS: "50", ALLOW_PRIVATE_WEBHOOK_URLS: "true", SMTP_URL: mailbox.url });
  owner = await signUp(app);
  slug = (await createOrg(app, owner, "Idempotent")).slug;
  key = (await createApiKey(app, owner, slug, "full")).token;
  const project = await createActiveProject(app, owner, slug, "Retries");
  projectId = project.id;
  adminToken = project.adminToken;
  expect((await ws("/collections", adminToken, { slug: "notes" })).status).toBe(201);
});

afterAll(async () => {
  await app?.close();
  await mailbox?.close();
});

describe("Idempotency-Key on POST", () => {
  it("replays a project create's answer, admin token and all, and creates one project", async () => {
    const first = await createProject("create-1", "Once");
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const again = await createProject("create-1", "Once");
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.headers.get("content-type")).toContain("application/json");
    expect(again.headers.get("x-request-id")).not.toBe(first.headers.get("x-request-id"));
    expect(again.body).toEqual(first.body);
    expect(again.body.adminToken).toMatch(/^wsa_/);

    const projects = (await call(app, "GET", `/org/${slug}/projects`, { token: key })).body.projects;
    expect(projects.filter((p: { name: string }) => p.name === "Once")).toHaveLength(1);
    const audit = (await call(app, "GET", `/org/${slug}/audit?action=project.created`, { token: key })).body.events;
    expect(audit.filter((e: { target: { id: string } }) => e.target.id === first.body.project.id)).toHaveLength(1);

    // The stored answer holds the admin token only sealed, and the key only hashed: the
    // database has neither in clear.
    const rows = await sql<{ key: string; response: string }>`select key, response from idempotency_keys`.execute(
      app.server.deps.db,
    );
    expect(rows.rows.length).toBeGreaterThan(0);
    for (const row of rows.rows) {
      expect(row.response).not.toContain(first.body.adminToken);
      expect(row.key).toMatch(/^[0-9a-f]{64}$/);
    }
  });

  it("refuses the key with another request (422) and keeps it per caller", async () => {
    const first = await ws("/items/notes", adminToken, { n: 1 }, "item-1");
    expect(first.status).toBe(201);
    const replay = await ws("/items/notes", adminToken, { n: 1 }, "item-1");
    expect(replay.status).toBe(201);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.item.id).toBe(first.body.item.id);

    const different = await ws("/items/notes", adminToken, { n: 2 }, "item-1");
    expect(different.status).toBe(422);
    expect(different.body.error.code).toBe("VALIDATION");
    expect(different.body.error.details[0].path).toBe("header.Idempotency-Key");
    const otherPath = await ws("/collections", adminToken, { slug: "other" }, "item-1");
    expect(otherPath.status).toBe(422);

    // Another credential has keys of its own: the org key's "item-1" is a new request.
    const byKey = await ws("/items/notes", key, { n: 1 }, "item-1");
    expect(byKey.status).toBe(201);
    expect(byKey.headers.get("idempotent-replayed")).toBeNull();
    expect(byKey.body.item.id).not.toBe(first.body.item.id);

    const ids = (await items("notes")).map((item) => item.id);
    expect(ids.filter((id) => id === first.body.item.id)).toHaveLength(1);
    expect(ids).toHaveLength(2);
  });

  it("keeps only a success: after a 4xx or a 5xx, which changed nothing, the key runs again", async () => {
    const invalid = await createProject("bad-1", "x");
    expect(invalid.status).toBe(422);
    // Fixed, the request may use the same key: it is a new request.
    const fixed = await createProject("bad-1", "Fixed");
    expect(fixed.status, JSON.stringify(fixed.body)).toBe(201);
    expect(fixed.headers.get("idempotent-replayed")).toBeNull();

    const db = app.server.deps.db;
    const createHook = () =>
      call(
        app,
        "POST",
        `/org/${slug}/webhooks`,
        withKey("fail-1", { token: key, body: { url: "https://hooks.example.com/x", events: ["*"] } }),
      );
    await sql`alter table audit_events rename to audit_events_moved`.execute(db);
    let failed: CallResult;
    try {
      failed = await createHook();
    } finally {
      await sql`alter table audit_events_moved rename to audit_events`.execute(db);
    }
    expect(failed.status).toBe(500);
    const retried = await createHook();
    expect(retried.status, JSON.stringify(retried.body)).toBe(201);
    expect(retried.headers.get("idempotent-replayed")).toBeNull();
    expect(retried.body.secret).toMatch(/^whsec_/);
  });

  it("runs concurrent requests with one key once: the others hear 409 or the replay", async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, () => ws("/items/notes", adminToken, { race: true }, "race-1")),
    );
    const statuses = results.map((res) => res.status);
    for (const status of statuses) expect([201, 409]).toContain(status);
    const created = results.filter((res) => res.status === 201);
    expect(created.length).toBeGreaterThan(0);
    expect(new Set(created.map((res) => res.body.item.id)).size).toBe(1);
    for (const res of results.filter((r) => r.status === 409)) expect(res.body.error.code).toBe("CONFLICT");
    const raced = (await items("notes")).filter((item) => (item as { race?: boolean }).race);
    expect(raced).toHaveLength(1);
  });

  it("refuses a malformed key, and ignores a key on other methods and without a credential", async () => {
    for (const bad of ["has space", "x".repeat(256), "é"]) {
      const res = await ws("/items/notes", adminToken, { n: 3 }, bad);
      expect(res.status, bad).toBe(422);
      expect(res.body.error.details[0].path).toBe("header.Idempotency-Key");
    }
    const anonymous = await call(app, "POST", `/org/${slug}/projects`, withKey("anon-1", { body: { name: "Nope" } }));
    expect(anonymous.status).toBe(401);
    // Operations that do not take part ignore the header, whatever it holds.
    const signIn = await call(
      app,
      "POST",
      "/auth/sign-in/email",
      withKey("has space", { body: { email: owner.email, password: "wrong-password-1" } }),
    );
    expect(signIn.status).toBe(401);
  });

  it("lets a request whose holder stalled past its lease be taken over, and only the new holder records", async () => {
    let release: () => void = () => {};
    const stalled = new Promise<void>((resolve) => {
      release = resolve;
    });
    const receiver = await startReceiver(async (_request, index) => {
      if (index === 0) await stalled;
      return { status: 200, body: `answer ${index}` };
    });
    try {
      const created = await call(app, "POST", `/org/${slug}/webhooks`, {
        token: key,
        body: { url: `${receiver.url}/hook`, events: ["*"] },
      });
      expect(created.status).toBe(201);
      const test = () =>
        call(app, "POST", `/webhooks/${created.body.webhook.id}/test`, withKey("lease-1", { token: key }));
      const first = test();
      await until("the first test send to arrive", () => receiver.requests.length === 1);
      expect((await test()).status).toBe(409);
      app.clock.advance(11 * 60 * 1000);
      let second: CallResult;
      try {
        second = await test();
      } finally {
        app.clock.advance(-11 * 60 * 1000);
      }
      expect(second.status).toBe(200);
      expect(second.headers.get("idempotent-replayed")).toBeNull();
      release();
      expect((await first).status).toBe(200);
      // The first request, taken over, did not overwrite the answer kept for the second.
      const third = await test();
      expect(third.headers.get("idempotent-replayed")).toBe("true");
      expect(third.body.delivery.id).toBe(second.body.delivery.id);
    } finally {
      release();
      await receiver.close();
    }
  });

  it("comes after the guards: an outsider hears 404, a role short of the operation 403, a removed member no replay", async () => {
    const { user: developer, memberId } = await addMember(app, mailbox, owner, slug, "developer");
    const { user: viewer } = await addMember(app, mailbox, owner, slug, "viewer");
    const outsider = await signUp(app);
    const create = (who: TestUser, idempotencyKey: string, name: string) =>
      call(app, "POST", `/org/${slug}/projects`, withKey(idempotencyKey, { cookie: who.cookie, body: { name } }));

    // A malformed key is no business of callers the operation refuses anyway, nor of unknown paths.
    expect((await create(outsider, "bad key", "Outsider")).status).toBe(404);
    expect((await create(viewer, "bad key", "Viewer")).status).toBe(403);
    const unknown = await call(app, "POST", `/org/${slug}/nothing-here`, withKey("bad key", { cookie: owner.cookie }));
    expect(unknown.status).toBe(404);
    expect((await create(developer, "bad key", "Developer")).status).toBe(422);
    // Also on operations with no body: a developer may not regenerate a project's admin token.
    const regenerate = await call(
      app,
      "POST",
      `/org/${slug}/projects/${(await createProject("for-regen", "Regenerated")).body.project.slug}/reprovision-admin`,
      withKey("bad key", { cookie: developer.cookie }),
    );
    expect(regenerate.status).toBe(403);

    const first = await create(developer, "dev-1", "By Developer");
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect((await create(developer, "dev-1", "By Developer")).headers.get("idempotent-replayed")).toBe("true");
    const removed = await call(app, "DELETE", `/org/${slug}/members/${memberId}`, { cookie: owner.cookie });
    expect(removed.status).toBe(204);
    const retried = await create(developer, "dev-1", "By Developer");
    expect(retried.status).toBe(404);
    expect(JSON.stringify(retried.body)).not.toContain(first.body.adminToken);
  });

  it("is declared on the POSTs of both OpenAPI documents that take it", async () => {
    const header = (operation: { parameters?: { name: string; in: string }[] } | undefined) =>
      operation?.parameters?.some((p) => p.name === "Idempotency-Key" && p.in === "header") ?? false;
    const api = (await call(app, "GET", "/openapi.json")).body;
    expect(header(api.paths["/org/{slug}/projects"].post)).toBe(true);
    expect(header(api.paths["/org/{slug}/projects"].get)).toBe(false);
    const workspace = (await call(app, "GET", "/workspace/openapi.json")).body;
    expect(header(workspace.paths["/items/{collection}"].post)).toBe(true);
    expect(header(workspace.paths["/files"].post)).toBe(false);
    expect(header(workspace.paths["/auth/sign-up"].post)).toBe(false);
  });

  it("forgets a key after 24 hours, so it may be used again", async () => {
    const first = await ws("/items/notes", adminToken, { day: 1 }, "daily");
    expect(first.status).toBe(201);
    app.clock.advance(24 * 60 * 60 * 1000 + 1000);
    try {
      const next = await ws("/items/notes", adminToken, { day: 2 }, "daily");
      expect(next.status).toBe(201);
      expect(next.headers.get("idempotent-replayed")).toBeNull();
      expect(next.body.item.id).not.toBe(first.body.item.id);
      // The daily job removes keys past the window.
      app.clock.advance(24 * 60 * 60 * 1000 + 1000);
      await pruneIdempotencyKeys(app.server.deps, 2);
      const left = await sql<{ n: number }>`select count(*) as n from idempotency_keys`.execute(app.server.deps.db);
      expect(Number(left.rows[0]?.n)).toBe(0);
    } finally {
      app.clock.advance(-2 * (24 * 60 * 60 * 1000 + 1000));
    }
  });
});
