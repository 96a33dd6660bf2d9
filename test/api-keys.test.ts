import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MCP_TOOL_NAMES } from "../src/mcp/catalog.ts";
import {
  addMember,
  call,
  createApiKey,
  expectError,
  expectValidation,
  type Mailbox,
  ownerWithOrg,
  sha256Hex,
  signUp,
  startApp,
  startMailbox,
  type TestApp,
  type TestUser,
} from "./harness.ts";

const DAY_MS = 86_400_000;
const API_KEY_FIELDS = [
  "createdAt",
  "createdBy",
  "expiresAt",
  "id",
  "lastUsedAt",
  "mcpTools",
  "name",
  "prefix",
  "scope",
];

let app: TestApp;
let mailbox: Mailbox;

beforeAll(async () => {
  mailbox = await startMailbox();
  // Many sign-ups and calls from one address: the default limits would get in the way.
  app = await startApp({
    SMTP_URL: mailbox.url,
    RATE_LIMIT_PER_MINUTE: "100000",
    AUTH_RATE_LIMIT_PER_MINUTE: "100000",
  });
});

afterAll(async () => {
  await app?.close();
  await mailbox?.close();
});

async function listKeys(user: TestUser, slug: string) {
  const res = await call(app, "GET", `/org/${slug}/api-keys`, { cookie: user.cookie });
  expect(res.status).toBe(200);
  return res;
}

describe("creating and listing API keys", () => {
  it("returns the key and its pak_ token once; the list never shows the token or its hash", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Key Org");
    const created = await call(app, "POST", `/org/${slug}/api-keys`, {
      cookie: owner.cookie,
      body: { name: "CI deploys", scope: "deploy" },
    });
    expect(created.status).toBe(201);
    expect(Object.keys(created.body).sort()).toEqual(["apiKey", "token"]);
    const { apiKey, token } = created.body;
    expect(token).toMatch(/^pak_[0-9a-f]{64}$/);
    expect(Object.keys(apiKey).sort()).toEqual(API_KEY_FIELDS);
    expect(apiKey).toMatchObject({
      name: "CI deploys",
      scope: "deploy",
      mcpTools: null,
      expiresAt: null,
      lastUsedAt: null,
      createdBy: owner.accountId,
    });
    expect(typeof apiKey.id).toBe("string");
    expect(apiKey.prefix.length).toBeGreaterThan("pak_".length);
    expect(apiKey.prefix.length).toBeLessThan(token.length);
    expect(token.startsWith(apiKey.prefix)).toBe(true);
    expect(Number.isNaN(Date.parse(apiKey.createdAt))).toBe(false);

    const list = await listKeys(owner, slug);
    expect(Object.keys(list.body)).toEqual(["apiKeys"]);
    expect(list.body.apiKeys).toEqual([apiKey]);
    const serialized = JSON.stringify(list.body);
    expect(serialized).not.toContain(token);
    expect(serialized).not.toContain(token.slice("pak_".length));
    expect(serialized).not.toContain(sha256Hex(token));
    expect(serialized.toLowerCase()).not.toContain("hash");
  });

  it("keeps expiresInDays and mcpTools", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Key Org");
    const created = await call(app, "POST", `/org/${slug}/api-keys`, {
      cookie: owner.cookie,
      body: { name: "agent", scope: "read-only", expiresInDays: 30, mcpTools: ["list_projects", "get_usage"] },
    });
    expect(created.status).toBe(201);
    const { apiKey } = created.body;
    expect(apiKey.mcpTools).toEqual(["list_projects", "get_usage"]);
    expect(Date.parse(apiKey.expiresAt) - Date.parse(apiKey.createdAt)).toBe(30 * DAY_MS);
    const list = await listKeys(owner, slug);
    expect(list.body.apiKeys).toEqual([apiKey]);
  });

  it("lists keys newest first", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Key Org");
    const first = await createApiKey(app, owner, slug, "full");
    app.clock.advance(1000);
    const second = await createApiKey(app, owner, slug, "read-only");
    const list = await listKeys(owner, slug);
    expect(list.body.apiKeys.map((k: { id: string }) => k.id)).toEqual([second.id, first.id]);
  });

  it("authenticates with the token as the key's org and records lastUsedAt", async () => {
    const { owner, slug, orgId } = await ownerWithOrg(app, "Key Org");
    const { token, id } = await createApiKey(app, owner, slug, "read-only");
    const before = await listKeys(owner, slug);
    expect(before.body.apiKeys.find((k: { id: string }) => k.id === id).lastUsedAt).toBeNull();

    const orgs = await call(app, "GET", "/orgs", { token });
    expect(orgs.status).toBe(200);
    expect(orgs.body.orgs).toHaveLength(1);
    expect(orgs.body.orgs[0]).toMatchObject({ id: orgId, slug });

    const after = await listKeys(owner, slug);
    const key = after.body.apiKeys.find((k: { id: string }) => k.id === id);
    expect(key.lastUsedAt).not.toBeNull();
    expect(Date.parse(key.lastUsedAt)).toBeGreaterThanOrEqual(Date.parse(key.createdAt));
  });
});

