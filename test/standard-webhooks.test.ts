import { randomBytes } from "node:crypto";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signatureHeaders } from "../src/domains/webhooks/signing.ts";
import {
  call,
  callWorkspace,
  createActiveProject,
  createOrg,
  type Mailbox,
  type ReceivedRequest,
  type Receiver,
  signUp,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
  type TestUser,
  uniqueEmail,
  until,
} from "./harness.ts";

/**
 * Standard Webhooks (DESIGN §14): every signed delivery, org and workspace, carries `webhook-id`,
 * `webhook-timestamp` and `webhook-signature` beside the X-Service-* headers. Real deliveries to
 * real receivers, each verified with the `standardwebhooks` package as a receiver would, with the
 * constructor the README names for its kind of secret.
 */

const ENV = {
  ALLOW_PRIVATE_WEBHOOK_URLS: "true",
  WORKER_POLL_MS: "50",
  WEBHOOK_BACKOFF_BASE_MS: "20",
  WEBHOOK_MAX_ATTEMPTS: "3",
  AUTH_RATE_LIMIT_PER_MINUTE: "10000",
  RATE_LIMIT_PER_MINUTE: "1000000",
};

/** What Plinth generates: `whsec_` and 32 random bytes in standard base64. */
const GENERATED_SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

/** The three Standard Webhooks headers of a received request, each there exactly once. */
function standardHeaders(request: ReceivedRequest): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
    const value = request.headers[name];
    if (typeof value !== "string") throw new Error(`${name} missing or repeated: ${JSON.stringify(value)}`);
    picked[name] = value;
  }
  return picked;
}

/** Checks a received delivery's Standard Webhooks headers against its X-Service-* ones, and verifies it with `webhook`. */
function expectVerified(request: ReceivedRequest, webhook: Webhook): Record<string, string> {
  const headers = standardHeaders(request);
  expect(headers["webhook-id"]).toBe(request.headers["x-service-delivery"]);
  expect(headers["webhook-timestamp"]).toBe(request.headers["x-service-timestamp"]);
  expect(headers["webhook-timestamp"]).toMatch(/^\d{10}$/);
  expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
  expect(webhook.verify(request.raw, headers)).toEqual(JSON.parse(request.body));
  return headers;
}

function expectRefused(verify: () => unknown): void {
  expect(verify).toThrow(WebhookVerificationError);
}

describe("the Standard Webhooks key of each kind of secret", () => {
  const body = JSON.stringify({ event: "webhook.test", payload: { emoji: "☃" }, timestamp: 1 });
  const signed = (secret: string) => signatureHeaders(secret, "dlv_key_check", body, Math.floor(Date.now() / 1000));
  const decoded = (secret: string) => new Webhook(secret);
  const raw = (secret: string) => new Webhook(Buffer.from(secret, "utf8"), { format: "raw" });

  it.each([
    ["a secret Plinth generates now", `whsec_${randomBytes(32).toString("base64")}`],
    ["a secret generated before (base64url, 24 bytes) without - or _", "whsec_0123456789abcdefABCDEFGHijklmnop"],
    ["one chosen as whsec_ + padded base64", "whsec_c2VjcmV0IGtleQ=="],
  ])("%s: the decoded bytes, as new Webhook(secret) reads them", (_label, secret) => {
    expect(decoded(secret).verify(body, signed(secret))).toEqual(JSON.parse(body));
    expectRefused(() => raw(secret).verify(body, signed(secret)));
  });

  it.each([
    // standardwebhooks refuses these characters, so a receiver is told at once to use the raw format.
    ["a secret generated before with - or _", "whsec_0123456789abcdef-BCDEF_hijklmnop"],
    ["an admin's secret with - and !", "my-hook-secret!"],
    ["plain base64 without whsec_", "c2VjcmV0IGJ5dGVz"],
    ["whsec_ alone", "whsec_"],
    // Decodable by lenient readers, but not canonical base64: two such secrets could share a key.
    ["unpadded base64 after whsec_", "whsec_c2VjcmV0IGtleQ"],
    ["non-zero pad bits after whsec_", "whsec_QR=="],
    ["a character past the last group", "whsec_c2VjcmV0Z"],
    ["non-ASCII characters", "clé secrète ☃"],
  ])("%s: its UTF-8 bytes, as new Webhook(bytes, { format: 'raw' }) reads them", (_label, secret) => {
    expect(raw(secret).verify(body, signed(secret))).toEqual(JSON.parse(body));
    let reader: Webhook;
    try {
      reader = decoded(secret);
    } catch {
      return;
    }
    expectRefused(() => reader.verify(body, signed(secret)));
  });

  it("signs the id and timestamp: another id, another timestamp or another body fails", () => {
    const secret = `whsec_${randomBytes(32).toString("base64")}`;
    const now = Math.floor(Date.now() / 1000);
    const headers = signatureHeaders(secret, "dlv_a", body, now);
    const webhook = new Webhook(secret);
    expectRefused(() => webhook.verify(`${body} `, headers));
    expectRefused(() => webhook.verify(body, { ...headers, "webhook-id": "dlv_b" }));
    expectRefused(() => webhook.verify(body, { ...headers, "webhook-timestamp": String(now - 1) }));
    expect(webhook.verify(body, headers)).toEqual(JSON.parse(body));
  });
});

