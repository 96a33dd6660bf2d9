import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addMember,
  type CallOptions,
  type CallResult,
  call,
  createApiKey,
  expectError,
  expectValidation,
  type Mailbox,
  startApp,
  startMailbox,
  type TestApp,
} from "./harness.ts";
import {
  BASE_ENV,
  closeScriptedReceivers,
  createHook,
  deliveries,
  freshOrg,
  getHook,
  listHooks,
  type Org,
  type ScriptedReceiver,
  startScriptedReceiver,
} from "./org-webhooks.ts";

// Org webhooks: CRUD, validation, permissions, isolation, and the SSRF guard when a URL is saved.
// What is sent (deliveries, retries, the breaker, test sends) is in webhook-deliveries.test.ts.

// Network rule: deliveries only ever go to receivers on 127.0.0.1. Private and metadata addresses
// other than loopback appear only in URLs that the API must refuse before anything connects.

const ORG_EVENT_KINDS = [
  "project.provisioned",
  "project.failed",
  "project.paused",
  "project.resumed",
  "alarm.fired",
  "member.invited",
  "billing.plan_change",
];

/** The fields of a Webhook as the API returns it; never its secret. */
const WEBHOOK_KEYS = [
  "active",
  "consecutiveFailures",
  "createdAt",
  "disabledReason",
  "events",
  "id",
  "lastFailureAt",
  "updatedAt",
  "url",
];

let app: TestApp;
let mailbox: Mailbox;

beforeAll(async () => {
  mailbox = await startMailbox();
  app = await startApp({ ...BASE_ENV, SMTP_URL: mailbox.url });
});

afterAll(async () => {
  await app?.close();
  await mailbox?.close();
  await closeScriptedReceivers();
});

function expectWebhook(webhook: any): void {
  expect(Object.keys(webhook).sort()).toEqual(WEBHOOK_KEYS);
  expect(webhook.id).toEqual(expect.any(String));
  expect(Array.isArray(webhook.events)).toBe(true);
  expect(typeof webhook.active).toBe("boolean");
  expect(Number.isInteger(webhook.consecutiveFailures)).toBe(true);
}

// ---------------------------------------------------------------------------------------------
// CRUD, validation, permissions, isolation
// ---------------------------------------------------------------------------------------------