describe("ApiKeyInput validation", () => {
  let owner: TestUser;
  let slug: string;
  beforeAll(async () => {
    ({ owner, slug } = await ownerWithOrg(app, "Validation Org"));
  });

  const create = (body: unknown) => call(app, "POST", `/org/${slug}/api-keys`, { cookie: owner.cookie, body });
  const names = [...MCP_TOOL_NAMES];
  const tools = (count: number) => Array.from({ length: count }, (_, i) => names[i % names.length]);

  it.each([
    ["name missing", { scope: "full" }, "name"],
    ["name empty", { name: "", scope: "full" }, "name"],
    ["name of 61 characters", { name: "n".repeat(61), scope: "full" }, "name"],
    ["name not a string", { name: 42, scope: "full" }, "name"],
    ["name with a line break", { name: "ci\ndeploy", scope: "full" }, "name"],
    ["scope missing", { name: "k" }, "scope"],
    ["scope outside the enum", { name: "k", scope: "admin" }, "scope"],
    ["scope in the wrong case", { name: "k", scope: "FULL" }, "scope"],
    ["expiresInDays 0", { name: "k", scope: "full", expiresInDays: 0 }, "expiresInDays"],
    ["expiresInDays -1", { name: "k", scope: "full", expiresInDays: -1 }, "expiresInDays"],
    ["expiresInDays 1.5", { name: "k", scope: "full", expiresInDays: 1.5 }, "expiresInDays"],
    ["expiresInDays as a string", { name: "k", scope: "full", expiresInDays: "1" }, "expiresInDays"],
    ["mcpTools of 65 items", { name: "k", scope: "full", mcpTools: tools(65) }, "mcpTools"],
    ["mcpTools not an array", { name: "k", scope: "full", mcpTools: "list_projects" }, "mcpTools"],
    [
      "an mcpTools item of 81 characters",
      { name: "k", scope: "full", mcpTools: ["list_projects", "t".repeat(81)] },
      "mcpTools.1",
    ],
    [
      "an mcpTools name that is no tool",
      { name: "k", scope: "full", mcpTools: ["list_projects", "list_project"] },
      "mcpTools.1",
    ],
    ["an empty mcpTools item (no tool has it)", { name: "k", scope: "full", mcpTools: [""] }, "mcpTools.0"],
  ])("refuses %s (422 naming the field)", async (_label, body, path) => {
    expectValidation(await create(body), path);
  });

  it("creates no key when the input is refused", async () => {
    expect((await create({ name: "", scope: "full" })).status).toBe(422);
    const list = await listKeys(owner, slug);
    expect(list.body.apiKeys.some((k: { name: string }) => k.name === "")).toBe(false);
    const before = list.body.apiKeys.length;
    expect((await create({ name: "k", scope: "full", mcpTools: tools(65) })).status).toBe(422);
    expect((await listKeys(owner, slug)).body.apiKeys).toHaveLength(before);
  });

  it.each([
    ["a name of 1 character", { name: "a", scope: "full" }],
    ["a name of 60 characters", { name: "n".repeat(60), scope: "full" }],
    ["scope full", { name: "k", scope: "full" }],
    ["scope deploy", { name: "k", scope: "deploy" }],
    ["scope read-only", { name: "k", scope: "read-only" }],
    ["expiresInDays 1", { name: "k", scope: "full", expiresInDays: 1 }],
    ["mcpTools of 64 items", { name: "k", scope: "full", mcpTools: tools(64) }],
    ["an empty mcpTools list", { name: "k", scope: "full", mcpTools: [] }],
  ])("accepts %s", async (_label, body) => {
    const res = await create(body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.apiKey.name).toBe(body.name);
    expect(res.body.apiKey.scope).toBe(body.scope);
    if ("mcpTools" in body) expect(res.body.apiKey.mcpTools).toEqual(body.mcpTools);
  });

  it("refuses a body that is not JSON, or not sent as JSON, with 400", async () => {
    const res = await call(app, "POST", `/org/${slug}/api-keys`, {
      cookie: owner.cookie,
      rawBody: "{not json",
      headers: { "content-type": "application/json" },
    });
    expectError(res, 400, "BAD_REQUEST");
    const wrongType = await call(app, "POST", `/org/${slug}/api-keys`, {
      cookie: owner.cookie,
      rawBody: JSON.stringify({ name: "plain", scope: "full" }),
      headers: { "content-type": "text/plain" },
    });
    expectError(wrongType, 400, "BAD_REQUEST");
    const list = await listKeys(owner, slug);
    expect(list.body.apiKeys.some((k: { name: string }) => k.name === "plain")).toBe(false);
  });
});

