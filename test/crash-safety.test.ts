/**
 * Crash safety and concurrency of webhook deliveries (issue 3), with real processes: the CLI
 * (`node --import tsx src/main.ts serve|worker`) as child processes, and real receivers
 * (node:http on 127.0.0.1) in this process.
 *
 * - A `plinth serve` process killed (SIGKILL) while a receiver stalls on a delivery: after a
 *   restart on the same database the delivery arrives again, once its job's lease has lapsed,
 *   with the same `X-Service-Delivery`, and is recorded as succeeded.
 * - On PostgreSQL (DATABASE_URL set): two `plinth worker` processes and an API-only
 *   `plinth serve` (WORKERS=0) share one schema; 1,000 deliveries produced through the API are
 *   each received exactly once, and both workers take part.
 *
 * SQLite uses a temp DATA_DIR; PostgreSQL a fresh schema `t_<random>` in DATABASE_URL's
 * database, dropped afterwards.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { type ReceivedRequest, type Receiver, type Responder, sleep, startReceiver, until } from "./harness.ts";
import { freePort } from "./ports.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const DATABASE_URL = process.env.DATABASE_URL;
const AUTH_SECRET = "crash-test-secret-crash-test-secret-0123";

const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch {
      // best effort
    }
  }
});

// ---------------------------------------------------------------------------------------------
// The database one deployment shares

interface Store {
  /** DATA_DIR, and DATABASE_URL + DATABASE_SCHEMA on PostgreSQL. */
  env: Record<string, string>;
  schema: string | undefined;
}

/** A temp DATA_DIR (the SQLite file, or just the auth secret's home) and, on PostgreSQL, a fresh schema. */
function freshStore(): Store {
  const dataDir = mkdtempSync(path.join(tmpdir(), "plinth-crash-"));
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  if (!DATABASE_URL) return { env: { DATA_DIR: dataDir }, schema: undefined };
  const schema = `t_${randomBytes(6).toString("hex")}`;
  // Registered before any process starts, so it runs after every process has been killed.
  cleanups.push(async () => {
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      await client.query(`drop schema if exists ${schema} cascade`);
    } finally {
      await client.end();
    }
  });
  return { env: { DATA_DIR: dataDir, DATABASE_URL, DATABASE_SCHEMA: schema }, schema };
}

// ---------------------------------------------------------------------------------------------
// Plinth processes

interface PlinthProcess {
  child: ChildProcess;
  url: string;
  exited: Promise<number | null>;
  output(): string;
}

function spawnPlinth(command: "serve" | "worker", env: Record<string, string>): PlinthProcess {
  // NODE_ENV=production: libraries relax some checks under vitest's NODE_ENV=test.
  const childEnv: Record<string, string | undefined> = { ...process.env, NODE_ENV: "production" };
  delete childEnv.DATABASE_URL;
  delete childEnv.DATABASE_SCHEMA;
  delete childEnv.TEST;
  delete childEnv.VITEST;
  Object.assign(childEnv, { HOST: "127.0.0.1", AUTH_SECRET, LOG_LEVEL: "warn" }, env);
  const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "src/main.ts"), command], {
    cwd: ROOT,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString("utf8")).slice(-20_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await exited;
    }
  });
  return { child, url: `http://127.0.0.1:${env.PORT ?? 0}`, exited, output: () => output };
}