describe("Standard Webhooks headers on real deliveries", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let owner: TestUser;
  let slug: string;
  let project: { id: string; adminToken: string };
  /** Answers 500 to the first request on a path under /flaky (moving the app's clock 3 s on, so
   * the retry gets another timestamp), 200 to everything else. */
  let receiver: Receiver;

  const orgCall = (method: string, path: string, body?: unknown) =>
    call(app, method, `/org/${slug}${path}`, { cookie: owner.cookie, body });
  const workspace = (method: string, path: string, body?: unknown) =>
    callWorkspace(app, project.id, method, path, { token: project.adminToken, body });

  async function invite(): Promise<void> {
    const res = await orgCall("POST", "/invitations", { email: uniqueEmail("invitee"), role: "viewer" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  }

  async function attemptHeaders(deliveryId: string): Promise<Array<Record<string, string>>> {
    const rows = await app.server.deps.db
      .selectFrom("webhook_attempts")
      .select("request_headers")
      .where("delivery_id", "=", deliveryId)
      .orderBy("attempt")
      .execute();
    return rows.map((row) => JSON.parse(String(row.request_headers)));
  }

  beforeAll(async () => {
    mailbox = await startMailbox();
    app = await startApp({ ...ENV, SMTP_URL: mailbox.url });
    const seen = new Set<string>();
    receiver = await startReceiver((request) => {
      if (!request.path.startsWith("/flaky") || seen.has(request.path)) return { status: 200 };
      seen.add(request.path);
      app.clock.advance(3_000);
      return { status: 500 };
    });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Standard Webhooks Org")).slug;
    project = await createActiveProject(app, owner, slug, "Standard");
    const collection = await workspace("POST", "/collections", { slug: "notes" });
    expect(collection.status, JSON.stringify(collection.body)).toBe(201);
  });
  afterAll(async () => {
    await app?.close();
    await receiver?.close();
    await mailbox?.close();
  });

  it("an org webhook's generated secret: its test send verifies with new Webhook(secret); a tampered body does not", async () => {
    const created = await orgCall("POST", "/webhooks", { url: `${receiver.url}/org-test`, events: ["*"] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const { webhook, secret } = created.body;
    expect(secret).toMatch(GENERATED_SECRET);
    expect(Buffer.from(secret.slice("whsec_".length), "base64")).toHaveLength(32);

    const tested = await call(app, "POST", `/webhooks/${webhook.id}/test`, { cookie: owner.cookie });
    expect(tested.status, JSON.stringify(tested.body)).toBe(200);
    const [request] = receiver.at("/org-test");
    const headers = expectVerified(request!, new Webhook(secret));
    expect(headers["webhook-id"]).toBe(tested.body.delivery.id);
    expectRefused(() => new Webhook(secret).verify(Buffer.from(`${request!.body} `), headers));
    expectRefused(() => new Webhook(`whsec_${randomBytes(32).toString("base64")}`).verify(request!.raw, headers));

    // Recorded with the attempt as sent, lower-case as the spec writes them; the secret never is.
    const [recorded] = await attemptHeaders(tested.body.delivery.id);
    expect(recorded).toMatchObject(headers);
    expect(JSON.stringify(recorded)).not.toContain(secret.slice("whsec_".length));
  });

  it("a retried org delivery keeps its webhook-id, and each attempt verifies with its own timestamp", async () => {
    const created = await orgCall("POST", "/webhooks", {
      url: `${receiver.url}/flaky-org`,
      events: ["member.invited"],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const webhook = new Webhook(created.body.secret);
    await invite();
    const [first, second] = await until("the first attempt and its retry", () => {
      const requests = receiver.at("/flaky-org");
      return requests.length >= 2 && (requests as [ReceivedRequest, ReceivedRequest]);
    });
    const firstHeaders = expectVerified(first, webhook);
    const secondHeaders = expectVerified(second, webhook);
    expect(secondHeaders["webhook-id"]).toBe(firstHeaders["webhook-id"]);
    expect(second.raw.equals(first.raw)).toBe(true);
    expect(Number(secondHeaders["webhook-timestamp"])).toBeGreaterThanOrEqual(
      Number(firstHeaders["webhook-timestamp"]) + 3,
    );
    // The first attempt's signature does not cover the retry's timestamp.
    expectRefused(() =>
      webhook.verify(second.raw, {
        ...secondHeaders,
        "webhook-signature": firstHeaders["webhook-signature"] as string,
      }),
    );
  });

  it("the org webhookUrl's secret verifies with new Webhook(secret)", async () => {
    const set = await orgCall("PATCH", "", { webhookUrl: `${receiver.url}/org-url` });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    const secret: string = set.body.webhookSecret;
    expect(secret).toMatch(GENERATED_SECRET);
    await invite();
    const request = await receiver.waitFor("the org URL's delivery", (r) => r.path === "/org-url");
    expect(JSON.parse(request.body)).toMatchObject({ event: "member.invited" });
    const headers = expectVerified(request, new Webhook(secret));
    expectRefused(() => new Webhook(secret).verify(request.body.replace("member.invited", "member.invitee"), headers));
    const cleared = await orgCall("PATCH", "", { webhookUrl: null });
    expect(cleared.status, JSON.stringify(cleared.body)).toBe(200);
  });

  it("a workspace hook's own secret, not base64: test sends and retried events verify with the raw format", async () => {
    const secret = "ws-hook-secret!2024";
    expect(() => new Webhook(secret)).toThrow();
    const created = await workspace("POST", "/webhooks", {
      name: "raw secret",
      url: `${receiver.url}/flaky-workspace`,
      events: ["items:notes:created"],
      secret,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const webhook = new Webhook(secret, { format: "raw" });

    const item = await workspace("POST", "/items/notes", { title: "signed", emoji: "☃" });
    expect(item.status, JSON.stringify(item.body)).toBe(201);
    const [first, second] = await until("the first attempt and its retry", () => {
      const requests = receiver.at("/flaky-workspace");
      return requests.length >= 2 && (requests as [ReceivedRequest, ReceivedRequest]);
    });
    const firstHeaders = expectVerified(first, webhook);
    const secondHeaders = expectVerified(second, webhook);
    expect(secondHeaders["webhook-id"]).toBe(firstHeaders["webhook-id"]);
    expect(Number(secondHeaders["webhook-timestamp"])).toBeGreaterThanOrEqual(
      Number(firstHeaders["webhook-timestamp"]) + 3,
    );
    expectRefused(() => webhook.verify(Buffer.from(second.body.replace("signed", "forged")), secondHeaders));

    const tested = await workspace("POST", `/webhooks/${created.body.webhook.id}/test`);
    expect(tested.status, JSON.stringify(tested.body)).toBe(200);
    const test = await receiver.waitFor(
      "the test send",
      (r) => r.path === "/flaky-workspace" && r.headers["x-service-event"] === "webhook.test",
    );
    expect(expectVerified(test, webhook)["webhook-id"]).toBe(tested.body.delivery.id);
  });

  it("a workspace hook whose secret is whsec_ + standard base64 verifies with new Webhook(secret)", async () => {
    const secret = `whsec_${randomBytes(24).toString("base64")}`;
    const created = await workspace("POST", "/webhooks", {
      name: "base64 secret",
      url: `${receiver.url}/workspace-base64`,
      events: ["items:notes:created"],
      secret,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const tested = await workspace("POST", `/webhooks/${created.body.webhook.id}/test`);
    expect(tested.status, JSON.stringify(tested.body)).toBe(200);
    const [request] = receiver.at("/workspace-base64");
    const headers = expectVerified(request!, new Webhook(secret));
    // The key is the decoded bytes, not the text of the secret.
    expectRefused(() => new Webhook(secret, { format: "raw" }).verify(request!.raw, headers));
  });

  it("a workspace hook without a secret sends no Standard Webhooks headers", async () => {
    const created = await workspace("POST", "/webhooks", {
      name: "unsigned",
      url: `${receiver.url}/unsigned`,
      events: ["items:none"],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect((await workspace("POST", `/webhooks/${created.body.webhook.id}/test`)).status).toBe(200);
    const [request] = receiver.at("/unsigned");
    expect(request!.headers["x-service-delivery"]).toEqual(expect.any(String));
    for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
      expect(request!.headers[name], name).toBeUndefined();
    }
  });
});