describe("expiry", () => {
  it("stops a key once expiresInDays has lapsed (injectable clock)", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Key Org");
    const { token } = await createApiKey(app, owner, slug, "full", { expiresInDays: 1 });
    const lasting = await createApiKey(app, owner, slug, "full");
    expect((await call(app, "GET", `/org/${slug}/overview`, { token })).status).toBe(200);

    app.clock.advance(DAY_MS - 60_000);
    expect((await call(app, "GET", `/org/${slug}/overview`, { token })).status).toBe(200);

    app.clock.advance(60_000 + 1000);
    expectError(await call(app, "GET", `/org/${slug}/overview`, { token }), 401, "UNAUTHORIZED");
    expectError(await call(app, "GET", "/orgs", { token }), 401, "UNAUTHORIZED");
    // A key without expiresInDays does not lapse.
    expect((await call(app, "GET", `/org/${slug}/overview`, { token: lasting.token })).status).toBe(200);
  });
});

describe("revocation", () => {
  it("takes effect on the very next request; a second revoke is 404; the key leaves the list", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Key Org");
    const { token, id } = await createApiKey(app, owner, slug, "full");
    const other = await createApiKey(app, owner, slug, "read-only");
    expect((await call(app, "GET", `/org/${slug}/overview`, { token })).status).toBe(200);

    const revoked = await call(app, "DELETE", `/org/${slug}/api-keys/${id}`, { cookie: owner.cookie });
    expect(revoked.status).toBe(204);
    expect(revoked.body).toBe("");

    expectError(await call(app, "GET", `/org/${slug}/overview`, { token }), 401, "UNAUTHORIZED");
    expectError(await call(app, "GET", "/orgs", { token }), 401, "UNAUTHORIZED");
    expectError(await call(app, "DELETE", `/org/${slug}/api-keys/${id}`, { cookie: owner.cookie }), 404, "NOT_FOUND");

    const list = await listKeys(owner, slug);
    expect(list.body.apiKeys.map((k: { id: string }) => k.id)).toEqual([other.id]);
    expect((await call(app, "GET", `/org/${slug}/overview`, { token: other.token })).status).toBe(200);
  });

  it("answers 404 for an unknown key id", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Key Org");
    expectError(
      await call(app, "DELETE", `/org/${slug}/api-keys/key_doesnotexist`, { cookie: owner.cookie }),
      404,
      "NOT_FOUND",
    );
  });

  it("stops every key of an org once the org is deleted", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Key Org");
    const { token } = await createApiKey(app, owner, slug, "full");
    expect((await call(app, "DELETE", `/org/${slug}`, { cookie: owner.cookie })).status).toBe(200);
    expectError(await call(app, "GET", "/orgs", { token }), 401, "UNAUTHORIZED");
    expectError(await call(app, "GET", `/org/${slug}/api-keys`, { token }), 401, "UNAUTHORIZED");
  });

  it("lets a full key revoke itself, after which it is refused", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Key Org");
    const { token, id } = await createApiKey(app, owner, slug, "full");
    expect((await call(app, "DELETE", `/org/${slug}/api-keys/${id}`, { token })).status).toBe(204);
    expectError(await call(app, "GET", `/org/${slug}/api-keys`, { token }), 401, "UNAUTHORIZED");
  });
});

