import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliveryJobs } from "../src/domains/webhooks/delivery-jobs.ts";
import {
  call,
  hmacHex,
  type Mailbox,
  type ReceivedRequest,
  sleep,
  startApp,
  startMailbox,
  type TestApp,
  tag,
  uniqueEmail,
  until,
} from "./harness.ts";
import {
  BASE_ENV,
  closeScriptedReceivers,
  createHook,
  deliveries,
  expectDelivery,
  freshOrg,
  getHook,
  listHooks,
  type Org,
  type ScriptedReceiver,
  startScriptedReceiver,
} from "./org-webhooks.ts";

// What org webhooks send: signed deliveries of real events, retries and dead letters, the circuit
// breaker, test sends and the org's webhookUrl. CRUD and validation are in webhooks.test.ts.

// Network rule: deliveries only ever go to receivers on 127.0.0.1. Private and metadata addresses
// other than loopback appear only in URLs that the API must refuse before anything connects.

const HEX_SHA256 = /^[0-9a-f]{64}$/;
const DAY_MS = 86_400_000;

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

function header(req: ReceivedRequest, name: string): string {
  const value = req.headers[name.toLowerCase()];
  if (typeof value !== "string") throw new Error(`header ${name} missing or repeated: ${JSON.stringify(value)}`);
  return value;
}

/**
 * Checks one received delivery the way a receiver would: the body is exactly
 * `{event, payload, timestamp}` (timestamp in Unix seconds, near now), the headers are all there,
 * and both signatures match our own HMAC computation with `secret`.
 */
function expectSignedDelivery(req: ReceivedRequest, secret: string, event: string): any {
  expect(req.method).toBe("POST");
  expect(req.headers["content-type"]).toMatch(/^application\/json\b/);
  expect(header(req, "X-Service-Event")).toBe(event);
  expect(header(req, "X-Service-Delivery").length).toBeGreaterThan(0);

  const body = JSON.parse(req.body);
  expect(Object.keys(body).sort()).toEqual(["event", "payload", "timestamp"]);
  expect(body.event).toBe(event);
  expect(typeof body.payload).toBe("object");
  expect(body.payload).not.toBeNull();
  expect(Array.isArray(body.payload)).toBe(false);
  expect(Number.isInteger(body.timestamp)).toBe(true);
  // Seconds, not milliseconds: within a minute of now.
  expect(Math.abs(body.timestamp - Date.now() / 1000)).toBeLessThan(60);

  const timestamp = header(req, "X-Service-Timestamp");
  expect(timestamp).toMatch(/^\d+$/);
  expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(60);
  const signature = header(req, "X-Service-Signature");
  expect(signature).toMatch(HEX_SHA256);
  expect(signature).toBe(hmacHex(secret, req.body));
  const v2 = header(req, "X-Service-Signature-V2");
  expect(v2).toMatch(HEX_SHA256);
  expect(v2).toBe(hmacHex(secret, `${timestamp}.${req.body}`));
  return body;
}

/** Waits until the webhook has a delivery of `event` in a terminal status, and returns it. */
async function settledDelivery(on: TestApp, org: Org, hookId: string, event: string, timeoutMs = 10_000) {
  return until(
    `a settled ${event} delivery`,
    async () =>
      (await deliveries(on, org, hookId)).find(
        (d) => d.event === event && ["succeeded", "dead", "skipped"].includes(d.status),
      ),
    timeoutMs,
  );
}

