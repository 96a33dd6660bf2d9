import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addMember,
  call,
  createApiKey,
  createOrg,
  type Mailbox,
  signUp,
  startApp,
  startMailbox,
  type TestApp,
} from "./harness.ts";

/**
 * Who may perform an operation is settled before its input is validated: a caller outside the
 * org gets 404 and a member without the role (or a key without the scope) 403, whatever the body
 * or query holds, and only a caller who may perform the operation hears what the input lacks.
 */
describe("authorization before validation", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let slug: string;
  const callers: Record<string, { cookie?: string; token?: string }> = {};

  beforeAll(async () => {
    mailbox = await startMailbox();
    app = await startApp({ SMTP_URL: mailbox.url, AUTH_RATE_LIMIT_PER_MINUTE: "10000" });
    const owner = await signUp(app);
    slug = (await createOrg(app, owner, "Order Org")).slug;
    callers.owner = { cookie: owner.cookie };
    callers.developer = { cookie: (await addMember(app, mailbox, owner, slug, "developer")).user.cookie };
    callers.viewer = { cookie: (await addMember(app, mailbox, owner, slug, "viewer")).user.cookie };
    callers.deploy = { token: (await createApiKey(app, owner, slug, "deploy")).token };
    callers.outsider = { cookie: (await signUp(app)).cookie };
    callers.anonymous = {};
  });

  afterAll(async () => {
    await app?.close();
    await mailbox?.close();
  });

  // Each operation with an input no caller could get past validation, and the callers refused
  // (403) for their role or scope; the owner's answer shows the input is indeed invalid.
  const cases: Array<{ op: string; method: string; path: () => string; body?: unknown; refused: string[] }> = [
    {
      op: "create a project",
      method: "POST",
      path: () => `/org/${slug}/projects`,
      body: { name: 5 },
      refused: ["viewer"],
    },
    {
      op: "update a project",
      method: "PATCH",
      path: () => `/org/${slug}/projects/some-project`,
      body: { name: 5 },
      refused: ["viewer"],
    },
    {
      op: "upgrade a project",
      method: "POST",
      path: () => `/org/${slug}/projects/some-project/upgrade?version=${"9".repeat(41)}`,
      refused: ["viewer"],
    },
    {
      op: "update the org",
      method: "PATCH",
      path: () => `/org/${slug}`,
      body: { name: 5 },
      refused: ["developer", "viewer", "deploy"],
    },
    {
      op: "create an API key",
      method: "POST",
      path: () => `/org/${slug}/api-keys`,
      body: { name: "k", scope: "everything" },
      refused: ["developer", "viewer", "deploy"],
    },
    {
      op: "invite a member",
      method: "POST",
      path: () => `/org/${slug}/invitations`,
      body: { email: "not-an-email", role: "viewer" },
      refused: ["developer", "viewer", "deploy"],
    },
    {
      op: "change a member's role",
      method: "PATCH",
      path: () => `/org/${slug}/members/mem_00000000000000000000000000`,
      body: { role: "superuser" },
      refused: ["developer", "viewer", "deploy"],
    },
    {
      op: "create a webhook",
      method: "POST",
      path: () => `/org/${slug}/webhooks`,
      body: { url: 5 },
      refused: ["developer", "viewer", "deploy"],
    },
    {
      op: "update a webhook",
      method: "PATCH",
      path: () => `/org/${slug}/webhooks/whk_00000000000000000000000000`,
      body: { url: 5 },
      refused: ["developer", "viewer", "deploy"],
    },
    {
      op: "create an integration",
      method: "POST",
      path: () => `/org/${slug}/integrations`,
      body: { kind: "carrier-pigeon" },
      refused: ["developer", "viewer", "deploy"],
    },
    {
      op: "update an integration",
      method: "PATCH",
      path: () => `/org/${slug}/integrations/int_00000000000000000000000000`,
      body: { events: 5 },
      refused: ["developer", "viewer", "deploy"],
    },
    {
      op: "restore a project to an instant",
      method: "POST",
      path: () => `/org/${slug}/projects/some-project/restore`,
      body: { timestamp: "yesterday" },
      refused: ["viewer"],
    },
    {
      op: "back up a project",
      method: "POST",
      path: () => `/org/${slug}/projects/some-project/backups`,
      body: { kind: "weekly" },
      refused: ["viewer"],
    },
    {
      op: "create a branch",
      method: "POST",
      path: () => `/org/${slug}/projects/some-project/branches`,
      body: { name: "" },
      refused: ["viewer"],
    },
    {
      op: "add a custom domain",
      method: "POST",
      path: () => `/org/${slug}/projects/some-project/domains`,
      body: { hostname: "localhost" },
      refused: ["viewer", "deploy"],
    },
    {
      op: "list tenant errors",
      method: "GET",
      path: () => `/org/${slug}/projects/some-project/errors?status=teapot`,
      refused: [],
    },
    {
      op: "read the audit log",
      method: "GET",
      path: () => `/org/${slug}/audit?limit=many`,
      refused: ["developer", "viewer"],
    },
  ];

  it.each(cases)("$op: 401, 404, 403 before 422", async ({ method, path, body, refused }) => {
    const answer = async (who: string) => (await call(app, method, path(), { ...callers[who], body })).status;
    expect(await answer("anonymous")).toBe(401);
    expect(await answer("outsider")).toBe(404);
    for (const who of refused) expect(await answer(who), who).toBe(403);
    expect(await answer("owner")).toBe(422);
  });

  it.each([
    { method: "POST", path: "/org", body: {} },
    { method: "PATCH", path: "/account", body: { name: 5 } },
    { method: "POST", path: "/invitations/accept", body: {} },
    { method: "POST", path: "/auth/sign-out", body: undefined },
  ])(
    "$method $path, for a signed-in account only: an API key is 403 whatever the body",
    async ({ method, path, body }) => {
      const res = await call(app, method, path, { ...callers.deploy, body });
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe("FORBIDDEN");
      // A signed-in account gets past it (a fresh one: signing out must not end a session others use).
      expect((await call(app, method, path, { cookie: (await signUp(app)).cookie, body })).status).not.toBe(403);
    },
  );

  it("lets a caller who may perform the operation hear what the input lacks", async () => {
    const res = await call(app, "POST", `/org/${slug}/projects`, { ...callers.developer, body: { name: 5 } });
    expect(res.status).toBe(422);
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toContain("name");
    const viaKey = await call(app, "POST", `/org/${slug}/projects`, { ...callers.deploy, body: { name: 5 } });
    expect(viaKey.status).toBe(422);
  });
});
