import { readdirSync, readlinkSync, utimesSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import path from "node:path";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  dropWorkspace,
  migrateWorkspace,
  workspaceFile,
  workspaceSchema,
} from "../src/domains/projects/workspace-db.ts";
import type { WorkspaceCtx } from "../src/domains/workspace/access.ts";
import { WorkspaceDispatcher } from "../src/domains/workspace/dispatch.ts";
import { sweepUploadLeftovers } from "../src/domains/workspace/files.ts";
import { matchesWorkspaceEvent, projectPayload } from "../src/domains/workspace/patterns.ts";
import { WorkspacePool } from "../src/domains/workspace/pool.ts";
import { localStore } from "../src/domains/workspace/store.ts";
import { insertWithEvent } from "../src/domains/workspace/writes.ts";
import { sameHash, sha256Hex } from "../src/lib/tokens.ts";
import { filesPrefix } from "../src/storage/keys.ts";
import { verifyWebhook } from "../src/verify/webhooks.ts";
import {
  type CallOptions,
  call,
  callWorkspace,
  createApiKey,
  createOrg,
  hmacHex,
  localPath,
  type Receiver,
  sessionCookieFrom,
  signUp,
  sleep,
  startApp,
  startReceiver,
  storedKeys,
  type TestApp,
  type TestUser,
  until,
} from "./harness.ts";

let app: TestApp;
let owner: TestUser;
let slug: string;
let projectId: string;
let adminToken: string;
let receiver: Receiver;

/** A call to the project's workspace API, `{workspaceUrl}/api`. */
const ws = (method: string, path: string, options: CallOptions = {}) =>
  callWorkspace(app, projectId, method, path, options);

beforeAll(async () => {
  app = await startApp({
    ALLOW_PRIVATE_WEBHOOK_URLS: "true",
    WORKER_POLL_MS: "50",
    WEBHOOK_BACKOFF_BASE_MS: "20",
    MAX_FILE_BYTES: "4096",
    // Every sign-up and sign-in here comes from one address to one project (rate-limit.test.ts
    // tests the budget).
    AUTH_RATE_LIMIT_PER_MINUTE: "100",
  });
  receiver = await startReceiver();
  owner = await signUp(app);
  slug = (await createOrg(app, owner, "Workspace Org")).slug;
  const created = await call(app, "POST", `/org/${slug}/projects`, { cookie: owner.cookie, body: { name: "Shop" } });
  expect(created.status).toBe(201);
  projectId = created.body.project.id;
  adminToken = created.body.project.adminToken;
  await until("the project to be provisioned", async () => {
    const res = await call(app, "GET", `/org/${slug}/projects/shop`, { cookie: owner.cookie });
    return res.body.project.status === "active";
  });
});
afterAll(async () => {
  await receiver.close();
  await app.close();
});

describe("workspace patterns", () => {
  it.each([
    ["items:posts:created", "items:posts:created", true],
    ["items:*:created", "items:posts:created", true],
    ["items:*:created", "items:posts:deleted", false],
    ["items", "items:posts:created", true],
    ["items:posts", "items:posts:updated", true],
    ["items:comments", "items:posts:created", false],
    ["items.posts.created", "items:posts:created", false],
    ["items:posts:created:extra", "items:posts:created", false],
    ["*", "auth:signed_up", true],
    ["auth", "items:posts:created", false],
  ])("%s against %s → %s", (pattern, event, expected) => {
    expect(matchesWorkspaceEvent(pattern, event)).toBe(expected);
  });

  it("projects payloads by top-level keys only", () => {
    const row = { id: "1", title: "T", meta: { a: 1 } };
    expect(projectPayload(row, null)).toEqual(row);
    expect(projectPayload(row, [])).toEqual(row);
    expect(projectPayload(row, ["title", "missing"])).toEqual({ title: "T" });
    expect(projectPayload(row, ["meta"])).toEqual({ meta: { a: 1 } });
    expect(projectPayload([1, 2], ["x"])).toEqual([1, 2]);
    expect(projectPayload("scalar", ["x"])).toBe("scalar");
    // A `__proto__` key is data like any other, listed or not.
    const odd = JSON.parse('{"__proto__":{"a":1},"b":2}');
    expect(JSON.stringify(projectPayload(odd, ["__proto__"]))).toBe('{"__proto__":{"a":1}}');
    expect(JSON.stringify(projectPayload(odd, ["b"]))).toBe('{"b":2}');
  });
});

describe("the admin token's hash compare (#13b)", () => {
  it("is equal only for the same hash, and refuses one of another length without throwing", () => {
    const hash = sha256Hex("wsa_the-token");
    expect(sameHash(sha256Hex("wsa_the-token"), hash)).toBe(true);
    expect(sameHash(`${hash.slice(0, -1)}${hash.endsWith("0") ? "1" : "0"}`, hash)).toBe(false);
    expect(sameHash(hash.slice(0, -1), hash)).toBe(false);
    expect(sameHash(`${hash}0`, hash)).toBe(false);
    expect(sameHash("", hash)).toBe(false);
  });
});

