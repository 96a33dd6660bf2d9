import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Deps } from "../src/deps.ts";
import { deliveryJobs } from "../src/domains/webhooks/delivery-jobs.ts";
import type { JobRun } from "../src/jobs/handlers.ts";
import { verifyWebhook } from "../src/verify/webhooks.ts";
import {
  addMember,
  type CallResult,
  call,
  callWorkspace,
  createApiKey,
  createOrg,
  expectError,
  hmacHex,
  type Mailbox,
  type ReceivedRequest,
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

/**
 * Workspace webhooks end to end (SPEC "Workspace webhooks", "Workspace webhook events", the
 * breaker table; DESIGN §7): real app, real HTTP, real node:http receivers. workspace.test.ts
 * covers the basics (one signed delivery, one reserved header, auth/file events arriving); this
 * file covers the endpoints, their permission matrix and scoping, validation, the pattern rules,
 * projection and per-hook signing, retries, the breaker, byte-for-byte retry, retention, and the
 * data each event source carries.
 */

const BASE_ENV = {
  ALLOW_PRIVATE_WEBHOOK_URLS: "true",
  WORKER_POLL_MS: "50",
  WEBHOOK_BACKOFF_BASE_MS: "20",
  WEBHOOK_MAX_ATTEMPTS: "3",
  AUTH_RATE_LIMIT_PER_MINUTE: "10000",
  RATE_LIMIT_PER_MINUTE: "1000000",
};

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DAY_MS = 86_400_000;

// --- receivers -------------------------------------------------------------------------------

/** A promise a test resolves by hand: lets a receiver hold a request open. */
function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

// --- helpers ---------------------------------------------------------------------------------

/** Checks both signatures with an HMAC computed here, independently of Plinth's code. */
function expectSignedWith(request: ReceivedRequest, secret: string): void {
  const timestamp = request.headers["x-service-timestamp"];
  expect(timestamp).toMatch(/^\d{10}$/);
  expect(request.headers["x-service-signature"]).toBe(hmacHex(secret, request.raw));
  expect(request.headers["x-service-signature-v2"]).toBe(hmacHex(secret, `${timestamp}.${request.body}`));
}

interface As {
  token?: string;
  cookie?: string;
}

interface Project {
  id: string;
  slug: string;
  adminToken: string;
}

async function createProject(app: TestApp, owner: TestUser, orgSlug: string, name: string): Promise<Project> {
  const created = await call(app, "POST", `/org/${orgSlug}/projects`, { cookie: owner.cookie, body: { name } });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const { id, slug, adminToken } = created.body.project;
  expect(adminToken).toMatch(/^wsa_/);
  await until(`project ${name} to be active`, async () => {
    const res = await call(app, "GET", `/org/${orgSlug}/projects/${slug}`, { cookie: owner.cookie });
    return res.body.project?.status === "active";
  });
  return { id, slug, adminToken };
}

/** A project's workspace API as its admin token, with the helpers every block below uses. */
function workspaceOf(app: TestApp, project: Project) {
  const admin: As = { token: project.adminToken };
  const api = (method: string, path: string, body?: unknown, as: As = admin) =>
    callWorkspace(app, project.id, method, path, { ...as, body });
  return {
    project,
    api,
    async collection(slug: string) {
      const res = await api("POST", "/collections", { slug });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    },
    async hook(input: Record<string, unknown>): Promise<any> {
      const res = await api("POST", "/webhooks", input);
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.webhook;
    },
    async getHook(id: string): Promise<any> {
      const res = await api("GET", `/webhooks/${id}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.webhook;
    },
    async deliveries(id: string, query = ""): Promise<any[]> {
      const res = await api("GET", `/webhooks/${id}/deliveries${query}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.deliveries;
    },
    async item(collection: string, data: Record<string, unknown>): Promise<any> {
      const res = await api("POST", `/items/${collection}`, data);
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.item;
    },
  };
}

type Workspace = ReturnType<typeof workspaceOf>;

function errorPaths(res: CallResult): string[] {
  expectError(res, 422, "VALIDATION");
  return res.body.error.details.map((d: { path: string }) => d.path);
}

const eventName = (body: { channel: string; event: string }) => `${body.channel}:${body.event}`;

// =============================================================================================
// One app for the endpoints, permissions, validation, patterns, projection, retries and retry.
// =============================================================================================

describe("workspace webhooks", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let owner: TestUser;
  let slug: string;
  let alpha: Workspace;
  let beta: Workspace;
  /** Answers 500 on paths under /fail, 200 elsewhere. */
  let receiver: Receiver;

  beforeAll(async () => {
    mailbox = await startMailbox();
    app = await startApp({ ...BASE_ENV, SMTP_URL: mailbox.url });
    receiver = await startReceiver((request) => ({ status: request.path.startsWith("/fail") ? 500 : 200 }));
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Hooks Org")).slug;
    alpha = workspaceOf(app, await createProject(app, owner, slug, "Alpha"));
    beta = workspaceOf(app, await createProject(app, owner, slug, "Beta"));
  });
  afterAll(async () => {
    await receiver?.close();
    await app?.close();
    await mailbox?.close();
  });

  describe("endpoints", () => {
    it("creates, reads, lists, updates and deletes a hook; DELETE is 204, then 404 everywhere", async () => {
      const created = await alpha.api("POST", "/webhooks", {
        name: "crud",
        url: `${receiver.url}/crud`,
        events: ["items:posts"],
        secret: "crud-secret-value",
        headers: { "X-Tenant": "acme-corp" },
        payloadFields: ["title"],
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const hook = created.body.webhook;
      expect(hook).toMatchObject({
        id: expect.any(String),
        name: "crud",
        url: `${receiver.url}/crud`,
        events: ["items:posts"],
        // Header values are masked as read (workspace-webhook-headers.test.ts).
        headers: { "X-Tenant": "••••corp" },
        payloadFields: ["title"],
        active: true,
        consecutiveFailures: 0,
        lastFailureAt: null,
        disabledReason: null,
      });
      // The secret is write-only.
      expect(JSON.stringify(created.body)).not.toContain("crud-secret-value");

      expect(await alpha.getHook(hook.id)).toEqual(hook);
      const listed = await alpha.api("GET", "/webhooks");
      expect(listed.status).toBe(200);
      const row = listed.body.webhooks.find((w: { id: string }) => w.id === hook.id);
      expect(row).toEqual(hook);
      expect(row).toHaveProperty("consecutiveFailures", 0);
      expect(row).toHaveProperty("lastFailureAt", null);
      expect(row).toHaveProperty("disabledReason", null);
      expect(JSON.stringify(listed.body)).not.toContain("crud-secret-value");

      const patched = await alpha.api("PATCH", `/webhooks/${hook.id}`, {
        name: "crud renamed",
        events: ["items:posts:created", "auth"],
        headers: { "X-Tenant": "globex" },
        payloadFields: null,
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      expect(patched.body.webhook).toMatchObject({
        id: hook.id,
        name: "crud renamed",
        url: `${receiver.url}/crud`,
        events: ["items:posts:created", "auth"],
        headers: { "X-Tenant": "••••obex" },
        payloadFields: null,
        active: true,
      });
      expect(await alpha.getHook(hook.id)).toEqual(patched.body.webhook);

      // Switching a hook off by hand is not the breaker: no reason is recorded.
      const off = await alpha.api("PATCH", `/webhooks/${hook.id}`, { active: false });
      expect(off.status).toBe(200);
      expect(off.body.webhook).toMatchObject({ active: false, disabledReason: null, consecutiveFailures: 0 });
      const on = await alpha.api("PATCH", `/webhooks/${hook.id}`, { active: true });
      expect(on.body.webhook).toMatchObject({ active: true, disabledReason: null, consecutiveFailures: 0 });

      const deleted = await fetch(`${app.url}/w/${alpha.project.id}/api/webhooks/${hook.id}`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${alpha.project.adminToken}` },
      });
      expect(deleted.status).toBe(204);
      expect(await deleted.text()).toBe("");

      for (const [method, path, body] of [
        ["GET", `/webhooks/${hook.id}`, undefined],
        ["PATCH", `/webhooks/${hook.id}`, { name: "ghost" }],
        ["DELETE", `/webhooks/${hook.id}`, undefined],
        ["POST", `/webhooks/${hook.id}/test`, undefined],
        ["GET", `/webhooks/${hook.id}/deliveries`, undefined],
      ] as const) {
        const res = await alpha.api(method, path, body);
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body.error.code).toBe("NOT_FOUND");
      }
      const after = await alpha.api("GET", "/webhooks");
      expect(after.body.webhooks.map((w: { id: string }) => w.id)).not.toContain(hook.id);
      expect((await alpha.api("PATCH", "/webhooks/whk_unknown", { name: "x" })).status).toBe(404);
    });

    it("concurrent deletes and resumes of one hook: one 204, one resume, each audited once", async () => {
      const actions = async (id: string) => {
        const audit = await call(app, "GET", `/org/${slug}/audit?limit=500`, { cookie: owner.cookie });
        return audit.body.events
          .filter((e: { target: { id: string } }) => e.target?.id === id)
          .map((e: { action: string }) => e.action);
      };
      const resumed = await alpha.hook({ name: "resumed", url: `${receiver.url}/race`, events: ["items:none"] });
      expect((await alpha.api("PATCH", `/webhooks/${resumed.id}`, { active: false })).status).toBe(200);
      const resumes = await Promise.all(
        Array.from({ length: 20 }, () => alpha.api("PATCH", `/webhooks/${resumed.id}`, { active: true })),
      );
      expect(resumes.map((res) => res.status)).toEqual(Array(20).fill(200));
      expect((await actions(resumed.id)).filter((a: string) => a === "workspace_webhook.resumed")).toHaveLength(1);

      const deleted = await alpha.hook({ name: "deleted", url: `${receiver.url}/race`, events: ["items:none"] });
      const deletes = await Promise.all(
        Array.from({ length: 20 }, () => alpha.api("DELETE", `/webhooks/${deleted.id}`)),
      );
      expect(deletes.map((res) => res.status).sort()).toEqual([204, ...Array(19).fill(404)]);
      expect((await alpha.api("PATCH", `/webhooks/${deleted.id}`, { name: "late" })).status).toBe(404);
      expect((await actions(deleted.id)).filter((a: string) => a === "workspace_webhook.deleted")).toHaveLength(1);
    });

    it("writes an audit row for each change of a hook, never with its secret", async () => {
      const hook = await alpha.hook({
        name: "audited",
        url: `${receiver.url}/audited`,
        events: ["items"],
        secret: "audit-secret-never-logged",
      });
      expect((await alpha.api("PATCH", `/webhooks/${hook.id}`, { name: "audited 2" })).status).toBe(200);
      const tested = await alpha.api("POST", `/webhooks/${hook.id}/test`);
      expect(tested.status).toBe(200);
      const retried = await alpha.api("POST", `/webhooks/_deliveries/${tested.body.delivery.id}/retry`);
      expect(retried.status).toBe(200);
      expect((await alpha.api("DELETE", `/webhooks/${hook.id}`)).status).toBe(204);
      const audit = await call(app, "GET", `/org/${slug}/audit?limit=500`, { cookie: owner.cookie });
      expect(audit.status).toBe(200);
      const rows = audit.body.events.filter((e: { target: { id: string } }) => e.target?.id === hook.id);
      // DESIGN §4: every mutation writes an audit row (create, update, test send, retry, delete).
      expect(rows.map((e: { action: string }) => e.action).sort()).toEqual([
        "workspace_webhook.created",
        "workspace_webhook.deleted",
        "workspace_webhook.delivery_retried",
        "workspace_webhook.tested",
        "workspace_webhook.updated",
      ]);
      const testRow = rows.find((e: { action: string }) => e.action === "workspace_webhook.tested");
      expect(testRow.data).toMatchObject({ deliveryId: tested.body.delivery.id });
      expect(JSON.stringify(rows)).not.toContain("audit-secret-never-logged");

      // Made with an org admin's session, a change names the account with its e-mail, as the console's do.
      const bySession = await callWorkspace(app, alpha.project.id, "POST", "/webhooks", {
        cookie: owner.cookie,
        body: { name: "by session", url: `${receiver.url}/audited`, events: ["items"] },
      });
      expect(bySession.status, JSON.stringify(bySession.body)).toBe(201);
      const sessionRows = (await call(app, "GET", `/org/${slug}/audit?limit=500`, { cookie: owner.cookie })).body
        .events;
      const sessionRow = sessionRows.find(
        (e: { target: { id: string } }) => e.target?.id === bySession.body.webhook.id,
      );
      expect(sessionRow.actor).toEqual({ type: "account", id: owner.accountId, email: owner.email });
    });

    it("sends the synthetic webhook.test now, with body {channel, event, data: {webhookId}, deliveredAt}", async () => {
      const hook = await alpha.hook({
        name: "tested",
        url: `${receiver.url}/test-send`,
        events: ["items:nothing:ever"],
        secret: "test-send-secret",
        headers: { "X-Tenant": "acme" },
        // DESIGN §7 fixes the test body; the allow-list projects rows, and this data is no row.
        payloadFields: ["nosuchkey"],
      });
      const sent = await alpha.api("POST", `/webhooks/${hook.id}/test`);
      expect(sent.status, JSON.stringify(sent.body)).toBe(200);
      const delivery = sent.body.delivery;
      expect(delivery).toMatchObject({ event: "webhook.test", status: "succeeded", attemptCount: 1 });
      expect(delivery.attempts).toHaveLength(1);
      expect(delivery.attempts[0]).toMatchObject({ attempt: 1, statusCode: 200, error: null, responseBody: "ok" });
      expect(Number.isInteger(delivery.attempts[0].latencyMs)).toBe(true);

      const [request] = receiver.at("/test-send");
      expect(request).toBeDefined();
      const body = JSON.parse(request!.body);
      expect(Object.keys(body).sort()).toEqual(["channel", "data", "deliveredAt", "event"]);
      expect(body).toMatchObject({ channel: "webhook", event: "webhook.test", data: { webhookId: hook.id } });
      expect(Object.keys(body.data)).toEqual(["webhookId"]);
      expect(body.deliveredAt).toMatch(ISO_INSTANT);
      expect(request!.headers["content-type"]).toBe("application/json");
      expect(request!.headers["x-service-event"]).toBe("webhook.test");
      expect(request!.headers["x-service-delivery"]).toBe(delivery.id);
      expect(request!.headers["x-tenant"]).toBe("acme");
      expectSignedWith(request!, "test-send-secret");

      const [listed] = await alpha.deliveries(hook.id);
      expect(listed).toEqual(delivery);
      // A test send is not a failure or success of the breaker's concern.
      expect(await alpha.getHook(hook.id)).toMatchObject({ consecutiveFailures: 0, active: true });
    });

    it("lists deliveries newest first, filtered by status, paged by limit and offset", async () => {
      const hook = await alpha.hook({ name: "paged", url: `${receiver.url}/paged`, events: ["items:none"] });
      for (let i = 0; i < 2; i++) expect((await alpha.api("POST", `/webhooks/${hook.id}/test`)).status).toBe(200);
      expect((await alpha.api("PATCH", `/webhooks/${hook.id}`, { url: `${receiver.url}/fail/paged` })).status).toBe(
        200,
      );
      const failed = await alpha.api("POST", `/webhooks/${hook.id}/test`);
      expect(failed.status).toBe(200);
      expect(failed.body.delivery).toMatchObject({ status: "dead", attemptCount: 1, lastStatusCode: 500 });
      expect(failed.body.delivery.attempts[0]).toMatchObject({ statusCode: 500, error: expect.any(String) });

      const all = await alpha.deliveries(hook.id);
      expect(all.map((d) => d.status)).toEqual(["dead", "succeeded", "succeeded"]);
      expect(all[0].id).toBe(failed.body.delivery.id);

      expect((await alpha.deliveries(hook.id, "?status=dead")).map((d) => d.id)).toEqual([all[0].id]);
      expect((await alpha.deliveries(hook.id, "?status=succeeded")).map((d) => d.id)).toEqual([all[1].id, all[2].id]);
      expect(await alpha.deliveries(hook.id, "?status=pending")).toEqual([]);
      expect((await alpha.deliveries(hook.id, "?limit=1")).map((d) => d.id)).toEqual([all[0].id]);
      expect((await alpha.deliveries(hook.id, "?limit=1&offset=1")).map((d) => d.id)).toEqual([all[1].id]);
      expect((await alpha.deliveries(hook.id, "?limit=2&offset=1")).map((d) => d.id)).toEqual([all[1].id, all[2].id]);
      expect(await alpha.deliveries(hook.id, "?offset=3")).toEqual([]);
      expect((await alpha.deliveries(hook.id, "?status=succeeded&limit=1&offset=1")).map((d) => d.id)).toEqual([
        all[2].id,
      ]);

      expect(errorPaths(await alpha.api("GET", `/webhooks/${hook.id}/deliveries?status=bogus`))).toContain("status");
      expect(errorPaths(await alpha.api("GET", `/webhooks/${hook.id}/deliveries?limit=0`))).toContain("limit");
      expect(errorPaths(await alpha.api("GET", `/webhooks/${hook.id}/deliveries?offset=-1`))).toContain("offset");
    });
  });

  describe("permissions and scoping", () => {
    const principals = new Map<string, As>();
    let target: any;
    let deliveryId: string;

    beforeAll(async () => {
      const [admin, developer, viewer] = [
        await addMember(app, mailbox, owner, slug, "admin"),
        await addMember(app, mailbox, owner, slug, "developer"),
        await addMember(app, mailbox, owner, slug, "viewer"),
      ];
      const user = await alpha.api("POST", "/auth/sign-up", {
        email: "perm-user@example.test",
        password: "long-pass-1",
      });
      expect(user.status).toBe(201);
      principals.set("no credentials", {});
      principals.set("workspace user", { token: user.body.token });
      principals.set("viewer session", { cookie: viewer.user.cookie });
      principals.set("developer session", { cookie: developer.user.cookie });
      principals.set("read-only key", { token: (await createApiKey(app, owner, slug, "read-only")).token });
      principals.set("deploy key", { token: (await createApiKey(app, owner, slug, "deploy")).token });
      principals.set("full key", { token: (await createApiKey(app, owner, slug, "full")).token });
      principals.set("admin session", { cookie: admin.user.cookie });
      principals.set("owner session", { cookie: owner.cookie });
      principals.set("admin token", { token: alpha.project.adminToken });

      target = await alpha.hook({ name: "perm target", url: `${receiver.url}/perm`, events: ["items:none"] });
      const sent = await alpha.api("POST", `/webhooks/${target.id}/test`);
      expect(sent.status).toBe(200);
      deliveryId = sent.body.delivery.id;
    });

    type Outcome = "ok" | 401 | 403;
    // SPEC Authentication 8: workspace webhook management is admin-only. DESIGN §4/§7: an org
    // key or session of role admin or more is admin; a key acts as admin narrowed by its scope
    // (read-only: reads; deploy: reads plus project lifecycle, not webhook management).
    const MATRIX: [string, Outcome, Outcome][] = [
      ["no credentials", 401, 401],
      ["workspace user", 403, 403],
      ["viewer session", 403, 403],
      ["developer session", 403, 403],
      ["read-only key", "ok", 403],
      ["deploy key", "ok", 403],
      ["full key", "ok", "ok"],
      ["admin session", "ok", "ok"],
      ["owner session", "ok", "ok"],
      ["admin token", "ok", "ok"],
    ];

    it.each(MATRIX)("%s: reads %s, writes %s", async (name, reads, writes) => {
      const as = principals.get(name)!;
      const expectOutcome = (res: CallResult, outcome: Outcome, success: number, what: string) => {
        if (outcome === "ok") {
          expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(success);
        } else {
          expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(outcome);
          expect(res.body.error.code).toBe(outcome === 401 ? "UNAUTHORIZED" : "FORBIDDEN");
        }
      };
      const asCaller = (method: string, path: string, body?: unknown) => alpha.api(method, path, body, as);

      expectOutcome(await asCaller("GET", "/webhooks"), reads, 200, "list");
      expectOutcome(await asCaller("GET", `/webhooks/${target.id}`), reads, 200, "get");
      expectOutcome(await asCaller("GET", `/webhooks/${target.id}/deliveries`), reads, 200, "deliveries");

      const victim = await alpha.hook({ name: `victim of ${name}`, url: `${receiver.url}/perm`, events: ["none"] });
      const sentBefore = receiver.at("/perm").length;
      const newName = `made by ${name}`;
      expectOutcome(
        await asCaller("POST", "/webhooks", { name: newName, url: `${receiver.url}/perm`, events: ["none"] }),
        writes,
        201,
        "create",
      );
      expectOutcome(
        await asCaller("PATCH", `/webhooks/${target.id}`, { name: `patched by ${name}` }),
        writes,
        200,
        "patch",
      );
      expectOutcome(await asCaller("POST", `/webhooks/${target.id}/test`), writes, 200, "test");
      expectOutcome(await asCaller("POST", `/webhooks/_deliveries/${deliveryId}/retry`), writes, 200, "retry");
      expectOutcome(await asCaller("DELETE", `/webhooks/${victim.id}`), writes, 204, "delete");

      const names = (await alpha.api("GET", "/webhooks")).body.webhooks.map((w: { name: string }) => w.name);
      if (writes === "ok") {
        expect(names).toContain(newName);
        expect(names).not.toContain(victim.name);
        expect((await alpha.getHook(target.id)).name).toBe(`patched by ${name}`);
        expect(receiver.at("/perm").length).toBe(sentBefore + 2);
      } else {
        // A refused write changed nothing and sent nothing.
        expect(names).not.toContain(newName);
        expect(names).toContain(victim.name);
        expect((await alpha.getHook(target.id)).name).not.toBe(`patched by ${name}`);
        expect(receiver.at("/perm").length).toBe(sentBefore);
      }
    });

    it("answers an anonymous write 401 even when its body is invalid (authentication before validation)", async () => {
      const create = await alpha.api("POST", "/webhooks", {}, {});
      expect(create.status, JSON.stringify(create.body)).toBe(401);
      const patch = await alpha.api("PATCH", `/webhooks/${target.id}`, { events: [] }, {});
      expect(patch.status, JSON.stringify(patch.body)).toBe(401);
    });

    it("refuses item and file writes by read-only and deploy keys (403) and by no one (401) before reading the body", async () => {
      await alpha.collection("scoped");
      const raw = (method: string, path: string, as: As, body: string, type = "application/json") =>
        fetch(`${app.url}/w/${alpha.project.id}/api${path}`, {
          method,
          headers: {
            "content-type": type,
            ...(as.token ? { authorization: `Bearer ${as.token}` } : {}),
          },
          body,
        }).then(async (res) => ({ status: res.status, body: await res.json() }));
      const writes: Array<[string, string, string, string?]> = [
        ["POST", "/items/scoped", "{bad"],
        ["POST", "/items/scoped", "[1]"],
        ["POST", "/items/scoped", JSON.stringify({ a: "\u0000" })],
        ["POST", "/items/scoped", JSON.stringify({ big: "x".repeat(1_100_000) })],
        ["PATCH", "/items/scoped/itm_missing", '"text"'],
        ["POST", "/items/scoped", "a=1", "application/x-www-form-urlencoded"],
        ["POST", "/files?name=a.txt", "hello", "text/plain"],
      ];
      for (const [name, status] of [
        ["read-only key", 403],
        ["deploy key", 403],
        ["no credentials", 401],
      ] as const) {
        for (const [method, path, body, type] of writes) {
          const res = await raw(method, path, principals.get(name)!, body, type);
          expect(res.status, `${name} ${method} ${path}: ${JSON.stringify(res.body)}`).toBe(status);
        }
      }
      const list = await alpha.api("GET", "/items/scoped");
      expect(list.body.items).toEqual([]);
    });

    it("scopes hooks and deliveries to their workspace: project A's are 404 from project B", async () => {
      const hook = await alpha.hook({ name: "alpha only", url: `${receiver.url}/alpha-only`, events: ["items"] });
      const sent = await alpha.api("POST", `/webhooks/${hook.id}/test`);
      expect(sent.status).toBe(200);
      const delivery = sent.body.delivery.id;
      const fullKey = principals.get("full key")!;

      // B's admin token, and an org key that is admin of both projects, through B's URL.
      for (const as of [{ token: beta.project.adminToken }, fullKey]) {
        for (const [method, path, body] of [
          ["GET", `/webhooks/${hook.id}`, undefined],
          ["PATCH", `/webhooks/${hook.id}`, { name: "hijacked", active: false }],
          ["POST", `/webhooks/${hook.id}/test`, undefined],
          ["GET", `/webhooks/${hook.id}/deliveries`, undefined],
          ["POST", `/webhooks/_deliveries/${delivery}/retry`, undefined],
          ["DELETE", `/webhooks/${hook.id}`, undefined],
        ] as const) {
          const res = await beta.api(method, path, body, as);
          expect(res.status, `${method} ${path} via project B`).toBe(404);
          expect(res.body.error.code).toBe("NOT_FOUND");
        }
        const list = await beta.api("GET", "/webhooks", undefined, as);
        expect(list.status).toBe(200);
        expect(list.body.webhooks.map((w: { id: string }) => w.id)).not.toContain(hook.id);
      }

      // Nothing happened to A's hook: same name, still active, one request, one attempt.
      expect(await alpha.getHook(hook.id)).toMatchObject({ name: "alpha only", active: true });
      expect(receiver.at("/alpha-only")).toHaveLength(1);
      const [listed] = await alpha.deliveries(hook.id);
      expect(listed.attemptCount).toBe(1);

      // Another org's key and a non-member's session do not see the project at all.
      const stranger = await signUp(app);
      const otherOrg = await createOrg(app, stranger, "Stranger Org");
      const otherKey = await createApiKey(app, stranger, otherOrg.slug, "full");
      for (const as of [{ token: otherKey.token }, { cookie: stranger.cookie }]) {
        expect((await alpha.api("GET", "/webhooks", undefined, as)).status).toBe(404);
        expect((await alpha.api("GET", `/webhooks/${hook.id}`, undefined, as)).status).toBe(404);
        expect((await alpha.api("POST", `/webhooks/_deliveries/${delivery}/retry`, undefined, as)).status).toBe(404);
      }
    });
  });

  describe("validation", () => {
    it("requires name, url and events, naming each field", async () => {
      const paths = errorPaths(await alpha.api("POST", "/webhooks", {}));
      expect(paths).toEqual(expect.arrayContaining(["name", "url", "events"]));

      const base = { name: "v", url: `${receiver.url}/v`, events: ["items"] };
      expect(errorPaths(await alpha.api("POST", "/webhooks", { url: base.url, events: base.events }))).toEqual([
        "name",
      ]);
      expect(errorPaths(await alpha.api("POST", "/webhooks", { name: "v", events: base.events }))).toEqual(["url"]);
      expect(errorPaths(await alpha.api("POST", "/webhooks", { name: "v", url: base.url }))).toEqual(["events"]);
      expect(errorPaths(await alpha.api("POST", "/webhooks", { ...base, events: [] }))).toEqual(["events"]);
      expect(errorPaths(await alpha.api("POST", "/webhooks", { ...base, url: "ftp://example.test/x" }))).toEqual([
        "url",
      ]);

      const hook = await alpha.hook(base);
      expect(errorPaths(await alpha.api("PATCH", `/webhooks/${hook.id}`, { events: [] }))).toEqual(["events"]);
      expect(errorPaths(await alpha.api("PATCH", `/webhooks/${hook.id}`, { name: "" }))).toEqual(["name"]);
      expect((await alpha.getHook(hook.id)).events).toEqual(["items"]);
    });

    it("accepts a dotted pattern, which never matches, and its test send still goes out", async () => {
      const hook = await alpha.hook({ name: "dotted", url: `${receiver.url}/dotted`, events: ["items.posts.created"] });
      expect(hook.events).toEqual(["items.posts.created"]);
      const sent = await alpha.api("POST", `/webhooks/${hook.id}/test`);
      expect(sent.status).toBe(200);
      expect(sent.body.delivery).toMatchObject({ event: "webhook.test", status: "succeeded" });
      const [request] = receiver.at("/dotted");
      expect(JSON.parse(request!.body)).toMatchObject({ event: "webhook.test", data: { webhookId: hook.id } });
    });

    const RESERVED = [
      "Content-Type",
      "content-type",
      "X-Service-Signature",
      "x-service-anything",
      "webhook-id",
      "Webhook-Timestamp",
      "WEBHOOK-SIGNATURE",
    ];

    it.each(RESERVED)(
      "refuses the reserved header %s at create and at PATCH (422 naming headers.<name>)",
      async (h) => {
        const name = `reserved ${h}`;
        const created = await alpha.api("POST", "/webhooks", {
          name,
          url: `${receiver.url}/reserved`,
          events: ["items"],
          headers: { "X-Tenant": "acme", [h]: "forged" },
        });
        expect(errorPaths(created)).toEqual([`headers.${h}`]);
        const names = (await alpha.api("GET", "/webhooks")).body.webhooks.map((w: { name: string }) => w.name);
        expect(names).not.toContain(name);

        const hook = await alpha.hook({
          name: `patched ${h}`,
          url: `${receiver.url}/reserved`,
          events: ["items"],
          headers: { "X-Tenant": "acme-corp" },
        });
        const patched = await alpha.api("PATCH", `/webhooks/${hook.id}`, {
          headers: { "X-Tenant": "x", [h]: "forged" },
        });
        expect(errorPaths(patched)).toEqual([`headers.${h}`]);
        expect((await alpha.getHook(hook.id)).headers).toEqual({ "X-Tenant": "••••corp" });
      },
    );

    it("names every reserved header of one request", async () => {
      const res = await alpha.api("POST", "/webhooks", {
        name: "many reserved",
        url: `${receiver.url}/reserved`,
        events: ["items"],
        headers: { "Content-Type": "text/plain", "X-Service-Delivery": "dlv_forged", "X-Ok": "1" },
      });
      expect(errorPaths(res).sort()).toEqual(["headers.Content-Type", "headers.X-Service-Delivery"]);
    });

    it("refuses custom headers that could never be sent as given, naming each (create and PATCH)", async () => {
      const input = {
        name: "unsendable",
        url: `${receiver.url}/unsendable`,
        events: ["items"],
        headers: {
          "Bad Name": "v",
          "X-Split": "a\r\nX-Service-Signature: forged",
          Host: "evil.example",
          "Content-Length": "5",
          "Transfer-Encoding": "chunked",
          "x-dup": "1",
          "X-Dup": "2",
          "X-Fine": "ok",
        },
      };
      const created = await alpha.api("POST", "/webhooks", input);
      expect(errorPaths(created).sort()).toEqual(
        [
          "headers.Bad Name",
          "headers.Content-Length",
          "headers.Host",
          "headers.Transfer-Encoding",
          "headers.X-Dup",
          "headers.X-Split",
        ].sort(),
      );
      const hook = await alpha.hook({ name: "fine", url: `${receiver.url}/fine`, events: ["items:none"] });
      const patched = await alpha.api("PATCH", `/webhooks/${hook.id}`, { headers: { Connection: "close" } });
      expect(errorPaths(patched)).toEqual(["headers.Connection"]);
    });

    it("refuses more than 50 custom headers, or more than 8 KiB of them, and takes the limits themselves", async () => {
      const many = (count: number, valueLength: number) =>
        Object.fromEntries(Array.from({ length: count }, (_, i) => [`X-H${i}`, "v".repeat(valueLength)]));
      const base = { name: "headers", url: `${receiver.url}/many`, events: ["items:none"] };
      expect(errorPaths(await alpha.api("POST", "/webhooks", { ...base, headers: many(51, 1) }))).toEqual(["headers"]);
      // 10 headers of 4 + 1,000 bytes: over 8 KiB together, though each is small.
      expect(errorPaths(await alpha.api("POST", "/webhooks", { ...base, headers: many(10, 1000) }))).toEqual([
        "headers",
      ]);
      // One long value (a bearer token) may use the whole budget; a name is at most 100 characters.
      const long = await alpha.hook({ ...base, headers: { Authorization: `Bearer ${"t".repeat(8_000)}` } });
      const sentLong = await alpha.api("POST", `/webhooks/${long.id}/test`);
      expect(sentLong.body.delivery).toMatchObject({ status: "succeeded" });
      expect(
        errorPaths(await alpha.api("POST", "/webhooks", { ...base, headers: { [`X-${"n".repeat(99)}`]: "v" } })),
      ).toHaveLength(1);
      const hook = await alpha.hook({ ...base, headers: many(50, 100) });
      const sent = await alpha.api("POST", `/webhooks/${hook.id}/test`);
      expect(sent.body.delivery).toMatchObject({ status: "succeeded" });
      expect(errorPaths(await alpha.api("PATCH", `/webhooks/${hook.id}`, { headers: many(51, 1) }))).toEqual([
        "headers",
      ]);
    });

    it("sends a custom User-Agent in place of Plinth's, once", async () => {
      const hook = await alpha.hook({
        name: "agent",
        url: `${receiver.url}/agent`,
        events: ["items:none"],
        headers: { "user-agent": "acme-relay/2" },
      });
      const sent = await alpha.api("POST", `/webhooks/${hook.id}/test`);
      expect(sent.status).toBe(200);
      const [request] = receiver.at("/agent");
      expect(request!.headers["user-agent"]).toBe("acme-relay/2");
      // The headers as sent (and recorded for a replay) name it once.
      const attempt = await app.server.deps.db
        .selectFrom("webhook_attempts")
        .select("request_headers")
        .where("delivery_id", "=", sent.body.delivery.id)
        .executeTakeFirstOrThrow();
      const names = Object.keys(JSON.parse(String(attempt.request_headers)));
      expect(names.filter((name) => name.toLowerCase() === "user-agent")).toEqual(["user-agent"]);
    });

    it("sends allowed custom headers beside the reserved ones", async () => {
      const hook = await alpha.hook({
        name: "custom headers",
        url: `${receiver.url}/custom`,
        events: ["items:none"],
        headers: { "X-Tenant": "acme", "X-Trace": "t-1" },
      });
      expect((await alpha.api("POST", `/webhooks/${hook.id}/test`)).status).toBe(200);
      const [request] = receiver.at("/custom");
      expect(request!.headers["x-tenant"]).toBe("acme");
      expect(request!.headers["x-trace"]).toBe("t-1");
      expect(request!.headers["content-type"]).toBe("application/json");
      expect(request!.headers["x-service-event"]).toBe("webhook.test");
      // Without a secret nothing is signed.
      expect(request!.headers["x-service-timestamp"]).toBeUndefined();
      expect(request!.headers["x-service-signature"]).toBeUndefined();
      expect(request!.headers["x-service-signature-v2"]).toBeUndefined();
      expect(request!.headers["webhook-signature"]).toBeUndefined();
    });
  });

  describe("pattern rules, end to end", () => {
    let patterns: Workspace;
    const ITEM_EVENTS = [
      "items:posts:created",
      "items:posts:updated",
      "items:posts:deleted",
      "items:comments:created",
      "items:comments:updated",
      "items:comments:deleted",
    ];
    const ALL_EVENTS = [...ITEM_EVENTS, "auth:signed_up"];
    const CASES: [pattern: string, expected: string[]][] = [
      ["items:*:created", ["items:posts:created", "items:comments:created"]],
      ["items", ITEM_EVENTS],
      ["items:posts", ["items:posts:created", "items:posts:updated", "items:posts:deleted"]],
      ["items:posts:created", ["items:posts:created"]],
      ["items:comments:deleted", ["items:comments:deleted"]],
      ["items.posts.created", []],
      ["items:posts:created:extra", []],
      ["auth", ["auth:signed_up"]],
      ["*:signed_up", ["auth:signed_up"]],
      ["files", []],
      ["*", ALL_EVENTS],
    ];
    const hooks = new Map<string, any>();
    const pathOf = (index: number) => `/pattern/${index}`;

    beforeAll(async () => {
      patterns = workspaceOf(app, await createProject(app, owner, slug, "Patterns"));
      await patterns.collection("posts");
      await patterns.collection("comments");
      for (const [index, [pattern]] of CASES.entries()) {
        hooks.set(
          pattern,
          await patterns.hook({ name: pattern, url: `${receiver.url}${pathOf(index)}`, events: [pattern] }),
        );
      }
      for (const collection of ["posts", "comments"]) {
        const item = await patterns.item(collection, { title: collection });
        expect((await patterns.api("PATCH", `/items/${collection}/${item.id}`, { title: "changed" })).status).toBe(200);
        expect((await patterns.api("DELETE", `/items/${collection}/${item.id}`)).status).toBe(204);
      }
      const user = await patterns.api("POST", "/auth/sign-up", {
        email: "pattern@example.test",
        password: "long-pass-1",
      });
      expect(user.status).toBe(201);
      // Every event's deliveries are written together, so once each hook has what it expects,
      // any delivery it should not have would already be listed.
      await until("every pattern hook's expected deliveries", () =>
        CASES.every(([, expected], index) => receiver.at(pathOf(index)).length >= expected.length),
      );
    });

    it.each(CASES)("%s receives exactly %j", async (pattern, expected) => {
      const hook = hooks.get(pattern);
      const index = CASES.findIndex(([p]) => p === pattern);
      const listed = await patterns.deliveries(hook.id, "?limit=200");
      expect(listed.map((d) => d.event).sort()).toEqual([...expected].sort());
      const done = await until(`deliveries of ${pattern} to succeed`, async () => {
        const now = await patterns.deliveries(hook.id, "?limit=200");
        return now.every((d) => d.status === "succeeded") ? now : undefined;
      });
      expect(done).toHaveLength(expected.length);
      const seen = receiver.at(pathOf(index)).map((r) => eventName(JSON.parse(r.body)));
      expect(seen.sort()).toEqual([...expected].sort());
    });
  });

  describe("body, projection and per-hook signatures", () => {
    let projection: Workspace;
    let item: any;
    const SPECS = [
      { key: "null", payloadFields: null, secret: "secret-null" },
      { key: "omitted", secret: "secret-omitted" },
      { key: "empty", payloadFields: [], secret: "secret-empty" },
      { key: "title", payloadFields: ["title", "missing"], secret: "secret-title" },
      { key: "nullable", payloadFields: ["flag", "count"], secret: "secret-nullable" },
      { key: "nested", payloadFields: ["meta"], secret: "secret-nested" },
    ] as const;
    const received = new Map<string, ReceivedRequest>();
    const hookIds = new Map<string, string>();

    beforeAll(async () => {
      projection = workspaceOf(app, await createProject(app, owner, slug, "Projection"));
      await projection.collection("articles");
      for (const spec of SPECS) {
        const { key, ...rest } = spec;
        const hook = await projection.hook({
          name: key,
          url: `${receiver.url}/projection/${key}`,
          events: ["items:articles:created"],
          ...rest,
        });
        hookIds.set(key, hook.id);
      }
      item = await projection.item("articles", {
        title: "Hello",
        body: "text",
        count: 0,
        flag: null,
        meta: { tags: ["a", "b"], author: { name: "Ada", id: 7 } },
      });
      await until("a delivery per projection hook", () =>
        SPECS.every((spec) => receiver.at(`/projection/${spec.key}`).length > 0),
      );
      for (const spec of SPECS) received.set(spec.key, receiver.at(`/projection/${spec.key}`)[0]!);
    });

    it("sends {channel, event, data, deliveredAt} and nothing else", () => {
      for (const request of received.values()) {
        const body = JSON.parse(request.body);
        expect(Object.keys(body).sort()).toEqual(["channel", "data", "deliveredAt", "event"]);
        expect(body.channel).toBe("items:articles");
        expect(body.event).toBe("created");
        expect(body.deliveredAt).toMatch(ISO_INSTANT);
        expect(request.headers["x-service-event"]).toBe("items:articles:created");
        expect(request.headers["content-type"]).toBe("application/json");
        // Compact JSON with its keys in this order, whether the hook projects or takes the whole row.
        const { channel, event, data, deliveredAt } = body;
        expect(request.body).toBe(JSON.stringify({ channel, event, data, deliveredAt }));
      }
    });

    it.each(["null", "omitted", "empty"])("payloadFields %s sends the whole item as the API returned it", (key) => {
      expect(JSON.parse(received.get(key)!.body).data).toEqual(item);
    });

    it("projects listed top-level keys; a missing key is absent, never null", () => {
      const data = JSON.parse(received.get("title")!.body).data;
      expect(data).toEqual({ title: "Hello" });
      expect(Object.keys(data)).toEqual(["title"]);
      expect(received.get("title")!.body).not.toContain("missing");
    });

    it("keeps listed keys whose value is null or falsy", () => {
      const data = JSON.parse(received.get("nullable")!.body).data;
      expect(data).toEqual({ flag: null, count: 0 });
    });

    it("sends a named object field whole", () => {
      expect(JSON.parse(received.get("nested")!.body).data).toEqual({
        meta: { tags: ["a", "b"], author: { name: "Ada", id: 7 } },
      });
    });

    it("builds bodies per hook and signs each with its own secret", async () => {
      const titleBody = received.get("title")!.body;
      const nestedBody = received.get("nested")!.body;
      expect(titleBody).not.toBe(nestedBody);
      for (const spec of SPECS) {
        const request = received.get(spec.key)!;
        expectSignedWith(request, spec.secret);
        expect(verifyWebhook({ secret: spec.secret, body: request.raw, headers: request.headers })).toBe(true);
        expect(verifyWebhook({ secret: spec.secret, body: request.body, headers: request.headers })).toBe(true);
        for (const other of SPECS) {
          if (other.key === spec.key) continue;
          expect(verifyWebhook({ secret: other.secret, body: request.body, headers: request.headers })).toBe(false);
        }
        // Another hook's body does not verify under this hook's headers.
        if (spec.key !== "title") {
          expect(verifyWebhook({ secret: spec.secret, body: titleBody, headers: request.headers })).toBe(false);
        }
        // X-Service-Delivery names this hook's own delivery.
        const [delivery] = await projection.deliveries(hookIds.get(spec.key)!);
        expect(request.headers["x-service-delivery"]).toBe(delivery.id);
      }
    });
  });

  describe("retries", () => {
    it("records first-attempt successes exactly: one attempt each, the delivery succeeded, the job gone", async () => {
      // Successes that move no breaker are recorded together (on PostgreSQL in one statement).
      const created = await startReceiver((request) => ({
        status: 201,
        body: `got ${request.headers["x-service-delivery"]}`,
      }));
      try {
        await alpha.collection("firsts");
        const hook = await alpha.hook({
          name: "firsts",
          url: `${created.url}/firsts`,
          events: ["items:firsts:created"],
        });
        await Promise.all([1, 2, 3, 4, 5, 6].map((n) => alpha.item("firsts", { n })));
        const list = await until("six deliveries to succeed", async () => {
          const found = await alpha.deliveries(hook.id);
          return found.length === 6 && found.every((d) => d.status === "succeeded") ? found : undefined;
        });
        expect(created.requests).toHaveLength(6);
        for (const delivery of list) {
          expect(delivery).toMatchObject({
            status: "succeeded",
            attemptCount: 1,
            lastStatusCode: 201,
            lastError: null,
          });
          expect(delivery.attempts).toHaveLength(1);
          const [attempt] = delivery.attempts;
          expect(attempt).toMatchObject({
            attempt: 1,
            statusCode: 201,
            error: null,
            responseBody: `got ${delivery.id}`,
          });
          expect(Number.isInteger(attempt.latencyMs)).toBe(true);
          expect(attempt.createdAt).toMatch(ISO_INSTANT);
        }
        const { db } = app.server.deps;
        const jobs = await db.selectFrom("jobs").select("payload").where("kind", "=", "webhook.deliver").execute();
        for (const delivery of list) expect(jobs.some((job) => String(job.payload).includes(delivery.id))).toBe(false);
        expect(await alpha.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 0 });
      } finally {
        await created.close();
      }
    });

    it("retries a failing receiver until 2xx, same X-Service-Delivery, every attempt recorded (body cut to 2 KiB)", async () => {
      const big = "x".repeat(5 * 1024);
      const flaky = await startReceiver((_request, index) => ({
        status: index < 2 ? 500 : 200,
        body: `${index}${big}`,
      }));
      try {
        await alpha.collection("retries");
        const hook = await alpha.hook({
          name: "flaky",
          url: `${flaky.url}/flaky`,
          events: ["items:retries:created"],
          secret: "flaky-secret",
        });
        await alpha.item("retries", { n: 1 });
        const [delivery] = await until("the delivery to succeed", async () => {
          const list = await alpha.deliveries(hook.id);
          return list[0]?.status === "succeeded" ? list : undefined;
        });
        expect(flaky.requests).toHaveLength(3);
        const ids = new Set(flaky.requests.map((r) => r.headers["x-service-delivery"]));
        expect([...ids]).toEqual([delivery.id]);
        for (const request of flaky.requests) {
          expect(request.body).toBe(flaky.requests[0]!.body);
          expectSignedWith(request, "flaky-secret");
        }

        expect(delivery).toMatchObject({ status: "succeeded", attemptCount: 3, lastStatusCode: 200, lastError: null });
        expect(delivery.attempts.map((a: { attempt: number }) => a.attempt)).toEqual([1, 2, 3]);
        expect(delivery.attempts.map((a: { statusCode: number }) => a.statusCode)).toEqual([500, 500, 200]);
        for (const [index, attempt] of delivery.attempts.entries()) {
          expect(Number.isInteger(attempt.latencyMs)).toBe(true);
          expect(attempt.latencyMs).toBeGreaterThanOrEqual(0);
          expect(attempt.responseBody).toHaveLength(2048);
          expect(attempt.responseBody).toBe(`${index}${big}`.slice(0, 2048));
          expect(attempt.createdAt).toMatch(ISO_INSTANT);
        }
        expect(delivery.attempts[0].error).toEqual(expect.any(String));
        expect(delivery.attempts[2].error).toBeNull();
        // The 2xx at the end left the breaker's counter at 0.
        expect(await alpha.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 0 });
      } finally {
        await flaky.close();
      }
    });

    it("resets the counter on a 2xx even when the failure came while that request was in flight", async () => {
      await alpha.collection("overlap");
      const slowDone = gate();
      let fastSeen = 0;
      const receiver = await startReceiver(async (request) => {
        if (request.body.includes('"kind":"slow"')) {
          await slowDone.opened;
          return { status: 200 };
        }
        fastSeen++;
        // The fast item's first attempt fails at once; its retries hang until the test ends.
        if (fastSeen === 1) return { status: 500, body: "down" };
        await new Promise((resolve) => setTimeout(resolve, 5_000));
        return { status: 200 };
      });
      try {
        const hook = await alpha.hook({ name: "overlap", url: `${receiver.url}/overlap`, events: ["items:overlap"] });
        const slow = await alpha.item("overlap", { kind: "slow" });
        await until("the slow request", () => receiver.requests.some((r) => r.body.includes(slow.id)));
        await alpha.item("overlap", { kind: "fast" });
        await until(
          "the fast item's failure to count",
          async () => (await alpha.getHook(hook.id)).consecutiveFailures === 1,
        );
        slowDone.open();
        await until("the slow delivery to succeed", async () =>
          (await alpha.deliveries(hook.id, "?status=succeeded")).some((d) => d.id && d.attemptCount === 1),
        );
        expect(await alpha.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 0 });
      } finally {
        slowDone.open();
        await receiver.close();
      }
    });

    it("dead-letters after WEBHOOK_MAX_ATTEMPTS (3) failed attempts and sends no more", async () => {
      await alpha.collection("doomed");
      const hook = await alpha.hook({ name: "dead", url: `${receiver.url}/fail/dead`, events: ["items:doomed"] });
      await alpha.item("doomed", { n: 1 });
      const [delivery] = await until("the delivery to be dead", async () => {
        const list = await alpha.deliveries(hook.id);
        return list[0]?.status === "dead" ? list : undefined;
      });
      expect(delivery.attemptCount).toBe(3);
      expect(delivery.attempts.map((a: { statusCode: number }) => a.statusCode)).toEqual([500, 500, 500]);
      await sleep(300);
      expect(receiver.at("/fail/dead")).toHaveLength(3);
      expect(await alpha.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 3 });
    });
  });

  describe("retry of a past delivery", () => {
    it("re-sends the original body, timestamp, signatures and delivery id byte for byte", async () => {
      await alpha.collection("replays");
      const hook = await alpha.hook({
        name: "replay",
        url: `${receiver.url}/replay`,
        events: ["items:replays:created"],
        secret: "replay-secret",
        headers: { "X-Tenant": "acme" },
      });
      await alpha.item("replays", { title: "once", nested: { emoji: "☃", quote: 'a "b"' } });
      const [delivery] = await until("the first attempt", async () => {
        const list = await alpha.deliveries(hook.id);
        return list[0]?.status === "succeeded" ? list : undefined;
      });
      const [first] = receiver.at("/replay");
      expect(first).toBeDefined();
      expect(delivery.attemptCount).toBe(1);

      // Later signing would give another timestamp; a replay must not re-sign.
      app.clock.advance(5_000);
      const retried = await alpha.api("POST", `/webhooks/_deliveries/${delivery.id}/retry`);
      expect(retried.status, JSON.stringify(retried.body)).toBe(200);
      expect(retried.body.delivery).toMatchObject({ id: delivery.id, status: "succeeded", attemptCount: 2 });
      expect(retried.body.delivery.attempts[1]).toMatchObject({ attempt: 2, statusCode: 200 });

      const requests = receiver.at("/replay");
      expect(requests).toHaveLength(2);
      const second = requests[1]!;
      expect(second.raw.equals(first!.raw)).toBe(true);
      for (const name of [
        "x-service-timestamp",
        "x-service-signature",
        "x-service-signature-v2",
        "x-service-delivery",
        "x-service-event",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "content-type",
        "x-tenant",
      ]) {
        expect(second.headers[name], name).toBeDefined();
        expect(second.headers[name], name).toBe(first!.headers[name]);
      }
      expect(second.headers["x-service-delivery"]).toBe(delivery.id);
      expectSignedWith(second, "replay-secret");
      expect(verifyWebhook({ secret: "replay-secret", body: second.raw, headers: second.headers })).toBe(true);

      // Through another project, or with an unknown id: 404, and nothing is sent.
      const viaBeta = await beta.api("POST", `/webhooks/_deliveries/${delivery.id}/retry`);
      expect(viaBeta.status).toBe(404);
      expect(viaBeta.body.error.code).toBe("NOT_FOUND");
      expect((await alpha.api("POST", "/webhooks/_deliveries/dlv_unknown/retry")).status).toBe(404);
      expect(receiver.at("/replay")).toHaveLength(2);
      expect((await alpha.deliveries(hook.id))[0].attemptCount).toBe(2);
    });
  });

  describe("events from every source", () => {
    it("delivers items, auth and files events to a '*' hook with data as the API returned it", async () => {
      const sources = workspaceOf(app, await createProject(app, owner, slug, "Sources"));
      const hook = await sources.hook({ name: "everything", url: `${receiver.url}/sources`, events: ["*"] });
      await sources.collection("notes");

      const created = await sources.item("notes", { title: "first", tags: ["x"] });
      const updated = await sources.api("PATCH", `/items/notes/${created.id}`, { title: "second" });
      expect(updated.status).toBe(200);
      expect((await sources.api("DELETE", `/items/notes/${created.id}`)).status).toBe(204);

      const password = "sources-password-1";
      const signedUp = await sources.api("POST", "/auth/sign-up", { email: "src@example.test", password });
      expect(signedUp.status).toBe(201);
      const signedIn = await sources.api("POST", "/auth/sign-in", { email: "src@example.test", password });
      expect(signedIn.status).toBe(200);
      expect((await sources.api("POST", "/auth/sign-out", undefined, { token: signedIn.body.token })).status).toBe(200);
      expect((await sources.api("DELETE", `/users/${signedUp.body.user.id}`)).status).toBe(204);

      const upload = await fetch(`${app.url}/w/${sources.project.id}/api/files?name=notes.txt`, {
        method: "POST",
        headers: { authorization: `Bearer ${sources.project.adminToken}`, "content-type": "text/plain" },
        body: "file body",
      });
      expect(upload.status).toBe(201);
      const file = ((await upload.json()) as { file: Record<string, unknown> }).file;
      expect((await sources.api("DELETE", `/files/${file.id}`)).status).toBe(204);

      const expected: Record<string, unknown> = {
        "items:notes:created": created,
        "items:notes:updated": updated.body.item,
        // A delete carries the item's last state.
        "items:notes:deleted": updated.body.item,
        "auth:signed_up": signedUp.body.user,
        "auth:signed_in": signedIn.body.user,
        "auth:signed_out": signedUp.body.user,
        "auth:user_deleted": signedUp.body.user,
        "files:uploaded": file,
        "files:deleted": file,
      };
      await until("every source's event", () => receiver.at("/sources").length >= Object.keys(expected).length);
      await sleep(200);
      const bodies = receiver.at("/sources").map((r) => JSON.parse(r.body));
      expect(bodies.map(eventName).sort()).toEqual(Object.keys(expected).sort());
      for (const body of bodies) {
        expect(body.data, eventName(body)).toEqual(expected[eventName(body)]);
        if (body.channel === "auth") {
          expect(Object.keys(body.data).sort()).toEqual(["createdAt", "email", "id", "updatedAt"]);
        }
      }
      const raw = receiver
        .at("/sources")
        .map((r) => r.body)
        .join("\n");
      expect(raw).not.toContain(password);
      expect(raw).not.toContain("scrypt");
      expect(raw.toLowerCase()).not.toContain("password");
      expect(raw).not.toContain(signedIn.body.token);
      expect(await sources.deliveries(hook.id, "?limit=200")).toHaveLength(Object.keys(expected).length);
    });
  });

  describe("project state", () => {
    it("answers 409 while the project is paused, for admins and users alike; 404 once it is deleted", async () => {
      const doomed = workspaceOf(app, await createProject(app, owner, slug, "Doomed"));
      const hook = await doomed.hook({ name: "doomed", url: `${receiver.url}/doomed`, events: ["items"] });
      const user = await doomed.api("POST", "/auth/sign-up", { email: "doomed@example.test", password: "long-pass-1" });
      expect(user.status).toBe(201);
      const asUser = { token: user.body.token };
      const fullKey = { token: (await createApiKey(app, owner, slug, "full")).token };

      const pause = await call(app, "POST", `/org/${slug}/projects/${doomed.project.slug}/pause`, {
        cookie: owner.cookie,
      });
      expect(pause.status).toBe(200);
      const whilePaused: [string, string, As, unknown][] = [
        ["GET", "/webhooks", { token: doomed.project.adminToken }, undefined],
        ["GET", `/webhooks/${hook.id}`, fullKey, undefined],
        ["POST", `/webhooks/${hook.id}/test`, { cookie: owner.cookie }, undefined],
        ["POST", "/webhooks", { token: doomed.project.adminToken }, { name: "n", url: receiver.url, events: ["x"] }],
        ["GET", "/collections", asUser, undefined],
        ["POST", "/auth/sign-in", {}, { email: "doomed@example.test", password: "long-pass-1" }],
      ];
      for (const [method, path, as, body] of whilePaused) {
        const res = await doomed.api(method, path, body, as);
        expect(res.status, `${method} ${path}`).toBe(409);
        expect(res.body.error.code).toBe("CONFLICT");
      }
      expect(receiver.at("/doomed")).toHaveLength(0);

      const resume = await call(app, "POST", `/org/${slug}/projects/${doomed.project.slug}/resume`, {
        cookie: owner.cookie,
      });
      expect(resume.status).toBe(200);
      expect((await doomed.api("GET", `/webhooks/${hook.id}`)).status).toBe(200);
      expect((await doomed.api("GET", "/collections", undefined, asUser)).status).toBe(200);

      const deleted = await call(app, "DELETE", `/org/${slug}/projects/${doomed.project.slug}`, {
        cookie: owner.cookie,
      });
      expect(deleted.status).toBe(200);
      for (const [method, path, as] of [
        ["GET", "/webhooks", { token: doomed.project.adminToken }],
        ["GET", `/webhooks/${hook.id}`, fullKey],
        ["POST", `/webhooks/${hook.id}/test`, { cookie: owner.cookie }],
        ["GET", "/collections", asUser],
      ] as [string, string, As][]) {
        const res = await doomed.api(method, path, undefined, as);
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body.error.code).toBe("NOT_FOUND");
      }
    });
  });
});

// =============================================================================================
// The circuit breaker, on an app with one worker slot so the order of attempts is known.
// =============================================================================================

describe("workspace webhook circuit breaker", () => {
  let app: TestApp;
  let owner: TestUser;
  let slug: string;
  let space: Workspace;
  let failing: Receiver;
  let control: Receiver;

  beforeAll(async () => {
    app = await startApp({ ...BASE_ENV, WORKERS: "1", WEBHOOK_CONCURRENCY: "1" });
    failing = await startReceiver(() => ({ status: 500, body: "down" }));
    control = await startReceiver();
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Breaker Org")).slug;
    space = workspaceOf(app, await createProject(app, owner, slug, "Breaker"));
    await space.collection("things");
  });
  afterAll(async () => {
    await failing?.close();
    await control?.close();
    await app?.close();
  });

  async function autoDisabledAudit(): Promise<any[]> {
    const res = await call(app, "GET", `/org/${slug}/audit?action=webhook.auto_disabled`, { cookie: owner.cookie });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.events;
  }

  async function autoDisabledNotifications(): Promise<any[]> {
    const res = await call(app, "GET", `/org/${slug}/notifications`, { cookie: owner.cookie });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.notifications.filter((n: { kind: string }) => n.kind === "webhook.auto_disabled");
  }

  it("stays on at 14 failed attempts, trips at 15, skips queued work, resumes, and resets on a 2xx", async () => {
    const hook = await space.hook({
      name: "breaker",
      url: `${failing.url}/breaker`,
      events: ["items:things:created"],
      secret: "breaker-secret",
    });
    const watcher = await space.hook({ name: "control", url: `${control.url}/control`, events: ["items:things"] });

    // Five events × WEBHOOK_MAX_ATTEMPTS (3) = 15 failed attempts; the 15th is held open.
    const fifteenth = gate();
    failing.respondWith(async (_request, index) => {
      if (index === 14) await fifteenth.opened;
      return { status: 500, body: "down" };
    });
    for (let i = 0; i < 5; i++) await space.item("things", { n: i });
    await until("the 15th attempt", () => failing.requests.length === 15, 20_000);

    const at14 = await space.getHook(hook.id);
    expect(at14).toMatchObject({ active: true, consecutiveFailures: 14, disabledReason: null });
    expect(at14.lastFailureAt).toMatch(ISO_INSTANT);
    expect(await autoDisabledAudit()).toEqual([]);
    expect(await autoDisabledNotifications()).toEqual([]);

    // An event while the 15th attempt is in flight: queued for the still-active hook.
    const queuedItem = await space.item("things", { n: "queued" });
    const queued = await until("the queued delivery", async () => {
      const list = await space.deliveries(hook.id, "?limit=200");
      return list.length === 6 ? list.find((d) => d.status === "pending") : undefined;
    });
    expect(queued.attemptCount).toBe(0);

    fifteenth.open();
    const disabled = await until("the breaker to trip", async () => {
      const current = await space.getHook(hook.id);
      return current.active ? undefined : current;
    });
    expect(disabled.consecutiveFailures).toBe(15);
    expect(disabled.disabledReason).toEqual(expect.any(String));
    expect(disabled.disabledReason.length).toBeGreaterThan(0);
    expect(disabled.lastFailureAt).toMatch(ISO_INSTANT);
    const listedRow = (await space.api("GET", "/webhooks")).body.webhooks.find((w: { id: string }) => w.id === hook.id);
    expect(listedRow).toMatchObject({
      active: false,
      consecutiveFailures: 15,
      disabledReason: disabled.disabledReason,
      lastFailureAt: disabled.lastFailureAt,
    });

    // The delivery queued before the trip becomes a terminal no-op.
    const skipped = await until("the queued delivery to be skipped", async () => {
      const [found] = await space.deliveries(hook.id, "?status=skipped");
      return found;
    });
    expect(skipped.id).toBe(queued.id);
    expect(skipped.attemptCount).toBe(0);
    expect(skipped.attempts).toEqual([]);
    const dead = await space.deliveries(hook.id, "?status=dead");
    expect(dead).toHaveLength(5);
    for (const delivery of dead) {
      expect(delivery.attemptCount).toBe(3);
      expect(delivery.attempts.map((a: { statusCode: number }) => a.statusCode)).toEqual([500, 500, 500]);
    }
    expect(failing.requests).toHaveLength(15);
    expect(failing.requests.map((r) => r.headers["x-service-delivery"])).not.toContain(queued.id);

    const audit = await autoDisabledAudit();
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({
      action: "webhook.auto_disabled",
      target: { type: "webhook", id: hook.id },
      data: { projectId: space.project.id, consecutiveFailures: 15 },
    });
    expect(JSON.stringify(audit[0])).not.toContain("breaker-secret");
    const notifications = await autoDisabledNotifications();
    expect(notifications).toHaveLength(1);
    expect(notifications[0].data).toMatchObject({ webhookId: hook.id });

    // New events no longer enqueue for it; the control hook proves the event was dispatched.
    const later = await space.item("things", { n: "after" });
    await until("the control hook to see the later item", () =>
      control.requests.some((r) => JSON.parse(r.body).data.id === later.id),
    );
    expect(control.requests.some((r) => JSON.parse(r.body).data.id === queuedItem.id)).toBe(true);
    expect(await space.deliveries(hook.id, "?limit=200")).toHaveLength(6);
    await sleep(200);
    expect(failing.requests).toHaveLength(15);

    // Resume: active again, counter 0, reason cleared.
    const resumed = await space.api("PATCH", `/webhooks/${hook.id}`, { active: true });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(resumed.body.webhook).toMatchObject({ active: true, consecutiveFailures: 0, disabledReason: null });
    expect(await space.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 0, disabledReason: null });

    // Two failures, then a 2xx: the counter reaches 2 and goes back to 0.
    const third = gate();
    const base = failing.requests.length;
    failing.respondWith(async (_request, index) => {
      if (index - base < 2) return { status: 500 };
      await third.opened;
      return { status: 204 };
    });
    await space.item("things", { n: "recovers" });
    await until("the third attempt after resuming", () => failing.requests.length === base + 3);
    expect(await space.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 2 });
    third.open();
    await until("the counter to reset", async () => (await space.getHook(hook.id)).consecutiveFailures === 0);
    const [latest] = await until("the recovered delivery", async () => {
      const list = await space.deliveries(hook.id);
      return list[0]?.status === "succeeded" ? list : undefined;
    });
    expect(latest.attempts.map((a: { statusCode: number }) => a.statusCode)).toEqual([500, 500, 204]);
    const ids = new Set(failing.requests.slice(base).map((r) => r.headers["x-service-delivery"]));
    expect([...ids]).toEqual([latest.id]);
    expect(await space.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 0, disabledReason: null });
    expect(await autoDisabledAudit()).toHaveLength(1);
    // The control hook never failed.
    expect(await space.getHook(watcher.id)).toMatchObject({ active: true, consecutiveFailures: 0 });
  });

  it("counts test sends like any attempt, and a trip ends the retries of deliveries it caught mid-way", async () => {
    await space.collection("tripwire");
    const flaky = await startReceiver(() => ({ status: 500, body: "down" }));
    try {
      const hook = await space.hook({ name: "tested", url: `${flaky.url}/tested`, events: ["items:tripwire"] });
      const test = async () => {
        const res = await space.api("POST", `/webhooks/${hook.id}/test`);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        return res.body.delivery;
      };
      for (let n = 1; n <= 3; n++) await test();
      expect(await space.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 3 });
      // `active: true` on a hook still active resets its counter too, and is no resume.
      const reset = await space.api("PATCH", `/webhooks/${hook.id}`, { active: true });
      expect(reset.body.webhook).toMatchObject({ active: true, consecutiveFailures: 0, disabledReason: null });
      for (let n = 1; n <= 3; n++) await test();
      expect(await space.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 3 });
      flaky.respondWith(() => ({ status: 204 }));
      expect(await test()).toMatchObject({ status: "succeeded" });
      expect(await space.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 0 });

      flaky.respondWith(() => ({ status: 500, body: "down" }));
      for (let n = 1; n <= 14; n++) await test();
      expect(await space.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 14 });
      // An event's first attempt is the 15th failure: the breaker trips, and that delivery, which
      // had retries left, becomes a terminal no-op instead of waiting for them.
      const item = await space.item("tripwire", { n: 1 });
      const tripped = await until("the breaker to trip", async () => {
        const current = await space.getHook(hook.id);
        return current.active ? undefined : current;
      });
      expect(tripped).toMatchObject({ active: false, consecutiveFailures: 15 });
      expect(tripped.disabledReason).toEqual(expect.any(String));
      expect((await autoDisabledAudit()).some((e) => e.target.id === hook.id)).toBe(true);
      const [caught] = (await space.deliveries(hook.id)).filter((d) => d.event === "items:tripwire:created");
      expect(caught).toMatchObject({ status: "skipped", attemptCount: 1 });

      // A switched-off hook's test sends still go out, and leave its counter alone.
      flaky.respondWith(() => ({ status: 200 }));
      expect(await test()).toMatchObject({ status: "succeeded" });
      expect(await space.getHook(hook.id)).toMatchObject({ active: false, consecutiveFailures: 15 });
      // Resumed, it does not send the delivery the trip ended.
      expect((await space.api("PATCH", `/webhooks/${hook.id}`, { active: true })).status).toBe(200);
      await sleep(300);
      expect(flaky.requests.filter((r) => r.body.includes(item.id))).toHaveLength(1);
      expect(await space.getHook(hook.id)).toMatchObject({ active: true, consecutiveFailures: 0 });
    } finally {
      await flaky.close();
    }
  });

  it("records every one of many test sends at once to a failing receiver, through the trip", async () => {
    const down = await startReceiver(() => ({ status: 500, body: "down" }));
    try {
      const hook = await space.hook({ name: "stampede", url: `${down.url}/stampede`, events: ["items:never"] });
      const sends = await Promise.all(Array.from({ length: 24 }, () => space.api("POST", `/webhooks/${hook.id}/test`)));
      expect(sends.map((r) => r.status)).toEqual(sends.map(() => 200));
      for (const send of sends) expect(send.body.delivery).toMatchObject({ attemptCount: 1, status: "dead" });
      expect(down.requests).toHaveLength(24);
      // The count stops where the trip left it: sends under way then do not move it past 15.
      expect(await space.getHook(hook.id)).toMatchObject({ active: false, consecutiveFailures: 15 });
    } finally {
      await down.close();
    }
  });

  it("skips deliveries queued for a hook switched off or deleted before their attempt", async () => {
    await space.collection("block");
    await space.collection("victims");
    const release = gate();
    const blocker = await startReceiver(async () => {
      await release.opened;
      return { status: 200 };
    });
    const victims = await startReceiver();
    try {
      await space.hook({ name: "blocker", url: `${blocker.url}/block`, events: ["items:block"] });
      const paused = await space.hook({ name: "paused", url: `${victims.url}/paused`, events: ["items:victims"] });
      const doomed = await space.hook({ name: "deleted", url: `${victims.url}/deleted`, events: ["items:victims"] });

      // The only worker slot is busy with the held request while the victims' deliveries queue up.
      await space.item("block", { n: 1 });
      await until("the held request", () => blocker.requests.length === 1);
      await space.item("victims", { n: 1 });
      const [queued] = await until("the queued delivery", async () => {
        const list = await space.deliveries(paused.id);
        return list.length === 1 && list[0].status === "pending" ? list : undefined;
      });
      expect((await space.api("PATCH", `/webhooks/${paused.id}`, { active: false })).status).toBe(200);
      expect((await space.api("DELETE", `/webhooks/${doomed.id}`)).status).toBe(204);
      release.open();

      const skipped = await until("the paused hook's delivery to be skipped", async () => {
        const [found] = await space.deliveries(paused.id, "?status=skipped");
        return found;
      });
      expect(skipped).toMatchObject({ id: queued.id, attemptCount: 0, attempts: [] });
      const doomedRow = await until("the deleted hook's delivery to be skipped", async () => {
        const row = await app.server.deps.db
          .selectFrom("webhook_deliveries")
          .select(["status", "attempts"])
          .where("target_id", "=", doomed.id)
          .executeTakeFirst();
        return row?.status === "skipped" ? row : undefined;
      });
      expect(doomedRow.attempts).toBe(0);
      await sleep(200);
      expect(victims.requests).toEqual([]);
      // Switched off by hand: no breaker reason, no failure counted.
      expect(await space.getHook(paused.id)).toMatchObject({
        active: false,
        consecutiveFailures: 0,
        disabledReason: null,
      });
    } finally {
      release.open();
      await blocker.close();
      await victims.close();
    }
  });
});

describe("manual retry of a delivery", () => {
  let app: TestApp;
  let space: Workspace;
  let receiver: Receiver;

  beforeAll(async () => {
    // Retries a second apart, so a manual retry lands between two automatic attempts.
    app = await startApp({ ...BASE_ENV, WEBHOOK_BACKOFF_BASE_MS: "1000" });
    receiver = await startReceiver(() => ({ status: 500, body: "down" }));
    const owner = await signUp(app);
    const { slug } = await createOrg(app, owner, "Retry Org");
    space = workspaceOf(app, await createProject(app, owner, slug, "Retry"));
    await space.collection("notes");
  });
  afterAll(async () => {
    await receiver?.close();
    await app?.close();
  });

  it("keeps the automatic retries of a delivery still being retried when the manual attempt fails", async () => {
    const hook = await space.hook({ name: "retried", url: `${receiver.url}/retried`, events: ["items:notes"] });
    await space.item("notes", { n: 1 });
    const [failed] = await until("the first attempt to fail", async () => {
      const list = await space.deliveries(hook.id);
      return list[0]?.status === "failed" ? list : undefined;
    });
    const retried = await space.api("POST", `/webhooks/_deliveries/${failed.id}/retry`);
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(retried.body.delivery).toMatchObject({ status: "failed", attemptCount: 2 });
    // The next automatic attempt still comes, and succeeds.
    receiver.respondWith(() => ({ status: 200 }));
    const done = await until("the automatic retry", async () => {
      const [found] = await space.deliveries(hook.id, "?status=succeeded");
      return found;
    });
    expect(done).toMatchObject({ id: failed.id, attemptCount: 3 });
    expect(await space.getHook(hook.id)).toMatchObject({ consecutiveFailures: 0 });
  });

  it("keeps a delivery a manual retry made succeed when an automatic attempt under way then fails", async () => {
    const held = gate();
    const overlap = await startReceiver(async (_request, index) => {
      if (index === 1) {
        // The automatic retry: held open while the manual one goes through, then refused.
        await held.opened;
        return { status: 500, body: "down" };
      }
      return index === 0 ? { status: 500, body: "down" } : { status: 200 };
    });
    try {
      const hook = await space.hook({ name: "overlap", url: `${overlap.url}/overlap`, events: ["items:notes"] });
      await space.item("notes", { n: 3 });
      await until("the automatic retry to be under way", () => overlap.requests.length === 2, 5_000);
      const [delivery] = await space.deliveries(hook.id);
      const retried = await space.api("POST", `/webhooks/_deliveries/${delivery.id}/retry`);
      expect(retried.body.delivery).toMatchObject({ status: "succeeded" });
      held.open();
      const settled = await until("the automatic attempt to be recorded", async () => {
        const [found] = await space.deliveries(hook.id);
        return found.attemptCount === 3 ? found : undefined;
      });
      expect(settled.status).toBe("succeeded");
      // Numbered in the order they were recorded: the manual attempt (which began after the
      // automatic one) is 2, the automatic one 3; never two of one number.
      const numbered = settled.attempts.map((a: { attempt: number; statusCode: number }) => [a.attempt, a.statusCode]);
      expect(numbered.sort()).toEqual([
        [1, 500],
        [2, 200],
        [3, 500],
      ]);
      await sleep(2_500);
      expect(overlap.requests).toHaveLength(3);
    } finally {
      held.open();
      await overlap.close();
    }
  });

  it("answers 404 for a delivery whose webhook was deleted, and changes nothing", async () => {
    receiver.respondWith(() => ({ status: 200 }));
    const hook = await space.hook({ name: "gone", url: `${receiver.url}/gone`, events: ["items:notes"] });
    await space.item("notes", { n: 2 });
    const [delivery] = await until("the delivery", async () => {
      const list = await space.deliveries(hook.id);
      return list[0]?.status === "succeeded" ? list : undefined;
    });
    expect((await space.api("DELETE", `/webhooks/${hook.id}`)).status).toBe(204);
    const before = receiver.at("/gone").length;
    const retried = await space.api("POST", `/webhooks/_deliveries/${delivery.id}/retry`);
    expect(retried.status).toBe(404);
    expect(retried.body.error.code).toBe("NOT_FOUND");
    expect(receiver.at("/gone")).toHaveLength(before);
    const row = await app.server.deps.db
      .selectFrom("webhook_deliveries")
      .select("status")
      .where("id", "=", delivery.id)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe("succeeded");
  });
});

// =============================================================================================
// Retention: the daily job's handler, called directly with the clock moved on.
// =============================================================================================

function runRetention(deps: Deps): Promise<void> {
  const run: JobRun = { job: {} as JobRun["job"], signal: new AbortController().signal };
  return deliveryJobs(deps)["webhooks.retention"]!.handle({}, run);
}

describe("workspace delivery retention", () => {
  const apps: TestApp[] = [];
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await startReceiver();
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await receiver?.close();
  });

  async function setUp(retentionDays: string) {
    const app = await startApp({ ...BASE_ENV, WEBHOOK_DELIVERIES_RETENTION_DAYS: retentionDays });
    apps.push(app);
    const owner = await signUp(app);
    const slug = (await createOrg(app, owner, "Retention Org")).slug;
    const space = workspaceOf(app, await createProject(app, owner, slug, "Retained"));
    const hook = await space.hook({ name: "kept?", url: `${receiver.url}/retention`, events: ["items"] });
    const testSend = async (): Promise<string> => {
      const res = await space.api("POST", `/webhooks/${hook.id}/test`);
      expect(res.status).toBe(200);
      return res.body.delivery.id;
    };
    const ids = async () => (await space.deliveries(hook.id, "?limit=200")).map((d) => d.id).sort();
    return { app, space, hook, testSend, ids };
  }

  it("deletes only deliveries (and their attempts) older than WEBHOOK_DELIVERIES_RETENTION_DAYS", async () => {
    const { app, space, hook, testSend, ids } = await setUp("2");
    const deps = app.server.deps;
    expect(deps.config.webhookDeliveriesRetentionDays).toBe(2);

    // Old: two test sends and a dispatched item event, at T0.
    await space.collection("old");
    await space.item("old", { n: 1 });
    const oldEvent = await until("the item event's delivery", async () => {
      const list = await space.deliveries(hook.id);
      return list.find((d) => d.event === "items:old:created" && d.status === "succeeded");
    });
    const old = [await testSend(), await testSend(), oldEvent.id];
    app.clock.advance(1.5 * DAY_MS);
    const middle = await testSend();
    // Nothing is two days old yet. (The scheduled run of the same job may fire from here on;
    // it does exactly what the direct calls below do.)
    expect(await ids()).toEqual([...old, middle].sort());
    app.clock.advance(1.5 * DAY_MS);
    const fresh = await testSend();

    // At T0 + 3 days the cut-off is T0 + 1 day: the three old rows go, 1.5 and 0 days old stay.
    await runRetention(deps);
    expect(await ids()).toEqual([middle, fresh].sort());
    const orphans = await deps.db.selectFrom("webhook_attempts").select("id").where("delivery_id", "in", old).execute();
    expect(orphans).toEqual([]);
    const kept = await deps.db
      .selectFrom("webhook_attempts")
      .select("delivery_id")
      .where("delivery_id", "in", [middle, fresh])
      .execute();
    expect(kept.map((row) => row.delivery_id).sort()).toEqual([middle, fresh].sort());

    // Running again changes nothing until time moves on.
    await runRetention(deps);
    expect(await ids()).toEqual([middle, fresh].sort());
    app.clock.advance(DAY_MS);
    await runRetention(deps);
    expect(await ids()).toEqual([fresh]);
  });

  it("keeps everything when WEBHOOK_DELIVERIES_RETENTION_DAYS is 0", async () => {
    const { app, testSend, ids } = await setUp("0");
    const deps = app.server.deps;
    expect(deps.config.webhookDeliveriesRetentionDays).toBe(0);
    const sent = [await testSend(), await testSend()];
    app.clock.advance(400 * DAY_MS);
    const late = await testSend();
    await runRetention(deps);
    expect(await ids()).toEqual([...sent, late].sort());
  });
});