/** Emits `member.invited` by inviting a new address. */
async function invite(on: TestApp, org: Org): Promise<string> {
  const email = uniqueEmail("invitee");
  const res = await call(on, "POST", `/org/${org.slug}/invitations`, {
    cookie: org.owner.cookie,
    body: { email, role: "viewer" },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return email;
}

async function projectStatus(on: TestApp, org: Org, projectSlug: string): Promise<any> {
  const res = await call(on, "GET", `/org/${org.slug}/projects/${projectSlug}`, { cookie: org.owner.cookie });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.project;
}

/** Creates a project and waits until provisioning settles in `status`. */
async function createProject(on: TestApp, org: Org, status: "active" | "failed", region?: string): Promise<any> {
  const res = await call(on, "POST", `/org/${org.slug}/projects`, {
    cookie: org.owner.cookie,
    body: { name: `Project ${tag()}`, ...(region ? { region } : {}) },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const slug = res.body.project.slug;
  return until(`project ${slug} ${status}`, async () => {
    const project = await projectStatus(on, org, slug);
    if (project.status !== "provisioning" && project.status !== status) {
      throw new Error(`project settled as ${project.status}, expected ${status}`);
    }
    return project.status === status ? project : undefined;
  });
}

async function lifecycle(on: TestApp, org: Org, projectSlug: string, action: "pause" | "resume"): Promise<any> {
  const res = await call(on, "POST", `/org/${org.slug}/projects/${projectSlug}/${action}`, {
    cookie: org.owner.cookie,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.project;
}

async function deliverJobs(on: TestApp): Promise<any[]> {
  const rows = await on.server.deps.db.selectFrom("jobs").selectAll().where("kind", "=", "webhook.deliver").execute();
  return rows.map((row) => ({
    ...row,
    payload: typeof row.payload === "string" ? JSON.parse(row.payload) : row.payload,
  }));
}

// ---------------------------------------------------------------------------------------------
// Delivery
// ---------------------------------------------------------------------------------------------

describe("delivery of real events", () => {
  let org: Org;
  let project: any;
  let pausedOnly: ScriptedReceiver;
  let everything: ScriptedReceiver;
  let hookPaused: { webhook: any; secret: string };
  let hookAll: { webhook: any; secret: string };

  beforeAll(async () => {
    org = await freshOrg(app);
    project = await createProject(app, org, "active");
    pausedOnly = await startScriptedReceiver();
    everything = await startScriptedReceiver();
    hookPaused = await createHook(app, org, pausedOnly.url, ["project.paused"]);
    hookAll = await createHook(app, org, everything.url, ["*"]);
  });

  it("delivers a signed {event, payload, timestamp} body to the hooks that subscribe", async () => {
    await lifecycle(app, org, project.slug, "pause");
    const [toPaused] = await pausedOnly.waitForCount(1);
    const [toAll] = await everything.waitForCount(1);

    for (const [req, hook] of [
      [toPaused!, hookPaused],
      [toAll!, hookAll],
    ] as const) {
      expect(req.path).toBe("/hook");
      const body = expectSignedDelivery(req, hook.secret, "project.paused");
      expect(body.payload).toMatchObject({ projectId: project.id, projectSlug: project.slug });
      // The signature is the receiver's to check with its own secret; another secret does not match.
      const otherSecret = hook === hookPaused ? hookAll.secret : hookPaused.secret;
      expect(header(req, "X-Service-Signature")).not.toBe(hmacHex(otherSecret, req.body));

      // X-Service-Delivery names the recorded delivery, which succeeded in one attempt.
      const delivery = await settledDelivery(app, org, hook.webhook.id, "project.paused");
      expect(header(req, "X-Service-Delivery")).toBe(delivery.id);
      expect(delivery).toMatchObject({ status: "succeeded", attemptCount: 1, lastStatusCode: 200, lastError: null });
      expect(delivery.attempts[0]).toMatchObject({ attempt: 1, statusCode: 200, error: null });
    }
    // Each webhook has its own delivery of the event.
    expect(header(toPaused!, "X-Service-Delivery")).not.toBe(header(toAll!, "X-Service-Delivery"));
  });

  it("sends member.invited and project.resumed to '*' but not to a project.paused hook", async () => {
    const email = await invite(app, org);
    const [, invited] = await everything.waitForCount(2);
    const invitedBody = expectSignedDelivery(invited!, hookAll.secret, "member.invited");
    expect(invitedBody.payload).toMatchObject({ email, role: "viewer" });

    await lifecycle(app, org, project.slug, "resume");
    const [, , resumed] = await everything.waitForCount(3);
    const resumedBody = expectSignedDelivery(resumed!, hookAll.secret, "project.resumed");
    expect(resumedBody.payload).toMatchObject({ projectId: project.id, projectSlug: project.slug });

    // Deliveries are recorded with the event they carry, newest first.
    await settledDelivery(app, org, hookAll.webhook.id, "project.resumed");
    expect((await deliveries(app, org, hookAll.webhook.id)).map((d) => d.event)).toEqual([
      "project.resumed",
      "member.invited",
      "project.paused",
    ]);
    // The project.paused hook got no delivery for either event: none recorded, none received.
    expect((await deliveries(app, org, hookPaused.webhook.id)).map((d) => d.event)).toEqual(["project.paused"]);
    expect(pausedOnly.requests).toHaveLength(1);
    expect(everything.requests).toHaveLength(3);
  });

  it("stops delivering to a deactivated webhook", async () => {
    const off = await call(app, "PATCH", `/org/${org.slug}/webhooks/${hookPaused.webhook.id}`, {
      cookie: org.owner.cookie,
      body: { active: false },
    });
    expect(off.status).toBe(200);
    await lifecycle(app, org, project.slug, "pause");
    await everything.waitForCount(4);
    await settledDelivery(app, org, hookAll.webhook.id, "project.paused");
    expect((await deliveries(app, org, hookPaused.webhook.id)).map((d) => d.event)).toEqual(["project.paused"]);
    expect(pausedOnly.requests).toHaveLength(1);
  });
});

describe("project.provisioned and project.failed (SERVED_REGIONS=fra)", () => {
  let regional: TestApp;
  let org: Org;

  beforeAll(async () => {
    regional = await startApp({ ...BASE_ENV, SERVED_REGIONS: "fra" });
    org = await freshOrg(regional);
  });
  afterAll(() => regional?.close());

  it("emits project.failed for a region the deployment does not serve, and project.provisioned otherwise", async () => {
    const receiver = await startScriptedReceiver();
    const { webhook, secret } = await createHook(regional, org, receiver.url, ["project.*"]);

    const failed = await createProject(regional, org, "failed", "sjc");
    const [first] = await receiver.waitForCount(1);
    const failedBody = expectSignedDelivery(first!, secret, "project.failed");
    expect(failedBody.payload).toMatchObject({ projectId: failed.id, projectSlug: failed.slug });
    expect(String(failedBody.payload.reason)).toContain("sjc");

    const active = await createProject(regional, org, "active", "fra");
    const [, second] = await receiver.waitForCount(2);
    const provisionedBody = expectSignedDelivery(second!, secret, "project.provisioned");
    expect(provisionedBody.payload).toMatchObject({ projectId: active.id, projectSlug: active.slug });

    await settledDelivery(regional, org, webhook.id, "project.provisioned");
    const history = await deliveries(regional, org, webhook.id);
    expect(history.map((d) => [d.event, d.status])).toEqual([
      ["project.provisioned", "succeeded"],
      ["project.failed", "succeeded"],
    ]);
    expect(receiver.requests).toHaveLength(2);
  });

  it("deletes deliveries older than WEBHOOK_DELIVERIES_RETENTION_DAYS with their attempts; 0 keeps all", async () => {
    const deps = regional.server.deps;
    const countRows = async () => ({
      deliveries: (await deps.db.selectFrom("webhook_deliveries").select("id").execute()).length,
      attempts: (await deps.db.selectFrom("webhook_attempts").select("id").execute()).length,
    });
    const before = await countRows();
    expect(before.deliveries).toBeGreaterThanOrEqual(2);
    expect(before.attempts).toBeGreaterThanOrEqual(2);
    const runRetention = async (days: number, aheadMs: number) => {
      const later = new Date(Date.now() + aheadMs);
      const handlers = deliveryJobs({
        ...deps,
        clock: { now: () => later },
        config: { ...deps.config, webhookDeliveriesRetentionDays: days },
      });
      await handlers["webhooks.retention"]!.handle({}, { job: {} as never, signal: new AbortController().signal });
    };
    expect(deps.config.webhookDeliveriesRetentionDays).toBe(30);
    await runRetention(30, 29 * DAY_MS);
    expect(await countRows()).toEqual(before);
    await runRetention(0, 1_000 * DAY_MS);
    expect(await countRows()).toEqual(before);
    await runRetention(30, 31 * DAY_MS);
    expect(await countRows()).toEqual({ deliveries: 0, attempts: 0 });
  });
});

// ---------------------------------------------------------------------------------------------
// Retries and dead letters
// ---------------------------------------------------------------------------------------------

describe("retries", () => {
  it("retries a failing receiver: 2 × 500 then 200 is 3 requests of one delivery", async () => {
    const org = await freshOrg(app);
    const receiver = await startScriptedReceiver([500, 500], 200);
    const { webhook, secret } = await createHook(app, org, receiver.url, ["member.invited"]);
    await invite(app, org);

    const delivery = await settledDelivery(app, org, webhook.id, "member.invited");
    await sleep(300); // room for an extra attempt that must not come
    expect(receiver.requests).toHaveLength(3);
    const ids = receiver.requests.map((req) => header(req, "X-Service-Delivery"));
    expect(new Set(ids).size).toBe(1);
    expect(ids[0]).toBe(delivery.id);
    // The body is the same bytes each time, and every attempt is signed.
    expect(new Set(receiver.requests.map((req) => req.body)).size).toBe(1);
    for (const req of receiver.requests) expectSignedDelivery(req, secret, "member.invited");

    expect(delivery).toMatchObject({ status: "succeeded", attemptCount: 3, lastStatusCode: 200, lastError: null });
    expect(delivery.attempts.map((a: any) => a.statusCode)).toEqual([500, 500, 200]);
    expect(delivery.attempts.map((a: any) => a.attempt)).toEqual([1, 2, 3]);
    for (const attempt of delivery.attempts) {
      expect(Number.isInteger(attempt.latencyMs)).toBe(true);
      expect(attempt.latencyMs).toBeGreaterThanOrEqual(0);
      expect(attempt.responseBody).toBe(`receiver answered ${attempt.statusCode}`);
    }
    expect(delivery.attempts[0].error).toEqual(expect.any(String));
    expect(delivery.attempts[2].error).toBeNull();
    // A success after failures leaves the webhook healthy.
    expect(await getHook(app, org, webhook.id)).toMatchObject({ active: true, consecutiveFailures: 0 });
  });

  it("stops retrying a delivery once its webhook's org is deleted: the retry is skipped, not sent", async () => {
    const org = await freshOrg(app);
    const receiver = await startScriptedReceiver(["hold"], 500);
    await createHook(app, org, receiver.url, ["member.invited"]);
    await invite(app, org);
    const [first] = await receiver.waitForCount(1);
    const deliveryId = header(first!, "X-Service-Delivery");
    expect((await call(app, "DELETE", `/org/${org.slug}`, { cookie: org.owner.cookie })).status).toBe(200);
    receiver.release(500);
    const status = async () =>
      (
        await app.server.deps.db
          .selectFrom("webhook_deliveries")
          .select("status")
          .where("id", "=", deliveryId)
          .executeTakeFirst()
      )?.status;
    await until("the retry skipped", async () => (await status()) === "skipped");
    await sleep(300);
    expect(receiver.requests).toHaveLength(1);
  });

  it("dead-letters a delivery after WEBHOOK_MAX_ATTEMPTS (4) failures", async () => {
    const org = await freshOrg(app);
    const receiver = await startScriptedReceiver([], 503);
    const { webhook } = await createHook(app, org, receiver.url, ["*"]);
    await invite(app, org);

    const delivery = await settledDelivery(app, org, webhook.id, "member.invited");
    await sleep(400); // a fifth attempt would come within the backoff of 20 × 2^3 ms
    expect(receiver.requests).toHaveLength(4);
    expect(new Set(receiver.requests.map((req) => header(req, "X-Service-Delivery")))).toEqual(new Set([delivery.id]));
    expect(delivery).toMatchObject({ status: "dead", attemptCount: 4, lastStatusCode: 503 });
    expect(delivery.lastError).toEqual(expect.any(String));
    expect(delivery.attempts.map((a: any) => a.statusCode)).toEqual([503, 503, 503, 503]);
    for (const attempt of delivery.attempts) expect(attempt.error).toEqual(expect.any(String));

    const job = (await deliverJobs(app)).find((row) => row.payload.deliveryId === delivery.id);
    expect(job).toBeDefined();
    expect(job).toMatchObject({ status: "dead", attempts: 4, max_attempts: 4 });
    expect(job.last_error).toEqual(expect.any(String));
    expect(job.finished_at).not.toBeNull();

    expect((await deliveries(app, org, webhook.id, "?status=dead")).map((d) => d.id)).toEqual([delivery.id]);
    expect(await deliveries(app, org, webhook.id, "?status=succeeded")).toEqual([]);
    expect(await getHook(app, org, webhook.id)).toMatchObject({ active: true, consecutiveFailures: 4 });
  });

  it("ends a delivery dead, unsent, when the worker running its last attempt stopped", async () => {
    // A server that runs no jobs queues the delivery; its job is then left as a worker killed
    // during the last attempt leaves it, and a worker sharing the database claims it once lapsed.
    const server = await startApp({ ...BASE_ENV, WORKERS: "0" });
    let worker: TestApp | undefined;
    try {
      const org = await freshOrg(server);
      const receiver = await startScriptedReceiver([], 200);
      const { webhook } = await createHook(server, org, receiver.url, ["member.invited"]);
      await invite(server, org);
      const [queued] = await deliverJobs(server);
      expect(queued).toMatchObject({ status: "pending", max_attempts: 4 });
      await server.server.deps.db
        .updateTable("jobs")
        .set({
          status: "running",
          attempts: 4,
          locked_by: "wrk_killed",
          lease_until: new Date(Date.now() - 1_000).toISOString(),
        })
        .where("id", "=", queued.id)
        .execute();

      worker = await startApp(BASE_ENV, { shareDatabaseWith: server });
      const delivery = await settledDelivery(server, org, webhook.id, "member.invited");
      expect(delivery).toMatchObject({
        id: queued.payload.deliveryId,
        status: "dead",
        attemptCount: 0,
        lastStatusCode: null,
        lastError: "the worker running the last attempt stopped before it finished (its lease lapsed)",
      });
      const [job] = await deliverJobs(server);
      expect(job).toMatchObject({ id: queued.id, status: "dead", attempts: 4, locked_by: null });
      expect(job.last_error).toBe(delivery.lastError);
      expect(job.finished_at).not.toBeNull();
      await sleep(300);
      expect(receiver.requests).toHaveLength(0);
      // The receiver never failed: the webhook's breaker has nothing to count.
      expect(await getHook(server, org, webhook.id)).toMatchObject({ active: true, consecutiveFailures: 0 });
    } finally {
      await worker?.close();
      await server.close();
    }
  });

  it("counts a receiver that stalls past WEBHOOK_TIMEOUT_MS as a failed attempt, then retries", async () => {
    const org = await freshOrg(app);
    const receiver = await startScriptedReceiver(["stall"], 200);
    const { webhook } = await createHook(app, org, receiver.url, ["member.invited"]);
    await invite(app, org);

    const delivery = await settledDelivery(app, org, webhook.id, "member.invited", 15_000);
    expect(receiver.requests).toHaveLength(2);
    expect(header(receiver.requests[0]!, "X-Service-Delivery")).toBe(delivery.id);
    expect(header(receiver.requests[1]!, "X-Service-Delivery")).toBe(delivery.id);
    expect(delivery).toMatchObject({ status: "succeeded", attemptCount: 2 });
    const [timedOut, ok] = delivery.attempts;
    expect(timedOut).toMatchObject({ attempt: 1, statusCode: null, responseBody: null });
    expect(timedOut.error).toMatch(/time/i);
    expect(timedOut.latencyMs).toBeGreaterThanOrEqual(1_900);
    expect(ok).toMatchObject({ attempt: 2, statusCode: 200, error: null });
  });

  it("records an attempt in time when the worker's WEBHOOK_TIMEOUT_MS is longer than the one that queued it", async () => {
    // A worker process waiting 60 s on a receiver, and a server (no jobs) that queued the delivery
    // with its own 1 s: the job's deadline is the server's, so the attempt ends within it and is
    // recorded, instead of the job being cut off with nothing written and the delivery left pending.
    const worker = await startApp({ ...BASE_ENV, WEBHOOK_TIMEOUT_MS: "60000" });
    const server = await startApp(
      { ...BASE_ENV, WORKERS: "0", WEBHOOK_TIMEOUT_MS: "1000" },
      { shareDatabaseWith: worker },
    );
    try {
      const org = await freshOrg(server);
      const receiver = await startScriptedReceiver(["stall"], 200);
      const { webhook } = await createHook(server, org, receiver.url, ["member.invited"]);
      await invite(server, org);
      const delivery = await settledDelivery(server, org, webhook.id, "member.invited", 15_000);
      expect(delivery).toMatchObject({ status: "succeeded", attemptCount: 2 });
      expect(delivery.attempts[0]).toMatchObject({ attempt: 1, statusCode: null, error: "timed out after 1000 ms" });
      expect(delivery.attempts[1]).toMatchObject({ attempt: 2, statusCode: 200 });
    } finally {
      await server.close();
      await worker.close();
    }
  });

  it("stores each attempt's response body cut to 2 KiB", async () => {
    const org = await freshOrg(app);
    const long = "x".repeat(5_000);
    const receiver = await startScriptedReceiver([{ status: 500, body: long }], 200);
    const { webhook } = await createHook(app, org, receiver.url, ["member.invited"]);
    await invite(app, org);
    const delivery = await settledDelivery(app, org, webhook.id, "member.invited");
    expect(delivery.attempts.map((a: any) => a.statusCode)).toEqual([500, 200]);
    expect(delivery.attempts[0].responseBody).toBe(long.slice(0, 2048));
    expect(delivery.attempts[1].responseBody).toBe("receiver answered 200");
  });

  it("records a response body holding NUL characters (PostgreSQL text cannot), and sends once", async () => {
    const org = await freshOrg(app);
    const receiver = await startScriptedReceiver([{ status: 200, body: "ok\u0000then\u0000more" }], 200);
    const { webhook } = await createHook(app, org, receiver.url, ["member.invited"]);
    await invite(app, org);
    const delivery = await settledDelivery(app, org, webhook.id, "member.invited");
    expect(delivery).toMatchObject({ status: "succeeded", attemptCount: 1, lastStatusCode: 200 });
    expect(delivery.attempts[0].responseBody).toBe("ok\uFFFDthen\uFFFDmore");
    await sleep(200);
    expect(receiver.requests).toHaveLength(1);
  });

  it("does not follow a redirect: a 3xx is a failed attempt", async () => {
    const org = await freshOrg(app);
    const receiver = await startScriptedReceiver([], 200);
    receiver.script([{ status: 302, headers: { location: `${receiver.base}/elsewhere` } }], 200);
    const { webhook } = await createHook(app, org, receiver.url, ["member.invited"]);
    await invite(app, org);

    const delivery = await settledDelivery(app, org, webhook.id, "member.invited");
    expect(delivery.attempts.map((a: any) => a.statusCode)).toEqual([302, 200]);
    expect(receiver.requests.map((req) => req.path)).toEqual(["/hook", "/hook"]);
  });
});

// ---------------------------------------------------------------------------------------------
// Circuit breaker
// ---------------------------------------------------------------------------------------------

describe("circuit breaker", () => {
  // One attempt per delivery and one job at a time: each emitted event is exactly one attempt,
  // and attempts happen in order.
  let breakerApp: TestApp;
  let org: Org;
  let projectSlug: string;
  let paused = false;

  /** Pauses or resumes the project, whichever it allows: one event per call. */
  async function emitOne(): Promise<void> {
    await lifecycle(breakerApp, org, projectSlug, paused ? "resume" : "pause");
    paused = !paused;
  }

  beforeAll(async () => {
    breakerApp = await startApp({ ...BASE_ENV, WEBHOOK_MAX_ATTEMPTS: "1", WORKERS: "1", WEBHOOK_CONCURRENCY: "1" });
    org = await freshOrg(breakerApp);
    projectSlug = (await createProject(breakerApp, org, "active")).slug;
  });
  afterAll(() => breakerApp?.close());

  async function autoDisabledAudit(): Promise<any[]> {
    const res = await call(breakerApp, "GET", `/org/${org.slug}/audit?action=webhook.auto_disabled`, {
      cookie: org.owner.cookie,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.events;
  }

  async function settledCount(hookId: string): Promise<number> {
    const all = await deliveries(breakerApp, org, hookId, "?limit=200");
    return all.filter((d) => ["succeeded", "dead", "skipped"].includes(d.status)).length;
  }

  it("trips at exactly 15 consecutive failures, not at 14; a 2xx resets the count", async () => {
    const receiver = await startScriptedReceiver([500, 500, 500, 200], 500);
    const { webhook } = await createHook(breakerApp, org, receiver.url, ["project.paused", "project.resumed"]);
    const id = webhook.id;

    // Three failures, then a success: the count goes back to 0.
    for (let i = 1; i <= 3; i++) {
      await emitOne();
      await until(`${i} settled deliveries`, async () => (await settledCount(id)) === i);
    }
    const afterThree = await getHook(breakerApp, org, id);
    expect(afterThree).toMatchObject({ active: true, consecutiveFailures: 3, disabledReason: null });
    expect(afterThree.lastFailureAt).toEqual(expect.any(String));
    // `active: true` on a webhook still active resets the count as well.
    const reset = await call(breakerApp, "PATCH", `/org/${org.slug}/webhooks/${id}`, {
      cookie: org.owner.cookie,
      body: { active: true },
    });
    expect(reset.body.webhook).toMatchObject({ active: true, consecutiveFailures: 0 });
    await emitOne();
    await until("the 4th delivery", async () => (await settledCount(id)) === 4);
    expect(await getHook(breakerApp, org, id)).toMatchObject({ active: true, consecutiveFailures: 0 });

    // Fourteen consecutive failures: still active.
    for (let i = 0; i < 14; i++) await emitOne();
    await until("18 settled deliveries", async () => (await settledCount(id)) === 18, 20_000);
    expect(receiver.requests).toHaveLength(18);
    const at14 = await getHook(breakerApp, org, id);
    expect(at14).toMatchObject({ active: true, consecutiveFailures: 14, disabledReason: null });
    expect(await autoDisabledAudit()).toEqual([]);

    // The 15th: hold its answer so a second delivery is queued before the breaker trips.
    receiver.script(["hold"], 500);
    await emitOne();
    await receiver.waitForCount(19);
    await emitOne();
    const queued = await until("the queued delivery", async () => {
      const [newest] = await deliveries(breakerApp, org, id);
      return newest && newest.event === (paused ? "project.paused" : "project.resumed") && newest.status === "pending"
        ? newest
        : undefined;
    });
    receiver.release(500);

    const disabled = await until("the breaker", async () => {
      const hook = await getHook(breakerApp, org, id);
      return hook.active ? undefined : hook;
    });
    expect(disabled.consecutiveFailures).toBe(15);
    expect(disabled.disabledReason).toEqual(expect.any(String));
    expect(disabled.disabledReason.length).toBeGreaterThan(0);
    expect(disabled.lastFailureAt).toEqual(expect.any(String));

    // The delivery queued before the breaker tripped ends as skipped and never reaches the receiver.
    const skipped = await until("the skipped delivery", async () =>
      (await deliveries(breakerApp, org, id)).find((d) => d.id === queued.id && d.status === "skipped"),
    );
    expect(skipped.attempts).toEqual([]);
    await sleep(200);
    expect(receiver.requests).toHaveLength(19);
    expect((await getHook(breakerApp, org, id)).consecutiveFailures).toBe(15);

    const audit = await autoDisabledAudit();
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ action: "webhook.auto_disabled", target: { type: "webhook", id } });

    const notifications = await call(breakerApp, "GET", `/org/${org.slug}/notifications`, {
      cookie: org.owner.cookie,
    });
    expect(notifications.status).toBe(200);
    expect(notifications.body.notifications.map((n: any) => n.kind)).toContain("webhook.auto_disabled");

    // New events do not enqueue for a disabled webhook.
    const before = (await deliveries(breakerApp, org, id, "?limit=200")).length;
    await emitOne();
    await sleep(200);
    expect((await deliveries(breakerApp, org, id, "?limit=200")).length).toBe(before);
    expect(receiver.requests).toHaveLength(19);

    // PATCH {active: true} resumes with a fresh count, and deliveries flow again.
    receiver.script([], 200);
    const resumed = await call(breakerApp, "PATCH", `/org/${org.slug}/webhooks/${id}`, {
      cookie: org.owner.cookie,
      body: { active: true },
    });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(resumed.body.webhook).toMatchObject({ active: true, consecutiveFailures: 0, disabledReason: null });
    expect(await getHook(breakerApp, org, id)).toMatchObject({
      active: true,
      consecutiveFailures: 0,
      disabledReason: null,
    });
    await emitOne();
    await receiver.waitForCount(20);
    const [latest] = await until("the delivery after resuming", async () => {
      const list = await deliveries(breakerApp, org, id);
      return list[0]?.status === "succeeded" ? list : undefined;
    });
    expect(latest.attemptCount).toBe(1);
    expect(await autoDisabledAudit()).toHaveLength(1);
  });
  it("skips a delivery queued before its webhook is deleted or deactivated", async () => {
    const db = breakerApp.server.deps.db;
    for (const hook of await listHooks(breakerApp, org)) {
      expect(
        (await call(breakerApp, "DELETE", `/org/${org.slug}/webhooks/${hook.id}`, { cookie: org.owner.cookie })).status,
      ).toBe(204);
    }
    const receiver = await startScriptedReceiver([], 200);
    for (const action of ["delete", "deactivate"] as const) {
      const { webhook } = await createHook(breakerApp, org, receiver.url, ["project.paused", "project.resumed"]);
      const before = receiver.requests.length;
      receiver.script(["hold"], 200);
      await emitOne();
      await receiver.waitForCount(before + 1);
      const inFlight = header(receiver.requests[before]!, "X-Service-Delivery");
      await emitOne();
      const queued = await until("the queued delivery", async () =>
        (await deliveries(breakerApp, org, webhook.id)).find((d) => d.id !== inFlight && d.status === "pending"),
      );
      const path = `/org/${org.slug}/webhooks/${webhook.id}`;
      const res =
        action === "delete"
          ? await call(breakerApp, "DELETE", path, { cookie: org.owner.cookie })
          : await call(breakerApp, "PATCH", path, { cookie: org.owner.cookie, body: { active: false } });
      expect(res.status).toBe(action === "delete" ? 204 : 200);
      receiver.release(200);

      const row = (id: string) =>
        db.selectFrom("webhook_deliveries").select(["status", "attempts"]).where("id", "=", id).executeTakeFirst();
      await until(
        `the queued delivery skipped after ${action}`,
        async () => (await row(queued.id))?.status === "skipped",
      );
      expect(await row(queued.id)).toMatchObject({ status: "skipped", attempts: 0 });
      // The attempt already under way when the webhook changed is recorded as it went.
      await until("the in-flight delivery settled", async () => (await row(inFlight))?.status === "succeeded");
      // The skipped delivery's job ended without being retried: a delivery's job that succeeds
      // (a skip is a success) is deleted, and a retry would have left it pending.
      await until(
        "the skipped job finished",
        async () => !(await deliverJobs(breakerApp)).some((j) => j.payload.deliveryId === queued.id),
      );
      await sleep(150);
      expect(receiver.requests).toHaveLength(before + 1);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Test send
// ---------------------------------------------------------------------------------------------

describe("POST /webhooks/{id}/test", () => {
  it("sends one signed webhook.test delivery now, even when the webhook's events never match", async () => {
    const org = await freshOrg(app);
    const receiver = await startScriptedReceiver();
    const { webhook, secret } = await createHook(app, org, receiver.url, ["billing.plan_change"]);

    const res = await call(app, "POST", `/webhooks/${webhook.id}/test`, { cookie: org.owner.cookie });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(Object.keys(res.body)).toEqual(["delivery"]);
    const { delivery } = res.body;
    expectDelivery(delivery);
    expect(delivery).toMatchObject({
      event: "webhook.test",
      status: "succeeded",
      attemptCount: 1,
      lastStatusCode: 200,
    });
    expect(delivery.attempts[0]).toMatchObject({ attempt: 1, statusCode: 200, error: null });

    // The attempt happened before the response: no waiting.
    expect(receiver.requests).toHaveLength(1);
    const req = receiver.requests[0]!;
    const body = expectSignedDelivery(req, secret, "webhook.test");
    expect(body.payload.webhookId).toBe(webhook.id);
    expect(header(req, "X-Service-Delivery")).toBe(delivery.id);

    expect(await deliveries(app, org, webhook.id)).toEqual([delivery]);
    await sleep(200);
    expect(receiver.requests).toHaveLength(1);
    // Audited, naming the delivery it made.
    const audit = await call(app, "GET", `/org/${org.slug}/audit?action=webhook.tested`, { cookie: org.owner.cookie });
    expect(audit.body.events).toHaveLength(1);
    expect(audit.body.events[0]).toMatchObject({
      target: { type: "webhook", id: webhook.id },
      data: { deliveryId: delivery.id },
    });
  });

  it("reports a failing receiver in the returned delivery after its one attempt", async () => {
    const org = await freshOrg(app);
    const receiver = await startScriptedReceiver([], 500);
    const { webhook } = await createHook(app, org, receiver.url, ["*"]);
    const res = await call(app, "POST", `/webhooks/${webhook.id}/test`, { cookie: org.owner.cookie });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.delivery).toMatchObject({ event: "webhook.test", attemptCount: 1, lastStatusCode: 500 });
    expect(res.body.delivery.status).not.toBe("succeeded");
    expect(res.body.delivery.attempts).toHaveLength(1);
    expect(res.body.delivery.attempts[0]).toMatchObject({ statusCode: 500 });
    await sleep(300);
    expect(receiver.requests).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------
// org.webhookUrl
// ---------------------------------------------------------------------------------------------

describe("org webhookUrl", () => {
  it("returns webhookSecret once, and signs every event to the org URL with it", async () => {
    const org = await freshOrg(app);
    const receiver = await startScriptedReceiver();

    const set = await call(app, "PATCH", `/org/${org.slug}`, {
      cookie: org.owner.cookie,
      body: { webhookUrl: receiver.url },
    });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.org.webhookUrl).toBe(receiver.url);
    const secret: string = set.body.webhookSecret;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);

    const read = await call(app, "GET", `/org/${org.slug}/overview`, { cookie: org.owner.cookie });
    expect(read.status).toBe(200);
    expect(read.body.org.webhookUrl).toBe(receiver.url);
    expect(JSON.stringify(read.body)).not.toContain(secret);
    const renamed = await call(app, "PATCH", `/org/${org.slug}`, {
      cookie: org.owner.cookie,
      body: { name: `Renamed ${tag()}` },
    });
    expect(renamed.status).toBe(200);
    expect(renamed.body.webhookSecret).toBeUndefined();
    expect(JSON.stringify(renamed.body)).not.toContain(secret);

    const email = await invite(app, org);
    const [req] = await receiver.waitForCount(1);
    const body = expectSignedDelivery(req!, secret, "member.invited");
    expect(body.payload).toMatchObject({ email, role: "viewer" });

    // No webhooks are involved: the org URL alone receives it, exactly once.
    expect(await listHooks(app, org)).toEqual([]);
    await sleep(200);
    expect(receiver.requests).toHaveLength(1);

    // A new URL gets a new secret, and the next event is signed with it.
    const moved = await startScriptedReceiver();
    const reset = await call(app, "PATCH", `/org/${org.slug}`, {
      cookie: org.owner.cookie,
      body: { webhookUrl: moved.url },
    });
    expect(reset.status, JSON.stringify(reset.body)).toBe(200);
    const second: string = reset.body.webhookSecret;
    expect(second).toMatch(/^whsec_/);
    expect(second).not.toBe(secret);
    await invite(app, org);
    const [movedReq] = await moved.waitForCount(1);
    expectSignedDelivery(movedReq!, second, "member.invited");
    expect(receiver.requests).toHaveLength(1);

    // Cleared: nothing more is sent.
    const cleared = await call(app, "PATCH", `/org/${org.slug}`, {
      cookie: org.owner.cookie,
      body: { webhookUrl: null },
    });
    expect(cleared.status).toBe(200);
    expect(cleared.body.org.webhookUrl).toBeNull();
    expect(cleared.body.webhookSecret).toBeUndefined();
    await invite(app, org);
    await sleep(300);
    expect(moved.requests).toHaveLength(1);
  });
});