describe("credentials and isolation", () => {
  let a: { owner: TestUser; slug: string };
  let b: { owner: TestUser; slug: string };
  let keyA: { token: string; id: string };
  let keyB: { token: string; id: string };
  beforeAll(async () => {
    a = await ownerWithOrg(app, "Org A");
    b = await ownerWithOrg(app, "Org B");
    keyA = await createApiKey(app, a.owner, a.slug, "full");
    keyB = await createApiKey(app, b.owner, b.slug, "full");
  });

  it("answers 404 when a key of org A is used on org B's routes", async () => {
    const token = keyA.token;
    const attempts: [string, string, unknown?][] = [
      ["GET", `/org/${b.slug}/overview`],
      ["GET", `/org/${b.slug}/members`],
      ["GET", `/org/${b.slug}/api-keys`],
      ["POST", `/org/${b.slug}/api-keys`, { name: "intruder", scope: "full" }],
      ["DELETE", `/org/${b.slug}/api-keys/${keyB.id}`],
      ["GET", `/org/${b.slug}/audit`],
      ["PATCH", `/org/${b.slug}`, { name: "Taken Over" }],
      ["POST", `/org/${b.slug}/invitations`, { email: "x@example.test", role: "viewer" }],
    ];
    for (const [method, path, body] of attempts) {
      const res = await call(app, method, path, { token, ...(body === undefined ? {} : { body }) });
      expect({ method, path, status: res.status, code: res.body.error?.code }).toEqual({
        method,
        path,
        status: 404,
        code: "NOT_FOUND",
      });
    }
    // Nothing in org B changed and its key still works.
    expect((await call(app, "GET", `/org/${b.slug}/overview`, { token: keyB.token })).status).toBe(200);
    const listB = await listKeys(b.owner, b.slug);
    expect(listB.body.apiKeys.map((k: { id: string }) => k.id)).toEqual([keyB.id]);
    const overviewB = await call(app, "GET", `/org/${b.slug}/overview`, { cookie: b.owner.cookie });
    expect(overviewB.body.org.name).toBe("Org B");
  });

  it("does not revoke another org's key through one's own org", async () => {
    const res = await call(app, "DELETE", `/org/${a.slug}/api-keys/${keyB.id}`, { cookie: a.owner.cookie });
    expectError(res, 404, "NOT_FOUND");
    expect((await call(app, "GET", `/org/${b.slug}/overview`, { token: keyB.token })).status).toBe(200);
  });

  it("answers 404 to a signed-in non-member", async () => {
    const outsider = await signUp(app);
    expectError(await call(app, "GET", `/org/${a.slug}/api-keys`, { cookie: outsider.cookie }), 404, "NOT_FOUND");
    expectError(
      await call(app, "POST", `/org/${a.slug}/api-keys`, {
        cookie: outsider.cookie,
        body: { name: "x", scope: "full" },
      }),
      404,
      "NOT_FOUND",
    );
    expectError(
      await call(app, "DELETE", `/org/${a.slug}/api-keys/${keyA.id}`, { cookie: outsider.cookie }),
      404,
      "NOT_FOUND",
    );
  });

  it.each([
    ["Bearer nope", "a token without the pak_ form"],
    ["Bearer pak_123", "a pak_ token that is too short"],
    [`Bearer pak_${"z".repeat(64)}`, "a pak_ token that is not hex"],
    [`Bearer pak_${randomBytes(32).toString("hex")}`, "a well-formed token that no key has"],
    ["Basic x", "a Basic authorization"],
    ["Bearer", "a Bearer without a token"],
  ])("answers 401 to %s (%s)", async (authorization) => {
    for (const path of ["/orgs", `/org/${a.slug}/overview`, `/org/${a.slug}/api-keys`]) {
      const res = await call(app, "GET", path, { headers: { authorization } });
      expectError(res, 401, "UNAUTHORIZED");
    }
  });

  it("answers 401 without credentials", async () => {
    expectError(await call(app, "GET", `/org/${a.slug}/api-keys`), 401, "UNAUTHORIZED");
    expectError(
      await call(app, "POST", `/org/${a.slug}/api-keys`, { body: { name: "x", scope: "full" } }),
      401,
      "UNAUTHORIZED",
    );
    expectError(await call(app, "DELETE", `/org/${a.slug}/api-keys/${keyA.id}`), 401, "UNAUTHORIZED");
  });
});