describe("workspace runtime", () => {
  it("answers a project id holding a NUL character with 422 naming it, on both databases", async () => {
    const res = await fetch(`${app.url}/w/prj_x%00y/api/items/posts`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { error: { code: string; details: { path: string }[] } };
    expect(body.error.code).toBe("VALIDATION");
    expect(body.error.details.map((d) => d.path)).toEqual(["projectId"]);
  });

  it("refuses callers without credentials and unknown tokens", async () => {
    expect((await ws("GET", "/collections")).status).toBe(401);
    expect((await ws("GET", "/collections", { token: "wsa_nope" })).status).toBe(401);
    expect((await ws("POST", "/collections", { body: { slug: "x" } })).status).toBe(401);
    // The admin token one character off, or one longer, is refused (#13b: compared in constant time).
    const nearMiss = `${adminToken.slice(0, -1)}${adminToken.endsWith("0") ? "1" : "0"}`;
    expect((await ws("GET", "/collections", { token: nearMiss })).status).toBe(401);
    expect((await ws("GET", "/collections", { token: `${adminToken}0` })).status).toBe(401);
    expect((await ws("GET", "/collections", { token: adminToken })).status).toBe(200);
  });

  it("serves collections and items to the admin token, with events reaching a signed webhook", async () => {
    const hook = await ws("POST", "/webhooks", {
      token: adminToken,
      body: { name: "all items", url: `${receiver.url}/hook`, events: ["items:*:created"], secret: "s3cret" },
    });
    expect(hook.status).toBe(201);
    expect(hook.body.webhook).not.toHaveProperty("secret");
    expect((await ws("POST", "/collections", { token: adminToken, body: { slug: "posts" } })).status).toBe(201);
    const created = await ws("POST", "/items/posts", { token: adminToken, body: { title: "Hello" } });
    expect(created.status).toBe(201);
    expect(created.body.item).toMatchObject({ title: "Hello", id: expect.any(String) });

    const delivery = await until("the item's delivery", () =>
      receiver.requests.find((r) => r.body.includes(created.body.item.id)),
    );
    const body = JSON.parse(delivery.body);
    expect(body).toMatchObject({ channel: "items:posts", event: "created", data: created.body.item });
    const timestamp = delivery.headers["x-service-timestamp"] as string;
    const v1 = hmacHex("s3cret", delivery.body);
    const v2 = hmacHex("s3cret", `${timestamp}.${delivery.body}`);
    expect(delivery.headers["x-service-signature"]).toBe(v1);
    expect(delivery.headers["x-service-signature-v2"]).toBe(v2);
    // The shipped receiver-side verifier accepts the real delivery, and only with the right secret.
    expect(verifyWebhook({ secret: "s3cret", body: delivery.body, headers: delivery.headers })).toBe(true);
    expect(verifyWebhook({ secret: "wrong", body: delivery.body, headers: delivery.headers })).toBe(false);
  });

  it("refuses an item whose JSON is not valid UTF-8 with 400, and stores nothing", async () => {
    expect((await ws("POST", "/collections", { token: adminToken, body: { slug: "latin1" } })).status).toBe(201);
    const res = await fetch(`${app.url}/w/${projectId}/api/items/latin1`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
      body: Buffer.concat([Buffer.from('{"title":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("BAD_REQUEST");
    expect((await ws("GET", "/items/latin1", { token: adminToken })).body.items).toEqual([]);
  });

  it("lists collections by the bytes of their slugs, whatever the database's collation", async () => {
    const slugs = ["ord_b", "ordb", "ord-b", "ord0", "ord-c", "ord9z"];
    for (const slug of slugs) {
      expect((await ws("POST", "/collections", { token: adminToken, body: { slug } })).status).toBe(201);
    }
    const listed = (await ws("GET", "/collections", { token: adminToken })).body.collections
      .map((c: { slug: string }) => c.slug)
      .filter((slug: string) => slugs.includes(slug));
    expect(listed).toEqual(["ord-b", "ord-c", "ord0", "ord9z", "ord_b", "ordb"]);
  });

  it("lets anyone sign up and in while holding a console session that is no workspace admin", async () => {
    // The browser sends the console's cookie to /w/… on its own: another org's account, or a
    // viewer of this one, is just another visitor to the workspace's public operations.
    const stranger = await signUp(app);
    await createOrg(app, stranger, "Visitor Org");
    const account = { email: "visitor@example.test", password: "long-enough-pw" };
    const asStranger = (path: string) =>
      fetch(`${app.url}/w/${projectId}/api${path}`, {
        method: "POST",
        headers: { cookie: stranger.cookie, "content-type": "application/json" },
        body: JSON.stringify(account),
      });
    expect((await asStranger("/auth/sign-up")).status).toBe(201);
    expect((await asStranger("/auth/sign-in")).status).toBe(200);
    // Elsewhere the cookie still says who it is: not this project's (404).
    const read = await fetch(`${app.url}/w/${projectId}/api/collections`, { headers: { cookie: stranger.cookie } });
    expect(read.status).toBe(404);
  });

  it("stops taking an org owner's session as the workspace admin at once when it is signed out", async () => {
    const signIn = await call(app, "POST", "/auth/sign-in/email", {
      body: { email: owner.email, password: "correct-horse-battery" },
    });
    expect(signIn.status, JSON.stringify(signIn.body)).toBe(200);
    const cookie = sessionCookieFrom(signIn.headers);
    const read = () => fetch(`${app.url}/w/${projectId}/api/collections`, { headers: { cookie } });
    expect((await read()).status).toBe(200);
    expect((await call(app, "POST", "/auth/sign-out", { cookie })).status).toBe(200);
    expect((await read()).status).toBe(401);
    expect(
      (await fetch(`${app.url}/w/${projectId}/api/collections`, { headers: { cookie: owner.cookie } })).status,
    ).toBe(200);
  });

  it("lets an org API key act as the workspace admin, and refuses another org's key", async () => {
    const key = await createApiKey(app, owner, slug, "full");
    expect((await ws("GET", "/collections", { token: key.token })).status).toBe(200);
    const stranger = await signUp(app);
    const other = await createOrg(app, stranger, "Other Org");
    const otherKey = await createApiKey(app, stranger, other.slug, "full");
    expect((await ws("GET", "/collections", { token: otherKey.token })).status).toBe(404);
  });

  it("refuses a cross-site write made with an org admin's session cookie", async () => {
    const write = (origin: string | undefined, fetchSite?: string) =>
      fetch(`${app.url}/w/${projectId}/api/collections`, {
        method: "POST",
        headers: {
          cookie: owner.cookie,
          "content-type": "application/json",
          ...(origin === undefined ? {} : { origin }),
          ...(fetchSite === undefined ? {} : { "sec-fetch-site": fetchSite }),
        },
        body: JSON.stringify({ slug: `csrf-${Math.random().toString(36).slice(2, 8)}` }),
      });
    const forged = await write("http://evil.example");
    expect(forged.status).toBe(403);
    expect(((await forged.json()) as { error: { code: string } }).error.code).toBe("FORBIDDEN");
    // A browser that sends no Origin still says where the request came from.
    expect((await write(undefined, "cross-site")).status).toBe(403);
    expect((await write(undefined, "same-site")).status).toBe(403);
    expect((await write(undefined, "same-origin")).status).toBe(201);
    expect((await write(undefined, "none")).status).toBe(201);
    expect((await write(new URL(app.config.publicUrl).origin)).status).toBe(201);
    // No Origin at all: a non-browser client, which a forged cross-site request cannot be.
    expect((await write(undefined)).status).toBe(201);
    // Reads are not writes.
    const read = await fetch(`${app.url}/w/${projectId}/api/collections`, {
      headers: { cookie: owner.cookie, origin: "http://evil.example" },
    });
    expect(read.status).toBe(200);
  });

  it("refuses reserved headers on a webhook with 422", async () => {
    const res = await ws("POST", "/webhooks", {
      token: adminToken,
      body: {
        name: "bad",
        url: `${receiver.url}/hook`,
        events: ["items"],
        headers: { "X-Service-Signature": "forged" },
      },
    });
    expect(res.status).toBe(422);
    expect(res.body.error.details[0].path).toBe("headers.X-Service-Signature");
  });

  it("refuses item data holding a NUL character, in a value or a key, with 422 naming where", async () => {
    expect((await ws("POST", "/collections", { token: adminToken, body: { slug: "nul_probe" } })).status).toBe(201);
    const inValue = await ws("POST", "/items/nul_probe", {
      token: adminToken,
      body: { title: "fine", meta: { tags: ["ok", "a\u0000b"] } },
    });
    expect(inValue.status).toBe(422);
    expect(inValue.body.error.details).toEqual([{ path: "meta.tags.1", message: expect.stringContaining("U+0000") }]);
    const inKey = await ws("POST", "/items/nul_probe", { token: adminToken, body: { "a\u0000b": 1 } });
    expect(inKey.status).toBe(422);
    expect((await ws("GET", "/items/nul_probe", { token: adminToken })).body.items).toEqual([]);
  });

  it("keeps every key of item data, `__proto__` too, and refuses data that is not an object", async () => {
    expect((await ws("POST", "/collections", { token: adminToken, body: { slug: "odd_keys" } })).status).toBe(201);
    const created = await ws("POST", "/items/odd_keys", {
      token: adminToken,
      body: JSON.parse('{"__proto__":{"polluted":true},"constructor":"c","title":"t"}'),
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.item.id;
    const read = await ws("GET", `/items/odd_keys/${id}`, { token: adminToken });
    const protoKey = (item: object) => Object.getOwnPropertyDescriptor(item, "__proto__")?.value;
    expect(protoKey(created.body.item)).toEqual({ polluted: true });
    expect(protoKey(read.body.item)).toEqual({ polluted: true });
    expect(read.body.item).toMatchObject({ constructor: "c", title: "t" });
    const patched = await ws("PATCH", `/items/odd_keys/${id}`, {
      token: adminToken,
      body: JSON.parse('{"__proto__":{"polluted":false}}'),
    });
    expect(patched.status).toBe(200);
    expect(protoKey(patched.body.item)).toEqual({ polluted: false });
    expect(patched.body.item.title).toBe("t");
    for (const body of [[1, 2], "text", 5, null]) {
      const refused = await ws("POST", "/items/odd_keys", { token: adminToken, body });
      expect(refused.status, JSON.stringify(body)).toBe(422);
      expect(refused.body.error.code).toBe("VALIDATION");
    }
  });

  it("takes item data nested 64 levels deep and refuses deeper with 422, however deep", async () => {
    expect((await ws("POST", "/collections", { token: adminToken, body: { slug: "deep_probe" } })).status).toBe(201);
    // The body object is level 1; `arrays` more levels under its key "deep".
    const nested = (arrays: number) => `{"deep":${"[".repeat(arrays)}${"]".repeat(arrays)}}`;
    const post = async (raw: string) => {
      const response = await fetch(`${app.url}/w/${projectId}/api/items/deep_probe`, {
        method: "POST",
        headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
        body: raw,
      });
      return {
        status: response.status,
        body: (await response.json()) as { error: { details: { message: string }[] } },
      };
    };
    expect((await post(nested(63))).status).toBe(201);
    for (const arrays of [64, 100_000]) {
      const refused = await post(nested(arrays));
      expect(refused.status).toBe(422);
      expect(refused.body.error.details[0]?.message).toContain("64 levels");
    }
    expect((await ws("GET", "/items/deep_probe", { token: adminToken })).body.items).toHaveLength(1);
  });

  it("answers 409 while the project is paused", async () => {
    const signedUp = await ws("POST", "/auth/sign-up", {
      body: { email: "paused-user@example.test", password: "long-enough-pw" },
    });
    expect(signedUp.status).toBe(201);
    const pausedUserToken: string = signedUp.body.token;
    expect((await call(app, "POST", `/org/${slug}/projects/shop/pause`, { cookie: owner.cookie })).status).toBe(200);
    expect((await ws("GET", "/collections", { token: adminToken })).status).toBe(409);
    // Only a caller the project would answer learns it is paused; the rest hear what they would anyway.
    expect((await ws("GET", "/collections")).status).toBe(401);
    expect((await ws("GET", "/collections", { token: "wsu_made_up" })).status).toBe(401);
    const stranger = await signUp(app);
    const strangers = await createOrg(app, stranger, "Stranger Org");
    const strangerKey = await createApiKey(app, stranger, strangers.slug, "full");
    expect((await ws("GET", "/collections", { token: strangerKey.token })).status).toBe(404);
    // A caller the operation refuses hears 403, as while the project is active: a workspace
    // user on an admin operation, a read-only key on a write.
    const readOnly = await createApiKey(app, owner, slug, "read-only");
    expect((await ws("POST", "/items/posts", { token: readOnly.token, body: { a: 1 } })).status).toBe(403);
    expect((await ws("GET", "/webhooks", { token: pausedUserToken })).status).toBe(403);
    expect((await ws("GET", "/items/posts", { token: pausedUserToken })).status).toBe(409);
    // Signing up is open to anyone, and answers that the project is paused.
    expect(
      (await ws("POST", "/auth/sign-up", { body: { email: "p@example.test", password: "long-enough-pw" } })).status,
    ).toBe(409);
    expect((await call(app, "POST", `/org/${slug}/projects/shop/resume`, { cookie: owner.cookie })).status).toBe(200);
    expect((await ws("GET", "/collections", { token: adminToken })).status).toBe(200);
  });
});

describe("workspace users, files and their events", () => {
  let events: () => { channel: string; event: string; data: Record<string, unknown> }[];

  beforeAll(async () => {
    const hook = await ws("POST", "/webhooks", {
      token: adminToken,
      body: { name: "auth and files", url: `${receiver.url}/hook`, events: ["auth", "files"] },
    });
    expect(hook.status).toBe(201);
    events = () =>
      receiver.requests.map((r) => JSON.parse(r.body)).filter((b) => b.channel === "auth" || b.channel === "files");
  });

  it("signs users up and in with tokens, never exposing the password hash", async () => {
    const up = await ws("POST", "/auth/sign-up", { body: { email: "Ada@Example.test", password: "long-enough-pw" } });
    expect(up.status).toBe(201);
    expect(up.body.token).toMatch(/^wsu_[0-9a-f]{64}$/);
    expect(Object.keys(up.body.user).sort()).toEqual(["createdAt", "email", "id", "updatedAt"]);
    const dup = await ws("POST", "/auth/sign-up", { body: { email: "ada@example.test", password: "long-enough-pw" } });
    expect(dup.status).toBe(409);
    expect(
      (await ws("POST", "/auth/sign-in", { body: { email: "ada@example.test", password: "wrong-password" } })).status,
    ).toBe(401);
    // Only sign-up holds the password policy: a short wrong password is as wrong as any other.
    for (const password of ["short", "x"]) {
      const wrong = await ws("POST", "/auth/sign-in", { body: { email: "ada@example.test", password } });
      expect(wrong.status, JSON.stringify(wrong.body)).toBe(401);
      expect(wrong.body.error.code).toBe("UNAUTHORIZED");
    }
    expect((await ws("POST", "/auth/sign-up", { body: { email: "bo@example.test", password: "short" } })).status).toBe(
      422,
    );
    const inn = await ws("POST", "/auth/sign-in", { body: { email: "ada@example.test", password: "long-enough-pw" } });
    expect(inn.status).toBe(200);
    // A user may use items but not manage the workspace.
    expect((await ws("GET", "/collections", { token: inn.body.token })).status).toBe(200);
    expect((await ws("POST", "/collections", { token: inn.body.token, body: { slug: "nope" } })).status).toBe(403);
    // Refused before the body is looked at: the same 403 for a body that would not validate.
    expect((await ws("POST", "/collections", { token: inn.body.token, body: { slug: "BAD SLUG" } })).status).toBe(403);
    expect((await ws("POST", "/webhooks", { token: inn.body.token, body: {} })).status).toBe(403);
    expect((await ws("POST", "/auth/sign-out", { token: inn.body.token })).status).toBe(200);
    expect((await ws("GET", "/collections", { token: inn.body.token })).status).toBe(401);
    expect((await ws("DELETE", `/users/${up.body.user.id}`, { token: up.body.token })).status).toBe(403);
    expect((await ws("DELETE", `/users/${up.body.user.id}`, { token: adminToken })).status).toBe(204);
    expect((await ws("GET", "/collections", { token: up.body.token })).status).toBe(401);

    const seen = await until("every auth event", () => {
      const names = events().map((e) => `${e.channel}:${e.event}`);
      return ["auth:signed_up", "auth:signed_in", "auth:signed_out", "auth:user_deleted"].every((n) =>
        names.includes(n),
      )
        ? names
        : undefined;
    });
    // The failed duplicate sign-up raised nothing: exactly one signed_up.
    expect(seen.filter((n) => n === "auth:signed_up")).toHaveLength(1);
    for (const event of events()) expect(JSON.stringify(event.data)).not.toContain("scrypt");
  });

  it("lists the workspace's users to its admins only, oldest first and paged, never with a password hash", async () => {
    const signedUp = await ws("POST", "/auth/sign-up", {
      body: { email: "lister@example.test", password: "long-enough-pw" },
    });
    expect(signedUp.status).toBe(201);
    const listed = await ws("GET", "/users?limit=500", { token: adminToken });
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    const emails = listed.body.users.map((user: { email: string }) => user.email);
    expect(emails).toContain("lister@example.test");
    expect(listed.body.users.length).toBeGreaterThanOrEqual(2);
    for (const user of listed.body.users)
      expect(Object.keys(user).sort()).toEqual(["createdAt", "email", "id", "updatedAt"]);
    const first = await ws("GET", "/users?limit=1&offset=1", { token: adminToken });
    expect(first.body.users).toEqual([listed.body.users[1]]);
    expect((await ws("GET", "/users", { token: signedUp.body.token })).status).toBe(403);
    expect((await ws("GET", "/users")).status).toBe(401);
  });

  it("stores, lists, downloads and deletes files, raw or multipart, within MAX_FILE_BYTES", async () => {
    const raw = await fetch(`${app.url}/w/${projectId}/api/files?name=notes.txt`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "text/plain" },
      body: "hello files",
    });
    expect(raw.status).toBe(201);
    const rawFile = ((await raw.json()) as { file: { id: string; size: number; contentType: string } }).file;
    expect(rawFile).toMatchObject({ size: 11, contentType: "text/plain" });

    const form = new FormData();
    form.append("file", new Blob([new Uint8Array([1, 2, 3])], { type: "image/png" }), "dot.png");
    const multipart = await fetch(`${app.url}/w/${projectId}/api/files`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}` },
      body: form,
    });
    expect(multipart.status).toBe(201);
    const png = ((await multipart.json()) as { file: { id: string; name: string } }).file;
    expect(png).toMatchObject({ name: "dot.png", contentType: "image/png", size: 3 });

    const download = await fetch(`${app.url}/w/${projectId}/api/files/${rawFile.id}`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(download.status).toBe(200);
    expect(download.headers.get("content-type")).toBe("text/plain");
    expect(download.headers.get("content-length")).toBe("11");
    expect(download.headers.get("content-disposition")).toBe("attachment; filename*=UTF-8''notes.txt");
    expect(download.headers.get("x-content-type-options")).toBe("nosniff");
    expect(download.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(download.headers.get("ratelimit-limit")).not.toBeNull();
    expect(await download.text()).toBe("hello files");

    const tooBig = await fetch(`${app.url}/w/${projectId}/api/files?name=big.bin`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/octet-stream" },
      body: new Uint8Array(5000),
    });
    expect(tooBig.status).toBe(413);

    // A raw upload's name is text on one line: no escape that decodes to no UTF-8 (`%FF`, an
    // encoded surrogate), no control character.
    for (const name of ["%ED%A0%80", "a%FFb", "a%09b", "a%0D%0Ab"]) {
      const refused = await fetch(`${app.url}/w/${projectId}/api/files?name=${name}`, {
        method: "POST",
        headers: { authorization: `Bearer ${adminToken}`, "content-type": "text/plain" },
        body: "x",
      });
      expect(refused.status, name).toBe(422);
      const { error } = (await refused.json()) as { error: { details: { path: string }[] } };
      expect(error.details.map((d) => d.path)).toEqual(["name"]);
    }

    // A multipart file name follows ?name='s rules: no NUL or control character, at most 255 characters.
    for (const disposition of [
      `filename*=UTF-8''a%00b.txt`,
      `filename="${"n".repeat(256)}.txt"`,
      'filename="a\tb.txt"',
    ]) {
      const body =
        `--b0undary\r\nContent-Disposition: form-data; name="file"; ${disposition}\r\n` +
        "Content-Type: text/plain\r\n\r\nx\r\n--b0undary--\r\n";
      const refused = await fetch(`${app.url}/w/${projectId}/api/files`, {
        method: "POST",
        headers: { authorization: `Bearer ${adminToken}`, "content-type": "multipart/form-data; boundary=b0undary" },
        body,
      });
      expect(refused.status, disposition).toBe(422);
    }

    // A multipart type without a boundary is a malformed request, not a server error.
    const noBoundary = await fetch(`${app.url}/w/${projectId}/api/files`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "multipart/form-data" },
      body: "abc",
    });
    expect(noBoundary.status).toBe(400);
    expect(((await noBoundary.json()) as { error: { code: string } }).error.code).toBe("BAD_REQUEST");

    const listed = await ws("GET", "/files", { token: adminToken });
    expect(listed.body.files.map((f: { id: string }) => f.id).sort()).toEqual([rawFile.id, png.id].sort());
    // Paged like items: oldest first, limit and offset.
    const first = await ws("GET", "/files?limit=1", { token: adminToken });
    const second = await ws("GET", "/files?limit=1&offset=1", { token: adminToken });
    expect([...first.body.files, ...second.body.files].map((f: { id: string }) => f.id)).toEqual([rawFile.id, png.id]);
    expect((await ws("GET", "/files?limit=0", { token: adminToken })).status).toBe(422);
    expect((await ws("DELETE", `/files/${png.id}`, { token: adminToken })).status).toBe(204);
    expect((await ws("GET", `/files/${png.id}`, { token: adminToken })).status).toBe(404);

    await until("the file events", () => {
      const names = events().map((e) => `${e.channel}:${e.event}`);
      return names.filter((n) => n === "files:uploaded").length === 2 && names.includes("files:deleted");
    });
  });

  it("keeps a multipart file name sent as raw UTF-8, as browsers and curl send it", async () => {
    // A `%` that starts no escape is itself, as URL parsers take it.
    const percent = await fetch(`${app.url}/w/${projectId}/api/files?name=50%off.txt`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "text/plain" },
      body: "x",
    });
    expect(percent.status).toBe(201);
    const kept = (await percent.json()) as { file: { id: string; name: string } };
    expect(kept.file.name).toBe("50%off.txt");
    expect((await ws("DELETE", `/files/${kept.file.id}`, { token: adminToken })).status).toBe(204);

    const body =
      `--b0undary\r\nContent-Disposition: form-data; name="file"; filename="日本 café.txt"\r\n` +
      "Content-Type: text/plain\r\n\r\nx\r\n--b0undary--\r\n";
    const uploaded = await fetch(`${app.url}/w/${projectId}/api/files`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "multipart/form-data; boundary=b0undary" },
      body,
    });
    expect(uploaded.status).toBe(201);
    expect(((await uploaded.json()) as { file: { name: string } }).file.name).toBe("日本 café.txt");
  });

  it("drops an upload whose client goes away mid-body, raw or multipart: no file, no leftovers, no server error", async () => {
    // The local store's directory (the default): an upload in progress is a `.part` file there.
    const dir = localPath(app.config, filesPrefix(projectId));
    const listed = async () => (await ws("GET", "/files?limit=500", { token: adminToken })).body.files.length;
    const before = await listed();
    const errors = vi.spyOn(app.server.deps.log, "error");
    try {
      const { port } = new URL(app.url);
      const multipartHead = '--b0undary\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\n\r\n';
      for (const [query, type, start] of [
        ["?name=cut.bin", "application/octet-stream", ""],
        ["", "multipart/form-data; boundary=b0undary", multipartHead],
      ]) {
        const socket = connect(Number(port), "127.0.0.1");
        await new Promise((resolve) => socket.once("connect", resolve));
        socket.write(
          `POST /w/${projectId}/api/files${query} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${adminToken}\r\n` +
            `Content-Type: ${type}\r\nContent-Length: 3000\r\n\r\n${start}${"x".repeat(1000)}`,
        );
        await until("the upload to reach the disk", () => readdirSync(dir).some((name) => name.endsWith(".part")));
        socket.destroy();
        await until("the cut-off upload to be cleaned up", () => !readdirSync(dir).some((n) => n.endsWith(".part")));
      }
      expect(await listed()).toBe(before);
      expect(errors.mock.calls.filter(([, message]) => message === "unhandled error")).toEqual([]);
    } finally {
      errors.mockRestore();
    }
  });

  it("audits an admin's collection create and user delete in the org's log, and hooks never see those rows", async () => {
    const everything = await ws("POST", "/webhooks", {
      token: adminToken,
      body: { name: "everything", url: `${receiver.url}/everything`, events: ["*", "*:*", "*:*:*"] },
    });
    expect(everything.status).toBe(201);
    expect(
      (await ws("POST", "/collections", { token: adminToken, body: { slug: "audited", name: "Audited" } })).status,
    ).toBe(201);
    // A create the database refuses (the slug exists) is no change, and has no row.
    expect((await ws("POST", "/collections", { token: adminToken, body: { slug: "audited" } })).status).toBe(409);
    const user = await ws("POST", "/auth/sign-up", {
      body: { email: "audited@example.test", password: "long-enough-pw" },
    });
    expect((await ws("DELETE", `/users/${user.body.user.id}`, { token: adminToken })).status).toBe(204);

    const audit = async (action: string) =>
      (await call(app, "GET", `/org/${slug}/audit?action=${action}&limit=500`, { cookie: owner.cookie })).body.events;
    const [created] = await until("the collection's audit row", async () => {
      const rows = (await audit("workspace_collection.created")).filter(
        (e: { target: { id: string } }) => e.target.id === "audited",
      );
      return rows.length > 0 ? rows : undefined;
    });
    expect(created).toMatchObject({
      action: "workspace_collection.created",
      actor: { type: "workspace_admin" },
      target: { type: "collection", id: "audited" },
      data: { projectId, name: "Audited" },
    });
    const [deleted] = await until("the user's audit row", async () => {
      const rows = (await audit("workspace_user.deleted")).filter(
        (e: { target: { id: string } }) => e.target.id === user.body.user.id,
      );
      return rows.length > 0 ? rows : undefined;
    });
    expect(deleted).toMatchObject({ actor: { type: "workspace_admin" }, data: { projectId } });
    await until("the user_deleted delivery", () =>
      receiver.requests.some((r) => r.path === "/everything" && r.body.includes('"user_deleted"')),
    );
    expect(
      (await audit("workspace_collection.created")).filter(
        (e: { target: { id: string } }) => e.target.id === "audited",
      ),
    ).toHaveLength(1);
    expect(receiver.requests.filter((r) => r.body.includes("_audit"))).toEqual([]);
    // The later tests count this receiver's requests.
    expect((await ws("DELETE", `/webhooks/${everything.body.webhook.id}`, { token: adminToken })).status).toBe(204);
  });

  it("raises no event for a write that fails", async () => {
    const before = receiver.requests.length;
    expect((await ws("POST", "/items/missing", { token: adminToken, body: { a: 1 } })).status).toBe(404);
    await sleep(300);
    expect(receiver.requests.length).toBe(before);
  });
});

describe("an upload whose row the database refuses", () => {
  it("answers with an error and leaves neither a listed file nor its bytes on disk", async () => {
    const { deps } = app.server;
    const schema = workspaceSchema(projectId);
    const db = (await new WorkspacePool(deps, 1).acquire(projectId))?.db;
    if (!db) throw new Error("no workspace database");
    const onDisk = () => storedKeys(deps, filesPrefix(projectId));
    const listed = async () => (await ws("GET", "/files?limit=500", { token: adminToken })).body.files.length;
    // Something first, so the directory exists.
    const first = await fetch(`${app.url}/w/${projectId}/api/files?name=first.txt`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "text/plain" },
      body: "first",
    });
    expect(first.status).toBe(201);
    const [filesBefore, listedBefore] = [await onDisk(), await listed()];
    const refuse =
      deps.dialect === "sqlite"
        ? [
            sql`create trigger refuse_files before insert on files begin select raise(abort, 'refused by the test'); end`,
          ]
        : [
            sql`create function ${sql.id(schema, "refuse_files")}() returns trigger language plpgsql as $$
                begin raise exception 'refused by the test'; end $$`,
            sql`create trigger refuse_files before insert on ${sql.id(schema, "files")}
                for each row execute function ${sql.id(schema, "refuse_files")}()`,
          ];
    for (const statement of refuse) await statement.execute(db);
    try {
      const refused = await fetch(`${app.url}/w/${projectId}/api/files?name=refused.txt`, {
        method: "POST",
        headers: { authorization: `Bearer ${adminToken}`, "content-type": "text/plain" },
        body: "never stored",
      });
      expect(refused.status).toBeGreaterThanOrEqual(400);
      expect(await onDisk()).toEqual(filesBefore);
      expect(await listed()).toBe(listedBefore);
    } finally {
      const undo =
        deps.dialect === "sqlite"
          ? [sql`drop trigger refuse_files`]
          : [
              sql`drop trigger refuse_files on ${sql.id(schema, "files")}`,
              sql`drop function ${sql.id(schema, "refuse_files")}()`,
            ];
      for (const statement of undo) await statement.execute(db);
    }
  });
});

describe("upload leftovers", () => {
  it("the daily sweep removes old .part files and files without a row, and nothing else", async () => {
    const { deps } = app.server;
    const upload = await fetch(`${app.url}/w/${projectId}/api/files?name=kept.txt`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "text/plain" },
      body: "kept",
    });
    expect(upload.status).toBe(201);
    const kept = ((await upload.json()) as { file: { id: string } }).file.id;
    // The local store's directory (the default), where files are backdated.
    const dir = localPath(app.config, filesPrefix(projectId));
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    for (const name of ["fil_crashed_upload.0123456789ab.part", "fil_never_committed", "fil_fresh_orphan"]) {
      writeFileSync(path.join(dir, name), "leftover");
    }
    for (const name of ["fil_crashed_upload.0123456789ab.part", "fil_never_committed", kept]) {
      utimesSync(path.join(dir, name), twoDaysAgo, twoDaysAgo);
    }
    await sweepUploadLeftovers(deps, localStore(new WorkspacePool(deps, 1), deps.dialect));
    const left = readdirSync(dir);
    expect(left).not.toContain("fil_crashed_upload.0123456789ab.part");
    expect(left).not.toContain("fil_never_committed");
    // Too recent to be a leftover (an upload may be just committing it), and a file with its row.
    expect(left).toContain("fil_fresh_orphan");
    expect(left).toContain(kept);
    const download = await fetch(`${app.url}/w/${projectId}/api/files/${kept}`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    expect(await download.text()).toBe("kept");
  });
});

describe("a write that fails on a constraint", () => {
  it("emits no event: simultaneous sign-ups with one e-mail give one user and one signed_up", async () => {
    // The project is on template 1.1.0, whose unique index on lower(email) is the constraint.
    const before = receiver.requests.length;
    const email = `race-${Date.now()}@example.test`;
    const results = await Promise.all(
      Array.from({ length: 4 }, () => ws("POST", "/auth/sign-up", { body: { email, password: "long-enough-pw" } })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
    await sleep(500);
    const signedUp = receiver.requests
      .slice(before)
      .map((r) => JSON.parse(r.body))
      .filter((b) => b.event === "signed_up" && b.data.email === email);
    expect(signedUp).toHaveLength(1);
  });
});

describe("sign-ups of one e-mail at once on a workspace without the unique index (template 1.0.0)", () => {
  it("give one user, whatever the case of the e-mail", async () => {
    const created = await call(app, "POST", `/org/${slug}/projects`, {
      cookie: owner.cookie,
      body: { name: "Old Shop", template: "default@1.0.0" },
    });
    expect(created.status).toBe(201);
    const { id, slug: projectSlug } = created.body.project;
    await until("the old project to be active", async () => {
      const res = await call(app, "GET", `/org/${slug}/projects/${projectSlug}`, { cookie: owner.cookie });
      return res.body.project.status === "active";
    });
    const email = `case-race-${Date.now()}@example.test`;
    const signUps = await Promise.all(
      [email, email.toUpperCase(), email, `Case-${email.slice(5)}`].map((address) =>
        fetch(`${app.url}/w/${id}/api/auth/sign-up`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email: address, password: "long-enough-pw" }),
        }).then((r) => r.status),
      ),
    );
    expect(signUps.sort()).toEqual([201, 409, 409, 409]);
  });
});

describe("concurrent writes", () => {
  it("commit together yet fail alone: one bad write among many leaves the others and their events intact", async () => {
    await ws("POST", "/collections", { token: adminToken, body: { slug: "burst" } });
    const before = receiver.requests.length;
    const results = await Promise.all(
      Array.from({ length: 25 }, (_, n) =>
        ws("POST", n === 12 ? "/items/no-such-collection" : "/items/burst", { token: adminToken, body: { n } }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array.from({ length: 25 }, (_, n) => (n === 12 ? 404 : 201)));
    const ids = results.filter((r) => r.status === 201).map((r) => r.body.item.id);
    expect(new Set(ids).size).toBe(24);
    const listed = await ws("GET", "/items/burst?limit=100", { token: adminToken });
    expect(listed.body.items.map((item: { id: string }) => item.id).sort()).toEqual([...ids].sort());
    // The "all items" hook (items:*:created) hears each created item once, and nothing of the failed one.
    await until("every item's delivery", () =>
      ids.every((id) => receiver.requests.slice(before).some((r) => r.body.includes(id))),
    );
    await sleep(200);
    const burst = receiver.requests
      .slice(before)
      .map((r) => JSON.parse(r.body))
      .filter((b) => b.channel === "items:burst");
    expect(burst).toHaveLength(24);
  });

  it("insert together yet fail alone: a row the database refuses among many creates and updates", async () => {
    // A trigger refuses rows marked "refuse", so one insert of a group fails in the database,
    // after the group's rows have gone in together: the group falls back to one insert each.
    const { deps } = app.server;
    const schema = workspaceSchema(projectId);
    const db = (await new WorkspacePool(deps, 1).acquire(projectId))?.db;
    if (!db) throw new Error("no workspace database");
    const refuse =
      deps.dialect === "sqlite"
        ? [
            sql`create trigger refuse_marked before insert on items when new.data like '%"refuse":true%'
                begin select raise(abort, 'refused by the test trigger'); end`,
          ]
        : [
            sql`create function ${sql.id(schema, "refuse_marked")}() returns trigger language plpgsql as $$
                begin
                  if new.data like '%"refuse":true%' then raise exception 'refused by the test trigger'; end if;
                  return new;
                end $$`,
            sql`create trigger refuse_marked before insert on ${sql.id(schema, "items")}
                for each row execute function ${sql.id(schema, "refuse_marked")}()`,
          ];
    for (const statement of refuse) await statement.execute(db);
    try {
      await ws("POST", "/collections", { token: adminToken, body: { slug: "refusals" } });
      const hook = await ws("POST", "/webhooks", {
        token: adminToken,
        body: { name: "refusals", url: `${receiver.url}/refusals`, events: ["items:refusals"] },
      });
      expect(hook.status).toBe(201);
      const existing = await ws("POST", "/items/refusals", { token: adminToken, body: { n: -1 } });
      await receiver.waitFor("the first item's delivery", (r) => r.body.includes(existing.body.item.id));
      const before = receiver.at("/refusals").length;
      const [update, ...creates] = await Promise.all([
        ws("PATCH", `/items/refusals/${existing.body.item.id}`, { token: adminToken, body: { touched: true } }),
        ...Array.from({ length: 25 }, (_, n) =>
          ws("POST", "/items/refusals", { token: adminToken, body: n === 12 ? { n, refuse: true } : { n } }),
        ),
      ]);
      expect(update?.status).toBe(200);
      expect(creates.map((r) => r.status)).toEqual(Array.from({ length: 25 }, (_, n) => (n === 12 ? 500 : 201)));
      const ids = creates.filter((r) => r.status === 201).map((r) => r.body.item.id);
      const listed = await ws("GET", "/items/refusals?limit=100", { token: adminToken });
      expect(listed.body.items.map((item: { id: string }) => item.id).sort()).toEqual(
        [...ids, existing.body.item.id].sort(),
      );
      const received = () => receiver.at("/refusals").slice(before);
      await until("every created item's delivery and the update's", () =>
        [...ids, existing.body.item.id].every((id) => received().some((r) => r.body.includes(id))),
      );
      await sleep(200);
      const events = received().map((r) => JSON.parse(r.body));
      expect(
        events
          .filter((b) => b.event === "created")
          .map((b) => b.data.id)
          .sort(),
      ).toEqual([...ids].sort());
      expect(events.filter((b) => b.event === "updated").map((b) => b.data.touched)).toEqual([true]);

      // The same, deterministically in one group: inserts asked for in one turn of the event loop.
      const pool = new WorkspacePool(deps, 1);
      const dispatcher = new WorkspaceDispatcher(deps, localStore(pool, deps.dialect));
      await dispatcher.markPending(projectId);
      const ctx = { runtime: { dispatcher }, deps, project: { id: projectId }, db } as unknown as WorkspaceCtx;
      const at = new Date().toISOString();
      const rows = Array.from({ length: 10 }, (_, n) => ({
        id: `itm_group_${n}`,
        collection: "refusals",
        data: JSON.stringify(n === 4 ? { n, refuse: true } : { n }),
        created_at: at,
        updated_at: at,
      }));
      const outcomes = await Promise.allSettled(
        rows.map((row) =>
          insertWithEvent(ctx, "items", row, {
            result: row.id,
            event: { channel: "items:refusals", event: "created", data: { id: row.id } },
          }),
        ),
      );
      expect(outcomes.map((outcome) => outcome.status)).toEqual(
        rows.map((_, n) => (n === 4 ? "rejected" : "fulfilled")),
      );
      const stored = await db.selectFrom("items").select("id").where("id", "like", "itm_group_%").execute();
      const kept = rows.filter((_, n) => n !== 4).map((row) => row.id);
      expect(stored.map((row) => row.id).sort()).toEqual(kept);
      await until("the group's deliveries", () => kept.every((id) => received().some((r) => r.body.includes(id))));
      await dispatcher.settle();
      await pool.closeAll();
      // The refused row raised no event: none in the outbox, none dispatched, none received.
      const refused = "%itm_group_4%";
      expect(await db.selectFrom("events").select("id").where("data", "like", refused).execute()).toEqual([]);
      const dispatched = await deps.db
        .selectFrom("webhook_deliveries")
        .select("id")
        .where("body", "like", refused)
        .execute();
      expect(dispatched).toEqual([]);
      expect(received().filter((r) => r.body.includes("itm_group_4"))).toEqual([]);
    } finally {
      const drop =
        deps.dialect === "sqlite"
          ? [sql`drop trigger refuse_marked`]
          : [
              sql`drop trigger refuse_marked on ${sql.id(schema, "items")}`,
              sql`drop function ${sql.id(schema, "refuse_marked")}()`,
            ];
      for (const statement of drop) await statement.execute(db);
      if (deps.dialect === "sqlite") await db.destroy();
    }
  });
});

describe("overlapping writes to one row", () => {
  it("keep every PATCH's keys, and of deletes at once exactly one succeeds with one event", async () => {
    await ws("POST", "/collections", { token: adminToken, body: { slug: "overlap" } });
    const hook = await ws("POST", "/webhooks", {
      token: adminToken,
      body: { name: "overlap", url: `${receiver.url}/overlap`, events: ["items:overlap"] },
    });
    expect(hook.status).toBe(201);
    const events = () => receiver.at("/overlap").map((r) => JSON.parse(r.body));
    const item = (await ws("POST", "/items/overlap", { token: adminToken, body: { base: 0 } })).body.item;

    // Each PATCH merges into the state the one before it left: none of the keys is lost.
    const keys = Array.from({ length: 20 }, (_, n) => `k${n}`);
    const patched = await Promise.all(
      keys.map((key, n) => ws("PATCH", `/items/overlap/${item.id}`, { token: adminToken, body: { [key]: n } })),
    );
    expect(patched.map((r) => r.status)).toEqual(keys.map(() => 200));
    const final = (await ws("GET", `/items/overlap/${item.id}`, { token: adminToken })).body.item;
    for (const [n, key] of keys.entries()) expect(final[key]).toBe(n);
    expect(final.base).toBe(0);

    // PATCHes within the body limit cannot build an item beyond it.
    const big = "x".repeat(700 * 1024);
    const grown = await ws("PATCH", `/items/overlap/${item.id}`, { token: adminToken, body: { a: big } });
    expect(grown.status).toBe(200);
    const tooBig = await ws("PATCH", `/items/overlap/${item.id}`, { token: adminToken, body: { b: big } });
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.error.code).toBe("PAYLOAD_TOO_LARGE");
    expect((await ws("PATCH", `/items/overlap/${item.id}`, { token: adminToken, body: { a: null } })).status).toBe(200);

    // Three deletes at once: one 204, two 404, and one `deleted` event carrying the last state.
    const deletes = await Promise.all(
      [1, 2, 3].map(() => ws("DELETE", `/items/overlap/${item.id}`, { token: adminToken })),
    );
    expect(deletes.map((r) => r.status).sort()).toEqual([204, 404, 404]);
    await until("the delete's event", () => events().some((e) => e.event === "deleted"));
    await sleep(300);
    const deleted = events().filter((e) => e.event === "deleted");
    expect(deleted).toHaveLength(1);
    for (const key of keys) expect(deleted[0]?.data).toHaveProperty(key);
    expect(events().filter((e) => e.event === "updated")).toHaveLength(keys.length + 2);
  });
});

describe("overlapping deletes of a user or a file", () => {
  it("succeed once: one 204, the other 404", async () => {
    const user = await ws("POST", "/auth/sign-up", {
      body: { email: `twice-${Date.now()}@example.test`, password: "long-enough-pw" },
    });
    expect(user.status).toBe(201);
    const users = await Promise.all(
      [1, 2].map(() => ws("DELETE", `/users/${user.body.user.id}`, { token: adminToken })),
    );
    expect(users.map((r) => r.status).sort()).toEqual([204, 404]);

    // A sign-in overlapping the user's deletion never leaves a token that works.
    for (let round = 0; round < 3; round++) {
      const email = `overlap-${round}-${Date.now()}@example.test`;
      const up = await ws("POST", "/auth/sign-up", { body: { email, password: "long-enough-pw" } });
      const signingIn = ws("POST", "/auth/sign-in", { body: { email, password: "long-enough-pw" } });
      await sleep(10);
      expect((await ws("DELETE", `/users/${up.body.user.id}`, { token: adminToken })).status).toBe(204);
      const signedIn = await signingIn;
      if (signedIn.status === 200) {
        expect((await ws("GET", "/collections", { token: signedIn.body.token })).status).toBe(401);
      } else expect(signedIn.status).toBe(401);
    }

    const upload = await fetch(`${app.url}/w/${projectId}/api/files?name=twice.txt`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, "content-type": "text/plain" },
      body: "twice",
    });
    expect(upload.status).toBe(201);
    const { file } = (await upload.json()) as { file: { id: string } };
    const files = await Promise.all([1, 2].map(() => ws("DELETE", `/files/${file.id}`, { token: adminToken })));
    expect(files.map((r) => r.status).sort()).toEqual([204, 404]);
  });
});

describe("dispatching an event again", () => {
  it("sends nothing twice, and queues no second job for a delivery that exists", async () => {
    // A crash between a dispatch's commit and its outbox delete leaves the event to go again.
    const { deps } = app.server;
    const pool = new WorkspacePool(deps, 1);
    const dispatcher = new WorkspaceDispatcher(deps, localStore(pool, deps.dialect));
    const lease = await pool.acquire(projectId);
    const db = lease?.db;
    if (!db) throw new Error("no workspace database");
    const event = {
      id: "evt_redispatch_0000000000000",
      channel: "items:posts",
      event: "created",
      data: JSON.stringify({ id: "itm_redispatched", title: "again" }),
      created_at: new Date().toISOString(),
    };
    const sent = () => receiver.requests.filter((r) => r.body.includes("itm_redispatched"));
    try {
      await db.insertInto("events").values(event).execute();
      await dispatcher.dispatch(projectId);
      await until("the first delivery", () => sent().length === 1);
      const delivery = await deps.db
        .selectFrom("webhook_deliveries")
        .select(["id", "status"])
        .where("body", "like", "%itm_redispatched%")
        .executeTakeFirstOrThrow();
      await until("the delivery to be recorded", async () => {
        const row = await deps.db
          .selectFrom("webhook_deliveries")
          .select("status")
          .where("id", "=", delivery.id)
          .executeTakeFirstOrThrow();
        return row.status === "succeeded";
      });
      // A succeeded delivery's job is gone (the delivery and its attempts are the record).
      const job = () =>
        deps.db.selectFrom("jobs").select("status").where("payload", "like", `%${delivery.id}%`).executeTakeFirst();
      await until("the delivery's job to be forgotten", async () => (await job()) === undefined);
      // Dispatched again, twice: the delivery exists, so no job is queued for it.
      for (const _ of [1, 2]) {
        await db.insertInto("events").values(event).execute();
        await dispatcher.dispatch(projectId);
        expect(await job()).toBeUndefined();
      }
      await sleep(200);
      expect(sent()).toHaveLength(1);
      const attempts = await deps.db
        .selectFrom("webhook_attempts")
        .select("attempt")
        .where("delivery_id", "=", delivery.id)
        .execute();
      expect(attempts).toEqual([{ attempt: 1 }]);
    } finally {
      lease?.release();
      await dispatcher.settle();
      await pool.closeAll();
    }
  });
});

describe("open workspace databases", () => {
  it("forget a SQLite workspace whose file was removed (a purge, by any process)", async () => {
    const { deps } = app.server;
    const created = await call(app, "POST", `/org/${slug}/projects`, {
      cookie: owner.cookie,
      body: { name: "Purged" },
    });
    expect(created.status).toBe(201);
    const id: string = created.body.project.id;
    await until("the project to be provisioned", async () => {
      const res = await call(app, "GET", `/org/${slug}/projects/purged`, { cookie: owner.cookie });
      return res.body.project.status === "active";
    });
    const pool = new WorkspacePool(deps, 4);
    const opened = async (project: string) => {
      const lease = await pool.acquire(project);
      lease?.release();
      return lease !== null;
    };
    try {
      expect(await opened(id)).toBe(true);
      await dropWorkspace(deps, id);
      pool.forgetVanished();
      // On SQLite the handle is gone with the file; a PostgreSQL schema costs nothing to keep.
      if (deps.dialect === "sqlite") {
        expect(await opened(id)).toBe(false);
        expect(pool.size).toBe(0);
      }
      expect(await opened(projectId)).toBe(true);
      pool.forgetVanished();
      expect(await opened(projectId)).toBe(true);
    } finally {
      await pool.closeAll();
    }
  });

  it("close their SQLite files, even those no query ever used", async () => {
    const { deps } = app.server;
    if (deps.dialect !== "sqlite") return;
    // A workspace no other connection of this process has open (SQLite defers closing a file
    // while another connection holds a lock on it).
    const lonely = "prj_fd_count_test";
    await migrateWorkspace(deps, lonely, "default", "1.1.0");
    // This process's descriptors open on that workspace's database file.
    const file = path.resolve(workspaceFile(deps, lonely));
    const openOnFile = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === file;
        } catch {
          return false;
        }
      }).length;
    const before = openOnFile();
    const pools = Array.from({ length: 20 }, () => new WorkspacePool(deps, 4));
    for (const pool of pools) {
      const lease = await pool.acquire(lonely);
      expect(lease).not.toBeNull();
      lease?.release();
    }
    expect(openOnFile()).toBe(before + 20);
    for (const pool of pools) await pool.closeAll();
    expect(openOnFile()).toBe(before);
    await dropWorkspace(deps, lonely);
  });
});

describe("outbox hints", () => {
  it("stay while a project is written to, and are cleared by the sweep once stale over an empty outbox", async () => {
    const { deps } = app.server;
    // A second dispatcher, as another process of the deployment would have.
    const dispatcher = new WorkspaceDispatcher(deps, localStore(new WorkspacePool(deps, 4), deps.dialect));
    const hint = () =>
      deps.db.selectFrom("workspace_outbox_hints").selectAll().where("project_id", "=", projectId).executeTakeFirst();
    await dispatcher.markPending(projectId);
    const written = await hint();
    expect(written).toBeDefined();
    // Fresh: the sweep dispatches the project and keeps the hint.
    await dispatcher.sweep();
    expect(await hint()).toEqual(written);
    try {
      app.clock.advance(61_000);
      await dispatcher.sweep();
      expect(await hint()).toBeUndefined();
      // The next change writes it again: this dispatcher no longer counts it as written.
      await dispatcher.markPending(projectId);
      expect(await hint()).toBeDefined();
    } finally {
      app.clock.advance(-61_000);
    }
  });
});
