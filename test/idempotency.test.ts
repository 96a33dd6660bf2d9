import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pruneIdempotencyKeys } from "../src/http/idempotency.ts";
import {
  type CallResult,
  call,
  createActiveProject,
  createApiKey,
  createOrg,
  signUp,
  startApp,
  type TestApp,
  type TestUser,
} from "./harness.ts";

let app: TestApp;
let owner: TestUser;
let slug: string;
let key: string;
let projectId: string;
let adminToken: string;

/** A call to the workspace API with an Idempotency-Key (`key`), as the given bearer. */
async function ws(path: string, token: string, body: unknown, idempotencyKey?: string): Promise<CallResult> {
  const response = await fetch(`${app.url}/w/${projectId}/api${path}`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      ...(idempotencyKey ? { "idempotency-key": idempotencyKey } : {}),
    },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null, headers: response.headers };
}

async function items(collection: string): Promise<{ id: string }[]> {
  const response = await fetch(`${app.url}/w/${projectId}/api/items/${collection}?limit=500`, {
    headers: { authorization: `Bearer ${adminToken}` },
  });
  return ((await response.json()) as { items: { id: string }[] }).items;
}

function withKey(idempotencyKey: string, options: Parameters<typeof call>[3] = {}) {
  return { ...options, headers: { ...options.headers, "idempotency-key": idempotencyKey } };
}

beforeAll(async () => {
  app = await startApp({ WORKER_POLL_MS: "50" });
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
});

describe("Idempotency-Key on POST", () => {
  it("replays a project create's answer, admin token and all, and creates one project", async () => {
    const first = await call(
      app,
      "POST",
      `/org/${slug}/projects`,
      withKey("create-1", { token: key, body: { name: "Once" } }),
    );
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const again = await call(
      app,
      "POST",
      `/org/${slug}/projects`,
      withKey("create-1", { token: key, body: { name: "Once" } }),
    );
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

    // The stored answer holds the admin token only sealed: the database never has it in clear.
    const rows = await sql<{ response: string }>`select response from idempotency_keys`.execute(app.server.deps.db);
    expect(rows.rows.length).toBeGreaterThan(0);
    for (const row of rows.rows) expect(row.response).not.toContain(first.body.adminToken);
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
    const invalid = await call(
      app,
      "POST",
      `/org/${slug}/projects`,
      withKey("bad-1", { token: key, body: { name: "x" } }),
    );
    expect(invalid.status).toBe(422);
    // Fixed, the request may use the same key: it is a new request.
    const fixed = await call(
      app,
      "POST",
      `/org/${slug}/projects`,
      withKey("bad-1", { token: key, body: { name: "Fixed" } }),
    );
    expect(fixed.status, JSON.stringify(fixed.body)).toBe(201);
    expect(fixed.headers.get("idempotent-replayed")).toBeNull();

    const db = app.server.deps.db;
    await sql`alter table audit_events rename to audit_events_moved`.execute(db);
    let failed: CallResult;
    try {
      failed = await call(
        app,
        "POST",
        `/org/${slug}/webhooks`,
        withKey("fail-1", {
          token: key,
          body: { url: "https://hooks.example.com/x", events: ["*"] },
        }),
      );
    } finally {
      await sql`alter table audit_events_moved rename to audit_events`.execute(db);
    }
    expect(failed.status).toBe(500);
    const retried = await call(
      app,
      "POST",
      `/org/${slug}/webhooks`,
      withKey("fail-1", {
        token: key,
        body: { url: "https://hooks.example.com/x", events: ["*"] },
      }),
    );
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