describe("key scopes", () => {
  let owner: TestUser;
  let slug: string;
  let ownerMemberId: string;
  let keys: Record<"read-only" | "deploy" | "full", { token: string; id: string }>;
  let victim: { token: string; id: string };

  beforeAll(async () => {
    ({ owner, slug } = await ownerWithOrg(app, "Scope Org"));
    keys = {
      "read-only": await createApiKey(app, owner, slug, "read-only"),
      deploy: await createApiKey(app, owner, slug, "deploy"),
      full: await createApiKey(app, owner, slug, "full"),
    };
    victim = await createApiKey(app, owner, slug, "read-only");
    const members = await call(app, "GET", `/org/${slug}/members`, { cookie: owner.cookie });
    ownerMemberId = members.body.members[0].id;
  });

  it.each(["read-only", "deploy", "full"] as const)("lets a %s key read everything readable", async (scope) => {
    const token = keys[scope].token;
    for (const path of [
      "/orgs",
      `/org/${slug}/overview`,
      `/org/${slug}/members`,
      `/org/${slug}/api-keys`,
      `/org/${slug}/audit`,
    ]) {
      const res = await call(app, "GET", path, { token });
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
    }
  });

  const writes = (): [string, string, unknown?][] => [
    ["POST", `/org/${slug}/api-keys`, { name: "more", scope: "read-only" }],
    ["DELETE", `/org/${slug}/api-keys/${victim.id}`],
    ["POST", `/org/${slug}/invitations`, { email: "scoped@example.test", role: "viewer" }],
    ["PATCH", `/org/${slug}`, { name: "Renamed By Key" }],
    ["PATCH", `/org/${slug}/members/${ownerMemberId}`, { role: "viewer" }],
    ["DELETE", `/org/${slug}/members/${ownerMemberId}`],
    ["DELETE", `/org/${slug}`],
    ["POST", "/org", { name: "Key Made Org" }],
  ];

  async function expectAllForbidden(token: string, attempts: [string, string, unknown?][]) {
    for (const [method, path, body] of attempts) {
      const res = await call(app, method, path, { token, ...(body === undefined ? {} : { body }) });
      expect({ method, path, status: res.status, code: res.body.error?.code }).toEqual({
        method,
        path,
        status: 403,
        code: "FORBIDDEN",
      });
    }
  }

  it("refuses every write to a read-only key with 403", async () => {
    await expectAllForbidden(keys["read-only"].token, writes());
    await expectUnchanged();
  });

  it("refuses a read-only key's write with 403 before looking at the body", async () => {
    await expectAllForbidden(keys["read-only"].token, [
      ["POST", `/org/${slug}/api-keys`, {}],
      ["POST", `/org/${slug}/projects`, { name: "" }],
      ["PATCH", `/org/${slug}`, { name: "x" }],
    ]);
  });

  it("refuses admin writes to a deploy key with 403", async () => {
    await expectAllForbidden(keys.deploy.token, writes());
    await expectUnchanged();
  });

  async function expectUnchanged() {
    const list = await listKeys(owner, slug);
    expect(list.body.apiKeys.map((k: { id: string }) => k.id).sort()).toEqual(
      [keys["read-only"].id, keys.deploy.id, keys.full.id, victim.id].sort(),
    );
    const overview = await call(app, "GET", `/org/${slug}/overview`, { cookie: owner.cookie });
    expect(overview.body.org.name).toBe("Scope Org");
    const members = await call(app, "GET", `/org/${slug}/members`, { cookie: owner.cookie });
    expect(members.body.members).toHaveLength(1);
    expect(members.body.members[0]).toMatchObject({ id: ownerMemberId, role: "owner" });
  }

  it("lets a full key create and revoke keys, invite and update the org", async () => {
    const token = keys.full.token;
    const created = await call(app, "POST", `/org/${slug}/api-keys`, {
      token,
      body: { name: "made by key", scope: "read-only" },
    });
    expect(created.status).toBe(201);
    expect(created.body.apiKey.createdBy).toBe(keys.full.id);
    expect((await call(app, "GET", "/orgs", { token: created.body.token })).status).toBe(200);

    expect((await call(app, "DELETE", `/org/${slug}/api-keys/${created.body.apiKey.id}`, { token })).status).toBe(204);
    expectError(await call(app, "GET", "/orgs", { token: created.body.token }), 401, "UNAUTHORIZED");

    const invite = await call(app, "POST", `/org/${slug}/invitations`, {
      token,
      body: { email: "invited-by-key@example.test", role: "developer" },
    });
    expect(invite.status).toBe(201);
    expect(invite.body.invite).toMatchObject({ email: "invited-by-key@example.test", role: "developer" });

    const patched = await call(app, "PATCH", `/org/${slug}`, { token, body: { name: "Scope Org Renamed" } });
    expect(patched.status).toBe(200);
    expect(patched.body.org.name).toBe("Scope Org Renamed");
  });

  it("refuses to delete the org to every key, full included", async () => {
    for (const scope of ["read-only", "deploy", "full"] as const) {
      expectError(await call(app, "DELETE", `/org/${slug}`, { token: keys[scope].token }), 403, "FORBIDDEN");
    }
    expect((await call(app, "GET", `/org/${slug}/overview`, { cookie: owner.cookie })).status).toBe(200);
  });

  it("refuses owner-only member changes to a full key", async () => {
    const res = await call(app, "PATCH", `/org/${slug}/members/${ownerMemberId}`, {
      token: keys.full.token,
      body: { role: "admin" },
    });
    expectError(res, 403, "FORBIDDEN");
    const members = await call(app, "GET", `/org/${slug}/members`, { cookie: owner.cookie });
    expect(members.body.members.find((m: { id: string }) => m.id === ownerMemberId).role).toBe("owner");
  });
});