async function startServe(env: Record<string, string>): Promise<PlinthProcess> {
  const port = await freePort();
  const plinth = spawnPlinth("serve", { ...env, PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` });
  let exitCode: number | null | undefined;
  void plinth.exited.then((code) => {
    exitCode = code;
  });
  await until(
    "plinth serve to become healthy",
    async () => {
      if (exitCode !== undefined) throw new Error(`plinth serve exited (${exitCode}):\n${plinth.output()}`);
      try {
        return (await fetch(`${plinth.url}/api/health`)).ok || undefined;
      } catch {
        return undefined;
      }
    },
    30_000,
  );
  return plinth;
}

/** Starts `plinth worker` and waits for its "running" log line (so it logs at info). */
async function startWorkerProcess(env: Record<string, string>): Promise<PlinthProcess> {
  const plinth = spawnPlinth("worker", { ...env, LOG_LEVEL: "info" });
  await until(
    "plinth worker to start",
    () => {
      if (plinth.child.exitCode !== null) throw new Error(`plinth worker exited:\n${plinth.output()}`);
      return plinth.output().includes("plinth worker running") || undefined;
    },
    30_000,
  );
  return plinth;
}

// ---------------------------------------------------------------------------------------------
// The HTTP API

interface Session {
  url: string;
  cookie: string;
}

async function api(session: Session, method: string, pathname: string, body?: unknown) {
  const response = await fetch(`${session.url}/api${pathname}`, {
    method,
    headers: { cookie: session.cookie, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as any };
}

/** Calls the API as `session`; its answer's body, once the status is `status`. */
async function callExpecting(
  session: Session,
  method: string,
  pathname: string,
  status: number,
  body?: unknown,
): Promise<any> {
  const res = await api(session, method, pathname, body);
  if (res.status !== status) {
    throw new Error(`${method} ${pathname}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
  }
  return res.body;
}

async function signUp(url: string): Promise<Session> {
  const response = await fetch(`${url}/api/auth/sign-up/email`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      email: `crash-${randomBytes(4).toString("hex")}@example.test`,
      password: "correct-horse-battery",
      name: "Crash Tester",
    }),
  });
  if (response.status !== 200) throw new Error(`sign-up failed: ${response.status} ${await response.text()}`);
  const cookie = response.headers
    .getSetCookie()
    .find((c) => c.includes(".session_token="))
    ?.split(";")[0];
  if (!cookie) throw new Error("sign-up returned no session cookie");
  return { url, cookie };
}

async function createActiveProject(session: Session, slug: string, name: string): Promise<string> {
  const created = await callExpecting(session, "POST", `/org/${slug}/projects`, 201, { name });
  const projectSlug = created.project.slug as string;
  await until(
    `project ${projectSlug} to become active`,
    async () => {
      const { project } = await callExpecting(session, "GET", `/org/${slug}/projects/${projectSlug}`, 200);
      if (project.status === "failed") throw new Error(`provisioning failed: ${project.failureReason}`);
      return project.status === "active" || undefined;
    },
    30_000,
  );
  return projectSlug;
}

// ---------------------------------------------------------------------------------------------
// Receivers

/** A receiver that is closed after the test; webhooks point at `{url}/hook`. */
async function startHookReceiver(responder: Responder): Promise<Receiver> {
  const receiver = await startReceiver(responder);
  cleanups.push(() => receiver.close());
  return receiver;
}

const deliveryOf = (request: ReceivedRequest) => String(request.headers["x-service-delivery"] ?? "");
const eventOf = (request: ReceivedRequest) => String(request.headers["x-service-event"] ?? "");

// ---------------------------------------------------------------------------------------------

