/**
 * What the org webhook tests (webhooks.test.ts, webhook-deliveries.test.ts) share: their apps'
 * configuration, a scripted receiver, and orgs with webhooks and their deliveries read back.
 */
import { expect } from "vitest";
import {
  call,
  createOrg,
  type ReceivedRequest,
  signUp,
  startReceiver,
  type TestApp,
  type TestUser,
  tag,
  until,
} from "./harness.ts";

/** The configuration every app of the org webhook tests shares: fast retries, fast polling, local receivers. */
export const BASE_ENV = {
  ALLOW_PRIVATE_WEBHOOK_URLS: "true",
  WEBHOOK_BACKOFF_BASE_MS: "20",
  WEBHOOK_MAX_ATTEMPTS: "4",
  WEBHOOK_TIMEOUT_MS: "2000",
  WORKER_POLL_MS: "50",
  AUTH_RATE_LIMIT_PER_MINUTE: "10000",
  RATE_LIMIT_PER_MINUTE: "100000",
};

const DELIVERY_KEYS = [
  "attemptCount",
  "attempts",
  "createdAt",
  "event",
  "id",
  "lastError",
  "lastStatusCode",
  "status",
  "updatedAt",
];

const receivers: { close(): Promise<void> }[] = [];

/**
 * What a receiver answers to one request: a status (with optional headers), `stall` (never
 * answer; the app's timeout ends the attempt), or `hold` (answer later, with `release`).
 */
export type ScriptedReply =
  | number
  | { status: number; headers?: Record<string, string>; body?: string }
  | "stall"
  | "hold";

/**
 * The harness receiver, answering from a script, then with `fallback` once the script runs out.
 * Webhooks point at `url` (`base` + `/hook`).
 */
export async function startScriptedReceiver(script: ScriptedReply[] = [], fallback: ScriptedReply = 200) {
  const queue = [...script];
  let otherwise = fallback;
  const held: Array<(status: number) => void> = [];
  const answer = (status: number) => ({ status, body: `receiver answered ${status}` });
  const receiver = await startReceiver(() => {
    const reply = queue.length > 0 ? (queue.shift() as ScriptedReply) : otherwise;
    if (reply === "stall") return new Promise<never>(() => {});
    if (reply === "hold") return new Promise((resolve) => held.push((status) => resolve(answer(status))));
    if (typeof reply === "number") return answer(reply);
    return { ...answer(reply.status), ...reply };
  });
  const scripted = {
    base: receiver.url,
    url: `${receiver.url}/hook`,
    requests: receiver.requests,
    /** Replaces what the next requests get. */
    script(replies: ScriptedReply[], then: ScriptedReply = otherwise) {
      queue.splice(0, queue.length, ...replies);
      otherwise = then;
    },
    /** Answers every held request with `status`. */
    release(status: number) {
      for (const respond of held.splice(0)) respond(status);
    },
    async waitForCount(count: number, timeoutMs = 10_000): Promise<ReceivedRequest[]> {
      await until(
        `${count} requests at the receiver (have ${receiver.requests.length})`,
        () => receiver.requests.length >= count,
        timeoutMs,
      );
      return receiver.requests;
    },
    close: () => receiver.close(),
  };
  receivers.push(scripted);
  return scripted;
}

export type ScriptedReceiver = Awaited<ReturnType<typeof startScriptedReceiver>>;

/** Closes every receiver started so far (in a file's afterAll). */
export async function closeScriptedReceivers(): Promise<void> {
  for (const receiver of receivers.splice(0)) await receiver.close();
}

export function expectDelivery(delivery: any): void {
  expect(Object.keys(delivery).sort()).toEqual(DELIVERY_KEYS);
  expect(["pending", "succeeded", "failed", "dead", "skipped"]).toContain(delivery.status);
  // Checked once the delivery has settled. While attempts are still being made, the list reads the
  // delivery and its attempts in two statements outside a transaction, so on PostgreSQL an attempt
  // that commits between them can show in `attempts` but not yet in `attemptCount` (reported).
  if (["succeeded", "dead", "skipped"].includes(delivery.status)) {
    expect(delivery.attemptCount).toBe(delivery.attempts.length);
  }
  delivery.attempts.forEach((attempt: any, index: number) => {
    expect(attempt.attempt).toBe(index + 1);
    expect(Number.isInteger(attempt.latencyMs)).toBe(true);
    expect(attempt.latencyMs).toBeGreaterThanOrEqual(0);
  });
}

export interface Org {
  owner: TestUser;
  slug: string;
  id: string;
}

export async function freshOrg(on: TestApp): Promise<Org> {
  const owner = await signUp(on);
  const org = await createOrg(on, owner, `Hooks ${tag()}`);
  return { owner, slug: org.slug, id: org.id };
}

export async function createHook(
  on: TestApp,
  org: Org,
  url: string,
  events: string[],
): Promise<{ webhook: any; secret: string }> {
  const res = await call(on, "POST", `/org/${org.slug}/webhooks`, { cookie: org.owner.cookie, body: { url, events } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

export async function listHooks(on: TestApp, org: Org): Promise<any[]> {
  const res = await call(on, "GET", `/org/${org.slug}/webhooks`, { cookie: org.owner.cookie });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.webhooks;
}

export async function getHook(on: TestApp, org: Org, id: string): Promise<any> {
  const hook = (await listHooks(on, org)).find((w) => w.id === id);
  if (!hook) throw new Error(`webhook ${id} not listed`);
  return hook;
}

export async function deliveries(on: TestApp, org: Org, hookId: string, query = ""): Promise<any[]> {
  const res = await call(on, "GET", `/org/${org.slug}/webhooks/${hookId}/deliveries${query}`, {
    cookie: org.owner.cookie,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(Object.keys(res.body)).toEqual(["deliveries"]);
  for (const delivery of res.body.deliveries) expectDelivery(delivery);
  return res.body.deliveries;
}