describe("role matrix", () => {
  let owner: TestUser;
  let slug: string;
  const users = {} as Record<"owner" | "admin" | "developer" | "viewer", TestUser>;

  beforeAll(async () => {
    ({ owner, slug } = await ownerWithOrg(app, "Role Org"));
    users.owner = owner;
    for (const role of ["admin", "developer", "viewer"] as const) {
      users[role] = (await addMember(app, mailbox, owner, slug, role)).user;
    }
  });

  it.each(["owner", "admin"] as const)("lets an %s create and revoke keys", async (role) => {
    const user = users[role];
    const created = await call(app, "POST", `/org/${slug}/api-keys`, {
      cookie: user.cookie,
      body: { name: `${role}'s key`, scope: "full" },
    });
    expect(created.status).toBe(201);
    expect(created.body.apiKey.createdBy).toBe(user.accountId);
    // Each revokes a key someone else made, too.
    const other = await createApiKey(app, owner, slug, "read-only");
    for (const id of [created.body.apiKey.id, other.id]) {
      expect((await call(app, "DELETE", `/org/${slug}/api-keys/${id}`, { cookie: user.cookie })).status).toBe(204);
    }
    const ids = (await listKeys(owner, slug)).body.apiKeys.map((k: { id: string }) => k.id);
    expect(ids).not.toContain(created.body.apiKey.id);
    expect(ids).not.toContain(other.id);
  });

  it.each(["developer", "viewer"] as const)("refuses a %s creating or revoking keys (403)", async (role) => {
    const user = users[role];
    const target = await createApiKey(app, owner, slug, "read-only");
    const before = (await listKeys(owner, slug)).body.apiKeys.length;
    expectError(
      await call(app, "POST", `/org/${slug}/api-keys`, { cookie: user.cookie, body: { name: "mine", scope: "full" } }),
      403,
      "FORBIDDEN",
    );
    expectError(
      await call(app, "DELETE", `/org/${slug}/api-keys/${target.id}`, { cookie: user.cookie }),
      403,
      "FORBIDDEN",
    );
    const after = (await listKeys(owner, slug)).body.apiKeys;
    expect(after).toHaveLength(before);
    expect(after.map((k: { id: string }) => k.id)).toContain(target.id);
    expect((await call(app, "GET", "/orgs", { token: target.token })).status).toBe(200);
  });

  it.each(["owner", "admin", "developer", "viewer"] as const)("lets a %s list the keys", async (role) => {
    const key = await createApiKey(app, owner, slug, "deploy");
    const res = await call(app, "GET", `/org/${slug}/api-keys`, { cookie: users[role].cookie });
    expect(res.status).toBe(200);
    expect(res.body.apiKeys.map((k: { id: string }) => k.id)).toContain(key.id);
    const serialized = JSON.stringify(res.body);
    expect(serialized).not.toContain(key.token);
    expect(serialized).not.toContain(sha256Hex(key.token));
  });
});

