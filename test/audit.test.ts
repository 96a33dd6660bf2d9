import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addMember,
  type CallResult,
  call,
  createApiKey,
  expectError,
  expectValidation,
  invitationToken,
  type Mailbox,
  ownerWithOrg,
  sha256Hex,
  signUp,
  startApp,
  startMailbox,
  type TestApp,
  type TestUser,
} from "./harness.ts";

const HOUR_MS = 3_600_000;
const AUDIT_EVENT_FIELDS = ["action", "actor", "createdAt", "data", "id", "ip", "target"];

interface AuditEvent {
  id: string;
  action: string;
  actor: { type: string; id: string; email?: string };
  target: { type: string; id: string };
  data: Record<string, unknown>;
  ip: string | null;
  createdAt: string;
}

let app: TestApp;
let mailbox: Mailbox;

beforeAll(async () => {
  mailbox = await startMailbox();
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

type Caller = { cookie: string } | { token: string };

function auditCall(caller: Caller | undefined, slug: string, query: Record<string, string> = {}) {
  const search = new URLSearchParams(query).toString();
  return call(app, "GET", `/org/${slug}/audit${search ? `?${search}` : ""}`, caller ?? {});
}

/** The events of a successful audit read. */
async function events(caller: Caller, slug: string, query: Record<string, string> = {}): Promise<AuditEvent[]> {
  const res = await auditCall(caller, slug, query);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(Object.keys(res.body)).toEqual(["events"]);
  return res.body.events;
}

/** `ms` written as ISO-8601 in a zone `offsetMinutes` east of UTC, e.g. `2024-05-01T14:00:00.000+02:00`. */
function isoWithOffset(ms: number, offsetMinutes: number): string {
  const local = new Date(ms + offsetMinutes * 60_000).toISOString().slice(0, -1);
  const sign = offsetMinutes >= 0 ? "+" : "-";
  const abs = Math.abs(offsetMinutes);
  return `${local}${sign}${String(Math.floor(abs / 60)).padStart(2, "0")}:${String(abs % 60).padStart(2, "0")}`;
}

describe("rows written by mutations", () => {
  let owner: TestUser;
  let slug: string;
  let orgId: string;
  let sessionKeyId: string;
  let fullKey: { token: string; id: string };
  let keyMadeByKeyId: string;
  let sessionInviteId: string;
  let keyInviteId: string;
  let log: AuditEvent[];

  beforeAll(async () => {
    ({ owner, slug, orgId } = await ownerWithOrg(app, "Audited Org"));
    const step = async <T>(action: () => Promise<T>): Promise<T> => {
      app.clock.advance(1000);
      return action();
    };
    const ok = (res: CallResult, status: number) => {
      if (res.status !== status) throw new Error(`setup failed: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    };
    const session = { cookie: owner.cookie };
    await step(async () =>
      ok(await call(app, "PATCH", `/org/${slug}`, { ...session, body: { name: "Renamed Org" } }), 200),
    );
    sessionKeyId = (await step(() => createApiKey(app, owner, slug, "read-only"))).id;
    await step(async () => ok(await call(app, "DELETE", `/org/${slug}/api-keys/${sessionKeyId}`, session), 204));
    sessionInviteId = await step(
      async () =>
        ok(
          await call(app, "POST", `/org/${slug}/invitations`, {
            ...session,
            body: { email: "invited-by-owner@example.test", role: "developer" },
          }),
          201,
        ).invite.id,
    );
    fullKey = await step(() => createApiKey(app, owner, slug, "full"));
    const byKey = { token: fullKey.token };
    keyMadeByKeyId = await step(
      async () =>
        ok(
          await call(app, "POST", `/org/${slug}/api-keys`, {
            ...byKey,
            body: { name: "made by a key", scope: "deploy" },
          }),
          201,
        ).apiKey.id,
    );
    keyInviteId = await step(
      async () =>
        ok(
          await call(app, "POST", `/org/${slug}/invitations`, {
            ...byKey,
            body: { email: "invited-by-key@example.test", role: "viewer" },
          }),
          201,
        ).invite.id,
    );
    await step(async () =>
      ok(await call(app, "PATCH", `/org/${slug}`, { ...byKey, body: { defaultRegion: "fra" } }), 200),
    );
    await step(async () => ok(await call(app, "DELETE", `/org/${slug}/api-keys/${keyMadeByKeyId}`, byKey), 204));
    log = await events({ cookie: owner.cookie }, slug);
  });

  it("records each mutation, newest first", () => {
    expect(log.map((e) => e.action)).toEqual([
      "api_key.revoked",
      "org.updated",
      "member.invited",
      "api_key.created",
      "api_key.created",
      "member.invited",
      "api_key.revoked",
      "api_key.created",
      "org.updated",
      "org.created",
    ]);
    const times = log.map((e) => Date.parse(e.createdAt));
    for (let i = 1; i < times.length; i++) expect(times[i - 1]).toBeGreaterThan(times[i] as number);
  });

  it("gives every row {id, action, actor, target, data, ip, createdAt}", () => {
    for (const event of log) {
      expect(Object.keys(event).sort()).toEqual(AUDIT_EVENT_FIELDS);
      expect(typeof event.id).toBe("string");
      expect(event.id.length).toBeGreaterThan(0);
      expect(typeof event.data).toBe("object");
      expect(event.data).not.toBeNull();
      expect(event.ip).toBe("127.0.0.1");
      expect(Number.isNaN(Date.parse(event.createdAt))).toBe(false);
    }
    expect(new Set(log.map((e) => e.id)).size).toBe(log.length);
  });

  it("names the signed-in account as the actor of session calls", () => {
    const account = { type: "account", id: owner.accountId, email: owner.email };
    const bySession = log.slice(5);
    expect(bySession.map((e) => e.action)).toEqual([
      "member.invited",
      "api_key.revoked",
      "api_key.created",
      "org.updated",
      "org.created",
    ]);
    for (const event of bySession) expect(event.actor).toEqual(account);
    // The full key itself was created by the owner.
    expect(log[4]?.actor).toEqual(account);
  });

  it("names the API key as the actor of key calls", () => {
    for (const event of log.slice(0, 4)) expect(event.actor).toEqual({ type: "api_key", id: fullKey.id });
  });

  it("points each row at its target", () => {
    const org = { type: "org", id: orgId };
    expect(log[9]).toMatchObject({ action: "org.created", target: org, data: { name: "Audited Org" } });
    expect(log[8]).toMatchObject({ action: "org.updated", target: org, data: { name: "Renamed Org" } });
    expect(log[7]).toMatchObject({
      action: "api_key.created",
      target: { type: "api_key", id: sessionKeyId },
      data: { scope: "read-only" },
    });
    expect(log[6]).toMatchObject({ action: "api_key.revoked", target: { type: "api_key", id: sessionKeyId } });
    expect(log[5]).toMatchObject({
      action: "member.invited",
      target: { type: "invitation", id: sessionInviteId },
      data: { email: "invited-by-owner@example.test", role: "developer" },
    });
    expect(log[4]).toMatchObject({ action: "api_key.created", target: { type: "api_key", id: fullKey.id } });
    expect(log[3]).toMatchObject({
      action: "api_key.created",
      target: { type: "api_key", id: keyMadeByKeyId },
      data: { name: "made by a key", scope: "deploy" },
    });
    expect(log[2]).toMatchObject({
      action: "member.invited",
      target: { type: "invitation", id: keyInviteId },
      data: { email: "invited-by-key@example.test", role: "viewer" },
    });
    expect(log[1]).toMatchObject({ action: "org.updated", target: org, data: { defaultRegion: "fra" } });
    expect(log[0]).toMatchObject({ action: "api_key.revoked", target: { type: "api_key", id: keyMadeByKeyId } });
  });

  it("writes no row for a refused mutation", async () => {
    const readOnly = await createApiKey(app, owner, slug, "read-only");
    const before = await events({ cookie: owner.cookie }, slug, { limit: "500" });
    const refused = [
      await call(app, "POST", `/org/${slug}/api-keys`, { token: readOnly.token, body: { name: "no", scope: "full" } }),
      await call(app, "PATCH", `/org/${slug}`, { token: readOnly.token, body: { name: "Nope" } }),
      await call(app, "POST", `/org/${slug}/api-keys`, { cookie: owner.cookie, body: { name: "", scope: "full" } }),
      await call(app, "DELETE", `/org/${slug}/api-keys/${sessionKeyId}`, { cookie: owner.cookie }),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 403, 422, 404]);
    expect(await events({ cookie: owner.cookie }, slug, { limit: "500" })).toEqual(before);
  });
});

describe("a PATCH that changes nothing", () => {
  it("answers 200 with the record and writes no row, for the org, a webhook and an integration", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Empty Patch Org");
    const hook = await call(app, "POST", `/org/${slug}/webhooks`, {
      cookie: owner.cookie,
      body: { url: "https://hooks.example.com/empty", events: ["*"] },
    });
    const integration = await call(app, "POST", `/org/${slug}/integrations`, {
      cookie: owner.cookie,
      body: { kind: "slack", config: { webhookUrl: "https://hooks.example.com/slack/empty" } },
    });
    expect([hook.status, integration.status]).toEqual([201, 201]);
    const before = await events({ cookie: owner.cookie }, slug, { limit: "500" });
    for (const path of [
      `/org/${slug}`,
      `/org/${slug}/webhooks/${hook.body.webhook.id}`,
      `/org/${slug}/integrations/${integration.body.integration.id}`,
    ]) {
      const res = await call(app, "PATCH", path, { cookie: owner.cookie, body: {} });
      expect(res.status, path).toBe(200);
    }
    expect(await events({ cookie: owner.cookie }, slug, { limit: "500" })).toEqual(before);
  });
});

describe("secrets", () => {
  it("never shows the API key token, the invitation token or the webhook secret", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Secretive Org");
    const key = await createApiKey(app, owner, slug, "full");

    const invitee = await signUp(app);
    const since = mailbox.messages.length;
    const invite = await call(app, "POST", `/org/${slug}/invitations`, {
      cookie: owner.cookie,
      body: { email: invitee.email, role: "viewer" },
    });
    expect(invite.status).toBe(201);
    const inviteToken = invitationToken(await mailbox.waitFor(invitee.email, since));
    const accepted = await call(app, "POST", "/invitations/accept", {
      cookie: invitee.cookie,
      body: { token: inviteToken },
    });
    expect(accepted.status).toBe(200);

    // A resent invitation carries a new token.
    const second = await signUp(app);
    const invited = await call(app, "POST", `/org/${slug}/invitations`, {
      cookie: owner.cookie,
      body: { email: second.email, role: "developer" },
    });
    expect(invited.status).toBe(201);
    const firstMail = await mailbox.waitFor(second.email, since);
    const beforeResend = mailbox.messages.indexOf(firstMail) + 1;
    const resent = await call(app, "POST", `/org/${slug}/members/${invited.body.invite.id}/resend`, {
      cookie: owner.cookie,
    });
    expect(resent.status).toBe(200);
    const resentToken = invitationToken(await mailbox.waitFor(second.email, beforeResend));
    expect(resentToken).not.toBe(invitationToken(firstMail));

    const patched = await call(app, "PATCH", `/org/${slug}`, {
      token: key.token,
      body: { webhookUrl: "https://hooks.example.test/plinth" },
    });
    expect(patched.status).toBe(200);
    const webhookSecret: string = patched.body.webhookSecret;
    expect(webhookSecret).toMatch(/^whsec_/);

    const log = await events({ cookie: owner.cookie }, slug, { limit: "500" });
    const actions = log.map((e) => e.action);
    expect(actions).toContain("api_key.created");
    expect(actions).toContain("member.invited");
    expect(actions).toContain("org.updated");
    expect(actions).toContain("member.joined");
    expect(actions).toContain("invitation.resent");
    const webhookRow = log.find((e) => e.action === "org.updated");
    expect(webhookRow?.data).toMatchObject({ webhookUrl: "https://hooks.example.test/plinth" });

    const serialized = JSON.stringify(log);
    for (const secret of [
      key.token,
      key.token.slice("pak_".length),
      sha256Hex(key.token),
      inviteToken,
      sha256Hex(inviteToken),
      invitationToken(firstMail),
      resentToken,
      sha256Hex(resentToken),
      webhookSecret,
      webhookSecret.slice("whsec_".length),
    ]) {
      expect(serialized).not.toContain(secret);
    }
  });
});

describe("ordering, limit and offset", () => {
  let owner: TestUser;
  let slug: string;
  /** Target ids, newest first: 55 key creations, then org.created. */
  let expectedTargets: string[];

  beforeAll(async () => {
    let orgId: string;
    ({ owner, slug, orgId } = await ownerWithOrg(app, "Busy Org"));
    const keyIds: string[] = [];
    for (let i = 0; i < 55; i++) {
      app.clock.advance(1000);
      keyIds.push((await createApiKey(app, owner, slug, "read-only")).id);
    }
    expectedTargets = [...keyIds.reverse(), orgId];
  });

  const session = () => ({ cookie: owner.cookie });

  it("returns the newest 50 by default", async () => {
    const page = await events(session(), slug);
    expect(page).toHaveLength(50);
    expect(page.map((e) => e.target.id)).toEqual(expectedTargets.slice(0, 50));
    expect(page.every((e) => e.action === "api_key.created")).toBe(true);
  });

  it("honours limit up to 500", async () => {
    const all = await events(session(), slug, { limit: "500" });
    expect(all.map((e) => e.target.id)).toEqual(expectedTargets);
    expect(all.at(-1)?.action).toBe("org.created");
    expect((await events(session(), slug, { limit: "1" })).map((e) => e.target.id)).toEqual(
      expectedTargets.slice(0, 1),
    );
    expect((await events(session(), slug, { limit: "56" })).map((e) => e.target.id)).toEqual(expectedTargets);
  });

  it("pages with offset without overlap or gaps", async () => {
    const pages: AuditEvent[][] = [];
    for (const offset of ["0", "20", "40"]) pages.push(await events(session(), slug, { limit: "20", offset }));
    expect(pages.map((p) => p.length)).toEqual([20, 20, 16]);
    const ids = pages.flat().map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(pages.flat().map((e) => e.target.id)).toEqual(expectedTargets);
    expect((await events(session(), slug, { offset: "50" })).map((e) => e.target.id)).toEqual(
      expectedTargets.slice(50),
    );
    expect(await events(session(), slug, { offset: "56" })).toEqual([]);
  });

  it.each(["0", "501", "abc", "-1", "1.5", "10abc"])("refuses limit=%s (422 naming limit)", async (limit) => {
    expectValidation(await auditCall(session(), slug, { limit }), "limit");
  });

  it.each(["-1", "abc", "2.5"])("refuses offset=%s (422 naming offset)", async (offset) => {
    expectValidation(await auditCall(session(), slug, { offset }), "offset");
  });
});

describe("action filter", () => {
  let owner: TestUser;
  let slug: string;
  let keyId: string;

  beforeAll(async () => {
    ({ owner, slug } = await ownerWithOrg(app, "Filtered Org"));
    app.clock.advance(1000);
    keyId = (await createApiKey(app, owner, slug, "deploy")).id;
    app.clock.advance(1000);
    expect((await call(app, "DELETE", `/org/${slug}/api-keys/${keyId}`, { cookie: owner.cookie })).status).toBe(204);
    app.clock.advance(1000);
    const invite = await call(app, "POST", `/org/${slug}/invitations`, {
      cookie: owner.cookie,
      body: { email: "filtered@example.test", role: "viewer" },
    });
    expect(invite.status).toBe(201);
    app.clock.advance(1000);
    expect(
      (await call(app, "PATCH", `/org/${slug}`, { cookie: owner.cookie, body: { name: "Filtered Too" } })).status,
    ).toBe(200);
  });

  const actions = async (action: string, extra: Record<string, string> = {}) =>
    (await events({ cookie: owner.cookie }, slug, { action, ...extra })).map((e) => e.action);

  it("matches an action exactly", async () => {
    const created = await events({ cookie: owner.cookie }, slug, { action: "api_key.created" });
    expect(created.map((e) => [e.action, e.target.id])).toEqual([["api_key.created", keyId]]);
    expect(await actions("org.updated")).toEqual(["org.updated"]);
    expect(await actions("member.invited")).toEqual(["member.invited"]);
  });

  it("matches every action for `*`", async () => {
    expect(await actions("*")).toEqual((await events({ cookie: owner.cookie }, slug)).map((e) => e.action));
    expect(await actions("*")).toHaveLength(5);
  });

  it("matches a `prefix.*` pattern", async () => {
    expect(await actions("api_key.*")).toEqual(["api_key.revoked", "api_key.created"]);
    expect(await actions("member.*")).toEqual(["member.invited"]);
    expect(await actions("org.*")).toEqual(["org.updated", "org.created"]);
    expect(await actions("api_key.*", { limit: "1" })).toEqual(["api_key.revoked"]);
    expect(await actions("api_key.*", { offset: "1" })).toEqual(["api_key.created"]);
  });

  it("matches nothing for a partial name or an unknown action", async () => {
    for (const action of [
      "api_key",
      "api_key.creat",
      "api_key.created.",
      "project.*",
      "API_KEY.CREATED",
      "%",
      "%.*",
      "_pi_key.*",
    ]) {
      expect({ action, found: await actions(action) }).toEqual({ action, found: [] });
    }
  });
});

describe("time range", () => {
  let owner: TestUser;
  let slug: string;
  /** createdAt of org.created, then keys A, B and C, an hour apart. */
  let times: number[];
  let keys: string[];

  beforeAll(async () => {
    ({ owner, slug } = await ownerWithOrg(app, "Timed Org"));
    keys = [];
    for (let i = 0; i < 3; i++) {
      app.clock.advance(HOUR_MS);
      keys.push((await createApiKey(app, owner, slug, "read-only")).id);
    }
    const log = await events({ cookie: owner.cookie }, slug);
    expect(log.map((e) => e.action)).toEqual(["api_key.created", "api_key.created", "api_key.created", "org.created"]);
    times = log.map((e) => Date.parse(e.createdAt)).reverse();
  });

  const midpoint = (i: number) => Math.floor(((times[i] as number) + (times[i + 1] as number)) / 2);
  const targets = async (query: Record<string, string>) =>
    (await events({ cookie: owner.cookie }, slug, query)).map((e) =>
      e.action === "org.created" ? "org" : e.target.id,
    );

  it("bounds createdAt with ISO-8601 from and to", async () => {
    expect(await targets({ from: new Date(midpoint(1)).toISOString() })).toEqual([keys[2], keys[1]]);
    expect(await targets({ to: new Date(midpoint(1)).toISOString() })).toEqual([keys[0], "org"]);
    expect(
      await targets({ from: new Date(midpoint(0)).toISOString(), to: new Date(midpoint(2)).toISOString() }),
    ).toEqual([keys[1], keys[0]]);
  });

  it("reads ISO-8601 offsets other than Z", async () => {
    expect(await targets({ from: isoWithOffset(midpoint(1), 120) })).toEqual([keys[2], keys[1]]);
    expect(await targets({ to: isoWithOffset(midpoint(1), -330) })).toEqual([keys[0], "org"]);
  });

  it("bounds createdAt with Unix milliseconds", async () => {
    expect(await targets({ from: String(midpoint(1)) })).toEqual([keys[2], keys[1]]);
    expect(await targets({ to: String(midpoint(1)) })).toEqual([keys[0], "org"]);
    expect(await targets({ from: String(midpoint(0)), to: String(midpoint(2)) })).toEqual([keys[1], keys[0]]);
    expect(await targets({ from: String(midpoint(0)), to: new Date(midpoint(2)).toISOString() })).toEqual([
      keys[1],
      keys[0],
    ]);
  });

  it("combines a range with the action filter", async () => {
    expect(await targets({ from: String(midpoint(0)), action: "api_key.created", limit: "2" })).toEqual([
      keys[2],
      keys[1],
    ]);
    expect(await targets({ to: String(midpoint(0)), action: "api_key.*" })).toEqual([]);
  });

  it("covers everything from long ago and nothing up to long ago", async () => {
    expect(await targets({ from: "2000-01-01T00:00:00Z" })).toEqual([keys[2], keys[1], keys[0], "org"]);
    expect(await targets({ from: "946684800000" })).toEqual([keys[2], keys[1], keys[0], "org"]);
    expect(await targets({ to: "2000-01-01T00:00:00Z" })).toEqual([]);
  });

  it.each([
    ["from", "yesterday"],
    ["from", "2024-13-45T00:00:00Z"],
    ["to", "not-a-date"],
    ["to", "12abc"],
    // Neither ISO-8601 nor Unix milliseconds, though JavaScript's Date parser guesses a date for
    // each (2001-01-05, 2020-03-07, and 2024-03-01 for the impossible 30 February).
    ["from", "1.5"],
    ["to", "March 7 2020"],
    ["from", "2024-02-30T00:00:00Z"],
  ])("refuses %s=%s (422 naming the field)", async (field, value) => {
    expectValidation(await auditCall({ cookie: owner.cookie }, slug, { [field]: value }), field);
  });

  it("never misreads instants after the year 9999 (a correct answer or 422, not a wrong one)", async () => {
    const all = [keys[2], keys[1], keys[0], "org"];
    const cases: [string, string, (string | undefined)[]][] = [
      // 10000-01-01T00:00:00Z and the last instant a Date can hold.
      ["to", "253402300800000", all],
      ["to", "8640000000000000", all],
      ["from", "253402300800000", []],
      ["from", "8640000000000000", []],
    ];
    const outcomes = [];
    for (const [field, value, expected] of cases) {
      const res = await auditCall({ cookie: owner.cookie }, slug, { [field]: value });
      const refusedNamingField =
        res.status === 422 && res.body.error.details.some((issue: { path: string }) => issue.path === field);
      const found =
        res.status === 200
          ? (res.body.events as AuditEvent[]).map((e) => (e.action === "org.created" ? "org" : e.target.id))
          : res.status;
      outcomes.push({
        query: `${field}=${value}`,
        ok: refusedNamingField || JSON.stringify(found) === JSON.stringify(expected),
        found,
      });
    }
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
  });
});

describe("who may read the audit log", () => {
  let owner: TestUser;
  let slug: string;
  const users = {} as Record<"admin" | "developer" | "viewer", TestUser>;
  let other: { owner: TestUser; slug: string; orgId: string };
  let otherKey: { token: string; id: string };

  beforeAll(async () => {
    ({ owner, slug } = await ownerWithOrg(app, "Guarded Org"));
    for (const role of ["admin", "developer", "viewer"] as const) {
      users[role] = (await addMember(app, mailbox, owner, slug, role)).user;
    }
    other = await ownerWithOrg(app, "Neighbour Org");
    app.clock.advance(1000);
    otherKey = await createApiKey(app, other.owner, other.slug, "full");
  });

  it("lets the owner and admins read it", async () => {
    for (const user of [owner, users.admin]) {
      const log = await events({ cookie: user.cookie }, slug, { limit: "500" });
      expect(log.map((e) => e.action)).toContain("org.created");
      expect(log.filter((e) => e.action === "member.invited")).toHaveLength(3);
    }
  });

  it.each(["developer", "viewer"] as const)("refuses a %s (403)", async (role) => {
    expectError(await auditCall({ cookie: users[role].cookie }, slug), 403, "FORBIDDEN");
  });

  it.each(["read-only", "deploy", "full"] as const)("lets a %s key read it", async (scope) => {
    app.clock.advance(1000);
    const key = await createApiKey(app, owner, slug, scope);
    const log = await events({ token: key.token }, slug);
    expect(log[0]).toMatchObject({ action: "api_key.created", target: { type: "api_key", id: key.id } });
  });

  it("answers 401 without credentials", async () => {
    expectError(await auditCall(undefined, slug), 401, "UNAUTHORIZED");
  });

  it("answers 404 for another org's members and keys", async () => {
    expectError(await auditCall({ cookie: other.owner.cookie }, slug), 404, "NOT_FOUND");
    expectError(await auditCall({ token: otherKey.token }, slug), 404, "NOT_FOUND");
    expectError(await auditCall({ cookie: owner.cookie }, other.slug), 404, "NOT_FOUND");
  });

  it("keeps each org's rows to itself", async () => {
    const mine = JSON.stringify(await events({ cookie: owner.cookie }, slug, { limit: "500" }));
    expect(mine).not.toContain(other.orgId);
    expect(mine).not.toContain(otherKey.id);
    const theirs = await events({ cookie: other.owner.cookie }, other.slug, { limit: "500" });
    expect(theirs.map((e) => e.action)).toEqual(["api_key.created", "org.created"]);
  });
});
