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
import Database from "better-sqlite3";
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
  /** PostgreSQL: a connection a test holds a lock on, and how it lets go. */
  pg?: pg.Client;
  release?: () => Promise<void>;
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
  // The max plan: no cap on projects (a test here makes more than the free plan's two).
  Object.assign(childEnv, { HOST: "127.0.0.1", AUTH_SECRET, LOG_LEVEL: "warn", DEFAULT_PLAN: "max" }, env);
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

describe("crash safety: a process killed during a restore", () => {
  it("leaves the workspace as it was before the restore, and serving", async () => {
    const store = freshStore();
    const env = { ...store.env, RATE_LIMIT_PER_MINUTE: "100000", LOG_LEVEL: "warn" };
    const first = await startServe(env);
    const session = await signUp(first.url);
    const { org } = await callExpecting(session, "POST", "/org", 201, { name: "Restore Crash" });
    const created = await callExpecting(session, "POST", `/org/${org.slug}/projects`, 201, { name: "Interrupted" });
    const {
      id: projectId,
      slug: projectSlug,
      adminToken,
    } = created.project as { id: string; slug: string; adminToken: string };
    await until("the project to be active", async () => {
      const { project } = await callExpecting(session, "GET", `/org/${org.slug}/projects/${projectSlug}`, 200);
      return project.status === "active" || undefined;
    });
    const project = { id: projectId };
    const workspace = async (url: string, method: string, route: string, body?: unknown) => {
      const response = await fetch(`${url}/w/${project.id}/api${route}`, {
        method,
        headers: {
          authorization: `Bearer ${adminToken}`,
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
      });
      return { status: response.status, body: (await response.json().catch(() => undefined)) as any };
    };
    expect((await workspace(first.url, "POST", "/collections", { slug: "things" })).status).toBe(201);
    expect((await workspace(first.url, "POST", "/items/things", { kept: true })).status).toBe(201);
    await sleep(30);
    const instant = Date.now();
    await sleep(30);

    // What the restore will have to undo: many rows (so that it takes a while), written after the
    // instant, through the workspace's own history like any write.
    const rows = DATABASE_URL ? 5_000 : 300_000;
    const count = await bulkInsert(store, project.id, rows);
    expect(count).toBe(rows + 1);

    const restoring = api(session, "POST", `/org/${org.slug}/projects/${projectSlug}/restore`, {
      timestamp: instant,
    }).catch(() => "killed");
    if (DATABASE_URL) {
      // The restore is held in the middle: its first delete waits to record itself in the history.
      await until("the restore to wait on the held lock", async () => {
        // Its first change waits to be recorded (pg_stat_activity's text lags behind the
        // statement a trigger runs, so the lock table says it).
        const { rows: waiting } = await (store.pg as pg.Client).query(
          "select 1 from pg_locks where not granted and relation = '_history'::regclass",
        );
        return waiting.length > 0 || undefined;
      });
    } else {
      // SQLite: the restore, on a thread of its own, holds the workspace's write lock while it
      // changes the rows: a writer that may not wait is refused meanwhile.
      const file = path.join(store.env.DATA_DIR as string, "workspaces", `${project.id}.db`);
      await until("the restore to hold the write lock", () => {
        const db = new Database(file);
        try {
          db.pragma("busy_timeout = 0");
          db.exec("begin immediate");
          db.exec("rollback");
          return undefined;
        } catch {
          return true;
        } finally {
          db.close();
        }
      });
    }
    // Reads go on meanwhile, and see the workspace as it was.
    const read = await workspace(first.url, "GET", "/items/things?limit=1");
    expect(read.status).toBe(200);
    first.child.kill("SIGKILL");
    await first.exited;
    expect(await restoring).toBe("killed");
    await store.release?.();

    expect(await itemCount(store, project.id)).toBe(rows + 1);
    const second = await startServe(env);
    const page = await workspace(second.url, "GET", "/items/things?limit=1");
    expect(page.status).toBe(200);
    expect((await workspace(second.url, "POST", "/items/things", { after: true })).status).toBe(201);
    expect(await itemCount(store, project.id)).toBe(rows + 2);
    // And the restore, asked again, completes.
    const again = await api(
      { url: second.url, cookie: session.cookie },
      "POST",
      `/org/${org.slug}/projects/${projectSlug}/restore`,
      {
        timestamp: instant,
      },
    );
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(await itemCount(store, project.id)).toBe(1);
  }, 120_000);
});

/** Items written straight into the workspace (history records them: its triggers run). */
async function bulkInsert(store: Store, projectId: string, rows: number): Promise<number> {
  if (!DATABASE_URL) {
    const db = new Database(path.join(store.env.DATA_DIR as string, "workspaces", `${projectId}.db`));
    db.pragma("busy_timeout = 5000");
    db.transaction(() => {
      db.exec("update _history_clock set at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')");
      db.prepare(
        `with recursive n(i) as (select 1 union all select i + 1 from n where i < ?)
         insert into items (id, collection, data, created_at, updated_at)
         select 'itm_bulk' || i, 'things', json_object('i', i), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now') from n`,
      ).run(rows);
    })();
    const n = db.prepare("select count(*) from items").pluck().get() as number;
    db.close();
    return n;
  }
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  const schema = `ws_${projectId.toLowerCase()}`;
  await client.query(`set search_path to ${schema}`);
  await client.query(
    `insert into items (id, collection, data, created_at, updated_at)
     select 'itm_bulk' || i, 'things', json_build_object('i', i)::text, now()::text, now()::text from generate_series(1, $1) i`,
    [rows],
  );
  const { rows: counted } = await client.query("select count(*)::int as n from items");
  // Held until the server is killed: the restore's changes wait on it to be recorded.
  await client.query("begin");
  await client.query("lock table _history in share mode");
  store.pg = client;
  store.release = async () => {
    await client.query("commit");
    await client.end();
  };
  cleanups.push(() => client.end().catch(() => {}));
  return counted[0].n as number;
}

async function itemCount(store: Store, projectId: string): Promise<number> {
  if (!DATABASE_URL) {
    const db = new Database(path.join(store.env.DATA_DIR as string, "workspaces", `${projectId}.db`));
    const n = db.prepare("select count(*) from items").pluck().get() as number;
    db.close();
    return n;
  }
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query(`select count(*)::int as n from ws_${projectId.toLowerCase()}.items`);
    return rows[0].n as number;
  } finally {
    await client.end();
  }
}