describe("IP allowlist", () => {
  it("refuses keys from outside the org's allowlist and accepts them from inside", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Allowlist Org");
    const { token } = await createApiKey(app, owner, slug, "read-only");
    const setAllowlist = async (ipAllowlist: string[]) => {
      const res = await call(app, "PATCH", `/org/${slug}`, { cookie: owner.cookie, body: { ipAllowlist } });
      expect(res.status).toBe(200);
      expect(res.body.org.ipAllowlist).toEqual(ipAllowlist);
    };

    await setAllowlist(["10.0.0.0/8"]);
    expectError(await call(app, "GET", "/orgs", { token }), 403, "FORBIDDEN");
    expectError(await call(app, "GET", `/org/${slug}/overview`, { token }), 403, "FORBIDDEN");
    // The allowlist applies to API keys; the signed-in owner can still reach the org.
    expect((await call(app, "GET", `/org/${slug}/overview`, { cookie: owner.cookie })).status).toBe(200);

    await setAllowlist(["127.0.0.1/32"]);
    expect((await call(app, "GET", `/org/${slug}/overview`, { token })).status).toBe(200);

    await setAllowlist(["10.0.0.0/8", "127.0.0.1"]);
    expect((await call(app, "GET", `/org/${slug}/overview`, { token })).status).toBe(200);

    await setAllowlist([]);
    expect((await call(app, "GET", `/org/${slug}/overview`, { token })).status).toBe(200);
  });
});