describe("crash safety: a process killed mid-delivery", () => {
  it("delivers again after a restart, once the lease lapses, with the same X-Service-Delivery", async () => {
    const store = freshStore();
    const env = {
      ...store.env,
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      WEBHOOK_TIMEOUT_MS: "1000",
      WEBHOOK_BACKOFF_BASE_MS: "50",
      WORKER_POLL_MS: "100",
      LOG_LEVEL: "warn",
    };

    // The first request is never answered; later ones get a 200.
    let stalled: ((request: ReceivedRequest) => void) | undefined;
    const firstSeen = new Promise<ReceivedRequest>((resolve) => {
      stalled = resolve;
    });
    let redelivered: ((request: ReceivedRequest) => void) | undefined;
    const secondSeen = new Promise<ReceivedRequest>((resolve) => {
      redelivered = resolve;
    });
    const receiver = await startHookReceiver((request, index) => {
      if (index === 0) {
        stalled?.(request);
        return new Promise<never>(() => {});
      }
      redelivered?.(request);
      return { status: 200, body: "ok" };
    });

    const first = await startServe(env);
    const session = await signUp(first.url);
    const { org } = await callExpecting(session, "POST", "/org", 201, { name: "Crash Org" });
    const { webhook } = await callExpecting(session, "POST", `/org/${org.slug}/webhooks`, 201, {
      url: `${receiver.url}/hook`,
      events: ["project.paused"],
    });
    const projectSlug = await createActiveProject(session, org.slug, "Crash Project");
    await callExpecting(session, "POST", `/org/${org.slug}/projects/${projectSlug}/pause`, 200);

    const stalledEntry = await Promise.race([
      firstSeen,
      sleep(15_000).then(() => {
        throw new Error(`the receiver saw no delivery within 15 s:\n${first.output()}`);
      }),
    ]);
    first.child.kill("SIGKILL");
    await first.exited;
    const killedAt = Date.now();
    expect(eventOf(stalledEntry)).toBe("project.paused");
    expect(deliveryOf(stalledEntry)).toMatch(/^dlv_/);

    // Same database, new process. The job is still `running` under the dead worker's lease
    // (timeout 1 s + 5 s, lease = timeout + 5 s), so it is claimed again when that lapses.
    const second = await startServe(env);
    const again = await Promise.race([
      secondSeen,
      sleep(30_000).then(() => {
        throw new Error(`the delivery did not arrive again within 30 s of the restart:\n${second.output()}`);
      }),
    ]);
    expect(deliveryOf(again)).toBe(deliveryOf(stalledEntry));
    expect(eventOf(again)).toBe("project.paused");
    expect(again.body).toBe(stalledEntry.body);
    expect(JSON.parse(again.body)).toMatchObject({ event: "project.paused", payload: { projectSlug } });
    // Not before the lease could have lapsed (it was taken before the first request was sent).
    expect(again.at - stalledEntry.at).toBeGreaterThanOrEqual(10_000);
    expect(again.at - killedAt).toBeLessThan(30_000);

    const restarted: Session = { url: second.url, cookie: session.cookie };
    const delivery = await until(
      "the delivery to be recorded as succeeded",
      async () => {
        const { deliveries } = await callExpecting(
          restarted,
          "GET",
          `/org/${org.slug}/webhooks/${webhook.id}/deliveries`,
          200,
        );
        const found = (deliveries as any[]).find((d) => d.id === deliveryOf(stalledEntry));
        return found?.status === "succeeded" ? found : undefined;
      },
      10_000,
    );
    expect(delivery.event).toBe("project.paused");
    expect(delivery.lastStatusCode).toBe(200);
    expect(delivery.attempts.at(-1)).toMatchObject({ statusCode: 200, error: null });
    // Every request the receiver saw was this one delivery: the one cut off, then its redelivery.
    expect(receiver.requests.map(deliveryOf)).toEqual([deliveryOf(stalledEntry), deliveryOf(stalledEntry)]);

    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  }, 90_000);
});