describe("webhook CRUD", () => {
  let org: Org;
  let receiver: ScriptedReceiver;

  beforeAll(async () => {
    org = await freshOrg(app);
    receiver = await startScriptedReceiver();
  });

  it("creates a webhook and shows its whsec_ secret only in the create response", async () => {
    const res = await call(app, "POST", `/org/${org.slug}/webhooks`, {
      cookie: org.owner.cookie,
      body: { url: receiver.url, events: ["project.paused", "member.invited"] },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(["secret", "webhook"]);
    const { webhook, secret } = res.body;
    // Standard Webhooks' form: 32 random bytes in standard base64 (DESIGN §14).
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expectWebhook(webhook);
    expect(webhook).toMatchObject({
      url: receiver.url,
      events: ["project.paused", "member.invited"],
      active: true,
      consecutiveFailures: 0,
      lastFailureAt: null,
      disabledReason: null,
    });

    const list = await call(app, "GET", `/org/${org.slug}/webhooks`, { cookie: org.owner.cookie });
    expect(list.status).toBe(200);
    expect(Object.keys(list.body)).toEqual(["webhooks"]);
    const listed = list.body.webhooks.find((w: any) => w.id === webhook.id);
    expectWebhook(listed);
    expect(listed).toEqual(webhook);
    expect(JSON.stringify(list.body)).not.toContain(secret);

    const patched = await call(app, "PATCH", `/org/${org.slug}/webhooks/${webhook.id}`, {
      cookie: org.owner.cookie,
      body: { events: ["*"] },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(Object.keys(patched.body)).toEqual(["webhook"]);
    expect(JSON.stringify(patched.body)).not.toContain(secret);
    expect(JSON.stringify(patched.body)).not.toContain("whsec_");
  });

  it("gives each webhook its own secret", async () => {
    const a = await createHook(app, org, receiver.url, ["*"]);
    const b = await createHook(app, org, receiver.url, ["*"]);
    expect(a.secret).not.toBe(b.secret);
    expect(a.webhook.id).not.toBe(b.webhook.id);
  });

  it.each([
    [["*"]],
    [["project.paused"]],
    [["project.*"]],
    [["member.*", "billing.plan_change"]],
    [ORG_EVENT_KINDS],
    // The test send's kind, and kinds the service may add later (they match once it emits them).
    [["webhook.test"]],
    [["order.created", "usage.*"]],
  ])("accepts events %j", async (events) => {
    const { webhook } = await createHook(app, org, receiver.url, events);
    expect(webhook.events).toEqual(events);
  });

  it.each([
    ["a pattern with a space", ["project paused"]],
    ["an empty pattern", [""]],
    ["an empty list", []],
    ["an empty segment", ["project..paused"]],
    ["a wildcard inside", ["project.*.paused"]],
    ["capitals (kinds are lowercase)", ["Project.Paused"]],
    ["a valid kind next to an invalid one", ["project.paused", "project/paused"]],
    ["a string instead of a list", "*"],
  ])("refuses %s in events with 422 naming events", async (_label, events) => {
    const res = await call(app, "POST", `/org/${org.slug}/webhooks`, {
      cookie: org.owner.cookie,
      body: { url: receiver.url, events },
    });
    expectValidation(res, "events", { orInside: true });
  });

  it("names `events` itself for an empty list", async () => {
    const res = await call(app, "POST", `/org/${org.slug}/webhooks`, {
      cookie: org.owner.cookie,
      body: { url: receiver.url, events: [] },
    });
    expectValidation(res, "events");
    expect(res.body.error.details.map((d: any) => d.path)).toContain("events");
  });

  it("refuses a missing events field", async () => {
    const res = await call(app, "POST", `/org/${org.slug}/webhooks`, {
      cookie: org.owner.cookie,
      body: { url: receiver.url },
    });
    expectValidation(res, "events");
  });

  it.each([
    ["not a url"],
    ["ftp://127.0.0.1/hook"],
    ["ftp://example.com/hook"],
    ["file:///etc/passwd"],
    ["javascript:alert(1)"],
    [""],
  ])("refuses url %j with 422 naming url", async (url) => {
    const res = await call(app, "POST", `/org/${org.slug}/webhooks`, {
      cookie: org.owner.cookie,
      body: { url, events: ["*"] },
    });
    expectValidation(res, "url");
  });

  it("refuses a missing url", async () => {
    const res = await call(app, "POST", `/org/${org.slug}/webhooks`, {
      cookie: org.owner.cookie,
      body: { events: ["*"] },
    });
    expectValidation(res, "url");
  });

  it("refuses a malformed body with an error envelope", async () => {
    const res = await call(app, "POST", `/org/${org.slug}/webhooks`, {
      cookie: org.owner.cookie,
      rawBody: "{not json",
      headers: { "content-type": "application/json" },
    });
    expectError(res, 400);
  });

  it("updates url, events and active, and validates each", async () => {
    const { webhook } = await createHook(app, org, receiver.url, ["project.paused"]);
    const other = await startScriptedReceiver();

    const url = await call(app, "PATCH", `/org/${org.slug}/webhooks/${webhook.id}`, {
      cookie: org.owner.cookie,
      body: { url: other.url },
    });
    expect(url.status, JSON.stringify(url.body)).toBe(200);
    expectWebhook(url.body.webhook);
    expect(url.body.webhook).toMatchObject({ id: webhook.id, url: other.url, events: ["project.paused"] });

    const events = await call(app, "PATCH", `/org/${org.slug}/webhooks/${webhook.id}`, {
      cookie: org.owner.cookie,
      body: { events: ["project.*", "member.invited"] },
    });
    expect(events.status, JSON.stringify(events.body)).toBe(200);
    expect(events.body.webhook).toMatchObject({ url: other.url, events: ["project.*", "member.invited"] });

    const off = await call(app, "PATCH", `/org/${org.slug}/webhooks/${webhook.id}`, {
      cookie: org.owner.cookie,
      body: { active: false },
    });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    expect(off.body.webhook.active).toBe(false);
    expect((await getHook(app, org, webhook.id)).active).toBe(false);

    const on = await call(app, "PATCH", `/org/${org.slug}/webhooks/${webhook.id}`, {
      cookie: org.owner.cookie,
      body: { active: true },
    });
    expect(on.status, JSON.stringify(on.body)).toBe(200);
    expect(on.body.webhook).toMatchObject({ active: true, consecutiveFailures: 0, disabledReason: null });

    for (const [body, field] of [
      [{ url: "ftp://127.0.0.1/hook" }, "url"],
      [{ url: "not a url" }, "url"],
      [{ events: [] }, "events"],
      [{ events: ["not a kind"] }, "events"],
      [{ events: [""] }, "events"],
      [{ active: "yes" }, "active"],
    ] as const) {
      const res = await call(app, "PATCH", `/org/${org.slug}/webhooks/${webhook.id}`, {
        cookie: org.owner.cookie,
        body,
      });
      expectValidation(res, field, { orInside: true });
    }
    // Nothing a refused PATCH carried was applied.
    expect(await getHook(app, org, webhook.id)).toMatchObject({
      url: other.url,
      events: ["project.*", "member.invited"],
      active: true,
    });
  });

  it("deletes a webhook: 204, then 404 everywhere and gone from the list", async () => {
    const { webhook } = await createHook(app, org, receiver.url, ["*"]);
    const path = `/org/${org.slug}/webhooks/${webhook.id}`;
    const removed = await call(app, "DELETE", path, { cookie: org.owner.cookie });
    expect(removed.status).toBe(204);
    expect(removed.body).toBe("");

    expectError(await call(app, "DELETE", path, { cookie: org.owner.cookie }), 404);
    expectError(await call(app, "PATCH", path, { cookie: org.owner.cookie, body: { active: false } }), 404);
    expectError(await call(app, "GET", `${path}/deliveries`, { cookie: org.owner.cookie }), 404);
    expectError(await call(app, "POST", `/webhooks/${webhook.id}/test`, { cookie: org.owner.cookie }), 404);
    expect((await listHooks(app, org)).map((w) => w.id)).not.toContain(webhook.id);
  });

  it("answers 404 for an unknown webhook id", async () => {
    const path = `/org/${org.slug}/webhooks/whk_doesnotexist`;
    expectError(await call(app, "PATCH", path, { cookie: org.owner.cookie, body: { active: false } }), 404);
    expectError(await call(app, "DELETE", path, { cookie: org.owner.cookie }), 404);
    expectError(await call(app, "GET", `${path}/deliveries`, { cookie: org.owner.cookie }), 404);
    expectError(await call(app, "POST", "/webhooks/whk_doesnotexist/test", { cookie: org.owner.cookie }), 404);
  });

  it("requires authentication", async () => {
    const { webhook } = await createHook(app, org, receiver.url, ["*"]);
    expectError(await call(app, "GET", `/org/${org.slug}/webhooks`), 401, "UNAUTHORIZED");
    expectError(
      await call(app, "POST", `/org/${org.slug}/webhooks`, { body: { url: receiver.url, events: ["*"] } }),
      401,
      "UNAUTHORIZED",
    );
    expectError(
      await call(app, "PATCH", `/org/${org.slug}/webhooks/${webhook.id}`, { body: { active: false } }),
      401,
      "UNAUTHORIZED",
    );
    expectError(await call(app, "DELETE", `/org/${org.slug}/webhooks/${webhook.id}`), 401, "UNAUTHORIZED");
    expectError(await call(app, "POST", `/webhooks/${webhook.id}/test`), 401, "UNAUTHORIZED");
    expectError(await call(app, "GET", `/org/${org.slug}/webhooks/${webhook.id}/deliveries`), 401, "UNAUTHORIZED");
    expect((await getHook(app, org, webhook.id)).active).toBe(true);
  });
});

describe("concurrent changes to one webhook", () => {
  async function auditActions(targetId: string): Promise<string[]> {
    const rows = await app.server.deps.db
      .selectFrom("audit_events")
      .select("action")
      .where("target_id", "=", targetId)
      .orderBy("created_at")
      .orderBy("id")
      .execute();
    return rows.map((row) => row.action);
  }

  it("20 deletes at once: one 204, the rest 404, one audit row; a PATCH after it is 404", async () => {
    const org = await freshOrg(app);
    const { webhook } = await createHook(app, org, "http://127.0.0.1:9/hook", ["member.invited"]);
    const deletes = await Promise.all(
      Array.from({ length: 20 }, () =>
        call(app, "DELETE", `/org/${org.slug}/webhooks/${webhook.id}`, { cookie: org.owner.cookie }),
      ),
    );
    expect(deletes.map((res) => res.status).sort()).toEqual([204, ...Array(19).fill(404)]);
    const patch = await call(app, "PATCH", `/org/${org.slug}/webhooks/${webhook.id}`, {
      cookie: org.owner.cookie,
      body: { events: ["project.paused"] },
    });
    expectError(patch, 404, "NOT_FOUND");
    expect(await auditActions(webhook.id)).toEqual(["webhook.created", "webhook.deleted"]);
  });

  it("PATCHes racing a delete: none succeeds after it, and none is audited after it", async () => {
    const org = await freshOrg(app);
    const { webhook } = await createHook(app, org, "http://127.0.0.1:9/hook", ["member.invited"]);
    const path = `/org/${org.slug}/webhooks/${webhook.id}`;
    const results = await Promise.all([
      ...Array.from({ length: 10 }, () =>
        call(app, "PATCH", path, { cookie: org.owner.cookie, body: { events: ["project.paused"] } }),
      ),
      call(app, "DELETE", path, { cookie: org.owner.cookie }),
      ...Array.from({ length: 10 }, () =>
        call(app, "PATCH", path, { cookie: org.owner.cookie, body: { events: ["project.resumed"] } }),
      ),
    ]);
    for (const res of results) expect([200, 204, 404]).toContain(res.status);
    const actions = await auditActions(webhook.id);
    expect(actions.at(-1)).toBe("webhook.deleted");
    expect(actions.filter((action) => action === "webhook.updated")).toHaveLength(
      results.filter((res) => res.status === 200).length,
    );
  });

  it("20 resumes at once: one webhook.resumed, the rest plain updates", async () => {
    const org = await freshOrg(app);
    const { webhook } = await createHook(app, org, "http://127.0.0.1:9/hook", ["member.invited"]);
    const path = `/org/${org.slug}/webhooks/${webhook.id}`;
    expect((await call(app, "PATCH", path, { cookie: org.owner.cookie, body: { active: false } })).status).toBe(200);
    const resumes = await Promise.all(
      Array.from({ length: 20 }, () => call(app, "PATCH", path, { cookie: org.owner.cookie, body: { active: true } })),
    );
    expect(resumes.map((res) => res.status)).toEqual(Array(20).fill(200));
    const actions = await auditActions(webhook.id);
    expect(actions.filter((action) => action === "webhook.resumed")).toHaveLength(1);
    expect(actions.filter((action) => action === "webhook.updated")).toHaveLength(20);
  });
});

describe("webhook permissions", () => {
  let org: Org;
  let receiver: ScriptedReceiver;
  const callers: Record<string, CallOptions> = {};
  const MANAGERS = ["owner", "admin", "full key"];
  const OTHERS = ["developer", "viewer", "deploy key", "read-only key"];

  beforeAll(async () => {
    org = await freshOrg(app);
    receiver = await startScriptedReceiver();
    callers.owner = { cookie: org.owner.cookie };
    for (const role of ["admin", "developer", "viewer"] as const) {
      const { user } = await addMember(app, mailbox, org.owner, org.slug, role);
      callers[role] = { cookie: user.cookie };
    }
    for (const scope of ["full", "deploy", "read-only"] as const) {
      callers[`${scope} key`] = { token: (await createApiKey(app, org.owner, org.slug, scope)).token };
    }
  });

  it.each(MANAGERS)("%s manages webhooks: create, patch, test, delete", async (who) => {
    const created = await call(app, "POST", `/org/${org.slug}/webhooks`, {
      ...callers[who],
      body: { url: receiver.url, events: ["*"] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.secret).toMatch(/^whsec_/);
    const id = created.body.webhook.id;

    const patched = await call(app, "PATCH", `/org/${org.slug}/webhooks/${id}`, {
      ...callers[who],
      body: { events: ["project.paused"] },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.webhook.events).toEqual(["project.paused"]);

    const before = receiver.requests.length;
    const tested = await call(app, "POST", `/webhooks/${id}/test`, callers[who]);
    expect(tested.status, JSON.stringify(tested.body)).toBe(200);
    expect(tested.body.delivery.status).toBe("succeeded");
    expect(receiver.requests.length).toBe(before + 1);

    const removed = await call(app, "DELETE", `/org/${org.slug}/webhooks/${id}`, callers[who]);
    expect(removed.status).toBe(204);
  });

  it.each(OTHERS)("%s gets 403 on every write and the webhook is unchanged", async (who) => {
    const { webhook } = await createHook(app, org, receiver.url, ["*"]);
    const forbidden = (res: CallResult) => expectError(res, 403, "FORBIDDEN");

    forbidden(
      await call(app, "POST", `/org/${org.slug}/webhooks`, {
        ...callers[who],
        body: { url: receiver.url, events: ["*"] },
      }),
    );
    forbidden(
      await call(app, "PATCH", `/org/${org.slug}/webhooks/${webhook.id}`, {
        ...callers[who],
        body: { active: false, events: ["project.paused"] },
      }),
    );
    const before = receiver.requests.length;
    forbidden(await call(app, "POST", `/webhooks/${webhook.id}/test`, callers[who]));
    expect(receiver.requests.length).toBe(before);
    forbidden(await call(app, "DELETE", `/org/${org.slug}/webhooks/${webhook.id}`, callers[who]));

    expect(await getHook(app, org, webhook.id)).toMatchObject({ active: true, events: ["*"] });
    expect(await deliveries(app, org, webhook.id)).toEqual([]);
  });

  it.each([...MANAGERS, ...OTHERS])("%s can read webhooks and their deliveries", async (who) => {
    const { webhook, secret } = await createHook(app, org, receiver.url, ["*"]);
    const list = await call(app, "GET", `/org/${org.slug}/webhooks`, callers[who]);
    expect(list.status, JSON.stringify(list.body)).toBe(200);
    expect(list.body.webhooks.map((w: any) => w.id)).toContain(webhook.id);
    expect(JSON.stringify(list.body)).not.toContain(secret);
    const history = await call(app, "GET", `/org/${org.slug}/webhooks/${webhook.id}/deliveries`, callers[who]);
    expect(history.status, JSON.stringify(history.body)).toBe(200);
    expect(history.body.deliveries).toEqual([]);
  });
});

describe("cross-org isolation", () => {
  let orgA: Org;
  let orgB: Org;
  let hookA: any;
  let hookB: any;
  let keyA: string;
  let keyB: string;
  let receiver: ScriptedReceiver;

  beforeAll(async () => {
    receiver = await startScriptedReceiver();
    orgA = await freshOrg(app);
    orgB = await freshOrg(app);
    hookA = (await createHook(app, orgA, receiver.url, ["*"])).webhook;
    hookB = (await createHook(app, orgB, receiver.url, ["*"])).webhook;
    keyA = (await createApiKey(app, orgA.owner, orgA.slug, "full")).token;
    keyB = (await createApiKey(app, orgB.owner, orgB.slug, "full")).token;
  });

  it("hides another org's webhooks from its members and keys (404)", async () => {
    for (const who of [{ cookie: orgB.owner.cookie }, { token: keyB }] as CallOptions[]) {
      // Through the other org's slug: the org itself is not found.
      expectError(await call(app, "GET", `/org/${orgA.slug}/webhooks`, who), 404);
      expectError(
        await call(app, "POST", `/org/${orgA.slug}/webhooks`, { ...who, body: { url: receiver.url, events: ["*"] } }),
        404,
      );
      expectError(
        await call(app, "PATCH", `/org/${orgA.slug}/webhooks/${hookA.id}`, { ...who, body: { active: false } }),
        404,
      );
      expectError(await call(app, "DELETE", `/org/${orgA.slug}/webhooks/${hookA.id}`, who), 404);
      expectError(await call(app, "GET", `/org/${orgA.slug}/webhooks/${hookA.id}/deliveries`, who), 404);
      // Through the caller's own slug with the other org's webhook id.
      expectError(
        await call(app, "PATCH", `/org/${orgB.slug}/webhooks/${hookA.id}`, { ...who, body: { active: false } }),
        404,
      );
      expectError(await call(app, "DELETE", `/org/${orgB.slug}/webhooks/${hookA.id}`, who), 404);
      expectError(await call(app, "GET", `/org/${orgB.slug}/webhooks/${hookA.id}/deliveries`, who), 404);
      // The org-less test route.
      const before = receiver.requests.length;
      expectError(await call(app, "POST", `/webhooks/${hookA.id}/test`, who), 404);
      expect(receiver.requests.length).toBe(before);
      // Their own org's list never shows it.
      const own = await call(app, "GET", `/org/${orgB.slug}/webhooks`, who);
      expect(own.status).toBe(200);
      expect(own.body.webhooks.map((w: any) => w.id)).toEqual([hookB.id]);
    }
    // Org A's key cannot reach org B either.
    expectError(await call(app, "POST", `/webhooks/${hookB.id}/test`, { token: keyA }), 404);
    expectError(await call(app, "GET", `/org/${orgB.slug}/webhooks`, { token: keyA }), 404);

    expect(await getHook(app, orgA, hookA.id)).toMatchObject({ active: true, events: ["*"] });
    expect(await deliveries(app, orgA, hookA.id)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// SSRF
// ---------------------------------------------------------------------------------------------

describe("SSRF guard (ALLOW_PRIVATE_WEBHOOK_URLS unset)", () => {
  let strict: TestApp;
  let org: Org;

  beforeAll(async () => {
    strict = await startApp({
      AUTH_RATE_LIMIT_PER_MINUTE: "10000",
      RATE_LIMIT_PER_MINUTE: "100000",
      WORKER_POLL_MS: "50",
    });
    org = await freshOrg(strict);
  });
  afterAll(() => strict?.close());

  const PRIVATE_URLS = [
    "http://127.0.0.1:1/x",
    "http://127.1.2.3/x",
    "http://10.0.0.1/x",
    "http://192.168.1.1/x",
    "http://172.16.0.1/x",
    "http://169.254.169.254/latest",
    "http://[::1]/x",
    "http://[::ffff:127.0.0.1]/x",
    "http://[fd00::1]/x",
    "http://0.0.0.0/x",
    "http://localhost:1/x",
  ];

  it.each(PRIVATE_URLS)("refuses to create a webhook for %s (422 naming url)", async (url) => {
    const res = await call(strict, "POST", `/org/${org.slug}/webhooks`, {
      cookie: org.owner.cookie,
      body: { url, events: ["*"] },
    });
    expectValidation(res, "url");
  });

  it("accepts a public address, but refuses to PATCH it to a private one", async () => {
    // An IP literal is checked statically; nothing in this org ever emits an event or a test send.
    const created = await call(strict, "POST", `/org/${org.slug}/webhooks`, {
      cookie: org.owner.cookie,
      body: { url: "http://93.184.216.34/hook", events: ["*"] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.webhook.id;
    for (const url of ["http://127.0.0.1/x", "http://169.254.169.254/latest", "http://[::1]/x"]) {
      const res = await call(strict, "PATCH", `/org/${org.slug}/webhooks/${id}`, {
        cookie: org.owner.cookie,
        body: { url },
      });
      expectValidation(res, "url");
    }
    expect((await getHook(strict, org, id)).url).toBe("http://93.184.216.34/hook");
    expect((await listHooks(strict, org)).map((w) => w.url)).toEqual(["http://93.184.216.34/hook"]);
  });

  it.each(["http://127.0.0.1/x", "http://10.0.0.1/x", "http://169.254.169.254/latest", "http://[::1]/x"])(
    "refuses org webhookUrl %s with 422 naming webhookUrl",
    async (webhookUrl) => {
      const res = await call(strict, "PATCH", `/org/${org.slug}`, {
        cookie: org.owner.cookie,
        body: { webhookUrl },
      });
      expectValidation(res, "webhookUrl");
      const current = await call(strict, "GET", `/org/${org.slug}/overview`, { cookie: org.owner.cookie });
      expect(current.status).toBe(200);
      expect(current.body.org.webhookUrl).toBeNull();
    },
  );
});