describe.runIf(DATABASE_URL)("concurrency on PostgreSQL: two worker processes", () => {
  it("deliver 1,000 deliveries, each exactly once, both workers taking part", async () => {
    const started = Date.now();
    const store = freshStore();
    const env = {
      ...store.env,
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      WEBHOOK_TIMEOUT_MS: "5000",
      WORKER_POLL_MS: "100",
      RATE_LIMIT_PER_MINUTE: "1000000",
    };

    // A fast receiver that holds each request a few ms, so leases are visibly held while it runs.
    const counts = new Map<string, number>();
    const receiver = await startHookReceiver((request) => {
      counts.set(deliveryOf(request), (counts.get(deliveryOf(request)) ?? 0) + 1);
      return new Promise((resolve) => setTimeout(() => resolve({ status: 200, body: "ok" }), 2 + Math.random() * 3));
    });

    // The API process migrates the fresh schema first; then the workers join it.
    const serve = await startServe({ ...env, WORKERS: "0" });
    await startWorkerProcess({ ...env, WORKERS: "8" });
    await startWorkerProcess({ ...env, WORKERS: "8" });

    const session = await signUp(serve.url);
    const { org } = await callExpecting(session, "POST", "/org", 201, { name: "Concurrency Org" });
    const CHAINS = 10;
    const PAIRS_PER_CHAIN = 50;
    // Provisioned by the worker processes (serve runs no jobs).
    const projects = await Promise.all(
      Array.from({ length: CHAINS }, (_, i) => createActiveProject(session, org.slug, `Chain ${i}`)),
    );
    // Created once the projects are active, so its deliveries are exactly the 1,000 below.
    const { webhook } = await callExpecting(session, "POST", `/org/${org.slug}/webhooks`, 201, {
      url: `${receiver.url}/hook`,
      events: ["*"],
    });

    // Which workers hold leases on deliveries, sampled while they are delivered.
    const sampler = new pg.Client({ connectionString: DATABASE_URL, options: `-c search_path=${store.schema}` });
    await sampler.connect();
    cleanups.push(() => sampler.end());
    const lockers = new Set<string>();
    let sampling = true;
    const sampled = (async () => {
      while (sampling) {
        const { rows } = await sampler.query<{ locked_by: string }>(
          "select distinct locked_by from jobs where kind = 'webhook.deliver' and status = 'running' and locked_by is not null",
        );
        for (const row of rows) lockers.add(row.locked_by);
        await sleep(10);
      }
    })();

    // 10 projects × 50 pause/resume pairs = 1,000 events, each with one delivery.
    await Promise.all(
      projects.map(async (projectSlug) => {
        const base = `/org/${org.slug}/projects/${projectSlug}`;
        for (let i = 0; i < PAIRS_PER_CHAIN; i++) {
          await callExpecting(session, "POST", `${base}/pause`, 200);
          await callExpecting(session, "POST", `${base}/resume`, 200);
        }
      }),
    );
    const total = CHAINS * PAIRS_PER_CHAIN * 2;

    await until("every delivery to arrive", () => counts.size >= total || undefined, 60_000);
    // Give a late duplicate a chance to show up before counting.
    await sleep(1_000);
    sampling = false;
    await sampled;

    // The deliveries the API says were queued, all succeeded.
    const ids: string[] = [];
    const statuses = new Map<string, number>();
    for (let offset = 0; ; offset += 200) {
      const { deliveries } = await callExpecting(
        session,
        "GET",
        `/org/${org.slug}/webhooks/${webhook.id}/deliveries?limit=200&offset=${offset}`,
        200,
      );
      for (const d of deliveries as any[]) {
        ids.push(d.id);
        statuses.set(d.status, (statuses.get(d.status) ?? 0) + 1);
      }
      if (deliveries.length < 200) break;
    }
    expect(ids).toHaveLength(total);
    expect(new Set(ids).size).toBe(total);
    expect(Object.fromEntries(statuses)).toEqual({ succeeded: total });

    // Every delivery arrived, and exactly once.
    expect([...counts.keys()].sort()).toEqual([...ids].sort());
    const doubled = [...counts].filter(([, n]) => n !== 1);
    expect(doubled).toEqual([]);
    expect(receiver.requests).toHaveLength(total);
    const events = new Map<string, number>();
    for (const r of receiver.requests) events.set(eventOf(r), (events.get(eventOf(r)) ?? 0) + 1);
    expect(Object.fromEntries(events)).toEqual({ "project.paused": total / 2, "project.resumed": total / 2 });

    // The queue is drained, and a succeeded delivery's job is deleted: none is left.
    const { rows: jobs } = await sampler.query<{ kind: string; status: string }>("select kind, status from jobs");
    expect(jobs.filter((j) => j.status === "pending" || j.status === "running")).toEqual([]);
    expect(jobs.filter((j) => j.kind === "webhook.deliver")).toEqual([]);
    // Each delivery was attempted once (no lease expired, nothing retried).
    const { rows: attempts } = await sampler.query<{ attempt: number; n: string }>(
      "select attempt, count(*) as n from webhook_attempts group by attempt",
    );
    expect(attempts.map((a) => ({ attempt: Number(a.attempt), n: Number(a.n) }))).toEqual([{ attempt: 1, n: total }]);

    // Both worker processes held delivery leases (serve runs no jobs: WORKERS=0).
    expect(lockers.size).toBe(2);
    expect(Date.now() - started).toBeLessThan(90_000);
  }, 120_000);
});
