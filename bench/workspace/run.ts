/**
 * Workspace benchmark (issue 4, "Performance"): how fast a project's workspace API creates items
 * while its webhooks deliver every event, and how long an event takes from the commit that caused
 * it to its receipt.
 *
 *   npx tsc -p tsconfig.build.json && npx tsx bench/workspace/run.ts
 *
 * Plinth runs as a child process (`node --max-semi-space-size=32 dist/main.js`, as `npm start`
 * does) with WORKERS job slots in-process; the load generator (autocannon, or a paced loop for
 * the fixed-rate run) and the webhook receiver (HTTP/1.1 on a bare socket, answers 200 at once) run in this
 * process; everything is on 127.0.0.1. Every scenario gets a fresh Plinth (fresh DATA_DIR, and on
 * PostgreSQL a fresh database this script creates and drops), so a backlog left by one scenario
 * never runs during the next. Set-up goes through the real API: sign-up, org, project (waited
 * for until `active`), collection `posts`, then N workspace webhooks (events ["items"], with a
 * secret) pointing at the receiver.
 *
 * Scenarios, on SQLite and on PostgreSQL:
 *
 *   hooks=0|1|3  autocannon POSTs `/w/{projectId}/api/items/posts` with a small JSON body
 *                (BENCH_CONNECTIONS connections): warm-up, then a wait until the warm-up's
 *                deliveries stop, then BENCH_DURATION s measured. Item creates/s counts 201s.
 *                With hooks, the receiver counts deliveries (distinct X-Service-Delivery, per
 *                hook and item id) until they stop (no receipt for QUIET_MS, at most
 *                BENCH_DRAIN s), and the items created in the measured phase are then listed
 *                through the API: every one of them must have reached every hook.
 *                "delivered/s" is the measured phase's deliveries over the time from its start
 *                to its last receipt (end to end, backlog included); "during load" counts only
 *                receipts before the load stopped; "drain" is how long deliveries went on after.
 *                "WAL/item" (PostgreSQL): WAL bytes written per item over the same span (whole
 *                cluster, from pg_stat_wal), deliveries included; unlike rates, the machine's
 *                speed does not move it, so it shows what a change to the write path saves.
 *   rate         1 hook; items created by a paced loop at BENCH_RATE/s (warm-up 2 s, then
 *                BENCH_RATE_SECONDS s). Commit = when the POST's 201 arrives at this process;
 *                receipt = when the receiver has the delivery whose body carries that item's id.
 *                Both on this process's monotonic clock.
 *
 * Environment (all optional):
 *   BENCH_CONNECTIONS    autocannon connections                      (48)
 *   BENCH_DURATION       seconds measured per throughput scenario     (8)
 *   BENCH_WARMUP         seconds of warm-up per throughput scenario   (2)
 *   BENCH_DRAIN          longest wait for deliveries to finish, s     (15; 8 at most after warm-up)
 *   BENCH_RATE           events/s of the fixed-rate run               (500)
 *   BENCH_RATE_SECONDS   seconds measured at that rate                (8)
 *   BENCH_ONLY           comma list of sqlite,postgres,pg-worker      (sqlite,postgres)
 *                        pg-worker: PostgreSQL with `plinth serve` at WORKERS=0 and one `plinth worker`
 *                        process delivering (WORKERS job slots), so deliveries get a process of their own
 *   BENCH_SCENARIOS      comma list of 0,1,3,rate                     (all)
 *   BENCH_WORKERS        job slots of the Plinth child (WORKERS)      (Plinth's default)
 *   BENCH_PG_URL         PostgreSQL maintenance database              (postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_CPU_PROF       a directory: run each Plinth child with `--cpu-prof`, one subdirectory per scenario;
 *                        summarise with `npx tsx bench/api/profile-summary.ts <file> 40 <skipSeconds>`
 *   BENCH_QUIET_WAIT     seconds: before each scenario, wait up to this long until the rest of the machine
 *                        is idle (< 0.2 cores for 2 s); for shared machines (no wait)
 *   BENCH_NODE_ARGS      extra node flags for the Plinth child, space-separated (e.g. --import <preload>)
 *   BENCH_DIST           a compiled build to run instead of dist/
 *   BENCH_VERBOSE        1: pass Plinth's output through
 *   BENCH_RECEIVER       http: the receiver on node:http instead of a bare socket (see startReceiver)
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createNetServer, type Socket } from "node:net";
import { cpus, tmpdir, totalmem } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon, { type Result } from "autocannon";
import pg from "pg";
import { Pool } from "undici";
import { createDatabase, signUpCookie } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const HOST = "127.0.0.1";

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer`);
  return value;
}

const CONNECTIONS = envInt("BENCH_CONNECTIONS", 48);
const DURATION_S = envInt("BENCH_DURATION", 8);
const WARMUP_S = envInt("BENCH_WARMUP", 2);
const DRAIN_S = envInt("BENCH_DRAIN", 15);
/** Longest wait for the warm-up's deliveries before measuring. */
const WARMUP_DRAIN_S = Math.min(DRAIN_S, 8);
const RATE = envInt("BENCH_RATE", 500);
const RATE_SECONDS = envInt("BENCH_RATE_SECONDS", 8);
const RATE_WARMUP_S = 2;
const ONLY = new Set((process.env.BENCH_ONLY ?? "sqlite,postgres").split(",").map((s) => s.trim()));
const SCENARIOS = new Set((process.env.BENCH_SCENARIOS ?? "0,1,3,rate").split(",").map((s) => s.trim()));
const WORKERS = process.env.BENCH_WORKERS ? String(envInt("BENCH_WORKERS", 8)) : undefined;
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const CPU_PROF_DIR = process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF) : undefined;
const QUIET_WAIT_S = process.env.BENCH_QUIET_WAIT ? envInt("BENCH_QUIET_WAIT", 60) : 0;
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean);
const DIST = process.env.BENCH_DIST ? path.resolve(process.env.BENCH_DIST) : "dist";
const VERBOSE = process.env.BENCH_VERBOSE === "1";
const RECEIVER = process.env.BENCH_RECEIVER === "http" ? "http" : "socket";
const AUTH_SECRET = "bench-secret-bench-secret-bench-secret-0123";
const HOOK_SECRET = "whsec_bench_0123456789abcdef";
/** Deliveries are taken to have stopped after this long without one. */
const QUIET_MS = 1_500;

/** The issue's targets on this machine. */
const TARGET_CREATES_PER_S = 3_000;
const TARGET_OVERHEAD = 0.3;
const TARGET_P99_MS = 100;

/** Milliseconds on this process's monotonic clock. */
function now(): number {
  return performance.now();
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const cleanups: (() => Promise<void>)[] = [];

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once("error", reject);
    probe.listen(0, HOST, () => {
      const address = probe.address();
      const port = typeof address === "object" && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Plinth child

interface Plinth {
  label: string;
  /** The `plinth worker` process that delivers, when the server runs no jobs itself (pg-worker). */
  worker?: Plinth;
  proc: ChildProcess;
  pid: number;
  url: string;
  output(): string;
  stop(): Promise<void>;
}

/** Plinth's processes: the server, and the worker when there is one. */
function pidsOf(plinth: Plinth): number[] {
  return plinth.worker ? [plinth.pid, plinth.worker.pid] : [plinth.pid];
}

async function startPlinth(
  label: string,
  env: Record<string, string>,
  command: "serve" | "worker" = "serve",
): Promise<Plinth> {
  const port = await freePort();
  const url = `http://${HOST}:${port}`;
  const args: string[] = [...NODE_ARGS];
  if (CPU_PROF_DIR) {
    const dir = path.join(CPU_PROF_DIR, label.replace(/[^a-z0-9-]+/gi, "_"));
    mkdirSync(dir, { recursive: true });
    args.push("--cpu-prof", `--cpu-prof-dir=${dir}`);
  }
  args.push("--max-semi-space-size=32", path.join(DIST, "main.js"), command);
  const inherited = { ...process.env };
  delete inherited.DATABASE_URL;
  delete inherited.DATABASE_SCHEMA;
  const proc = spawn(process.execPath, args, {
    cwd: ROOT,
    env: {
      ...inherited,
      NODE_ENV: "production",
      PORT: String(port),
      HOST,
      PUBLIC_URL: url,
      LOG_LEVEL: "warn",
      AUTH_SECRET,
      RATE_LIMIT_PER_MINUTE: "100000000",
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      ...(WORKERS ? { WORKERS } : {}),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (proc.pid === undefined) throw new Error(`${label}: failed to spawn`);
  let tail = "";
  const keep = (chunk: Buffer) => {
    if (VERBOSE) process.stderr.write(chunk);
    tail = (tail + chunk.toString("utf8")).slice(-8000);
  };
  proc.stdout?.on("data", keep);
  proc.stderr?.on("data", keep);
  let alive = true;
  const exited = new Promise<void>((resolve) =>
    proc.once("exit", () => {
      alive = false;
      resolve();
    }),
  );
  const stop = async () => {
    if (!alive) return;
    proc.kill("SIGTERM");
    const killer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(killer);
  };
  cleanups.push(stop);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (!alive) throw new Error(`${label} exited before it was ready:\n${tail}`);
    if (command === "worker") {
      // A worker has no HTTP port; it says so when it runs (logged at info).
      if (tail.includes("plinth worker running")) break;
    } else {
      try {
        if ((await fetch(`${url}/api/health`)).ok) break;
      } catch {
        // not listening yet
      }
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${label} did not become ready within 60 s:\n${tail}`);
    }
    await sleep(50);
  }
  return { label, proc, pid: proc.pid, url, output: () => tail, stop };
}

// ---------------------------------------------------------------------------------------------
// /proc: CPU

interface CpuSnapshot {
  total: number;
  busy: number;
  perPid: Map<number, number>;
}

function cpuSnapshot(pids: number[]): CpuSnapshot | undefined {
  try {
    const fields = (/^cpu\s+(.*)$/m.exec(readFileSync("/proc/stat", "utf8"))?.[1] ?? "").split(/\s+/).map(Number);
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
    const perPid = new Map<number, number>();
    for (const pid of pids) {
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      } catch {
        continue; // gone (a PostgreSQL backend that closed): counted as nothing
      }
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      perPid.set(pid, Number(rest[11]) + Number(rest[12]));
    }
    const busy = user + nice + system + irq + softirq + steal;
    return { total: busy + idle + iowait, busy, perPid };
  } catch {
    return undefined;
  }
}

/** Cores' worth of CPU between two snapshots: the server, this process, and everything else. */
function cpuCores(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined, server: number[]) {
  if (!before || !after || after.total <= before.total) {
    return { server: Number.NaN, runner: Number.NaN, other: Number.NaN };
  }
  const span = (after.total - before.total) / cpus().length;
  const ticks = (pid: number) => between(before, after, pid);
  const s = server.reduce((sum, pid) => sum + ticks(pid), 0);
  const r = ticks(process.pid);
  return { server: s / span, runner: r / span, other: Math.max(0, (after.busy - before.busy - s - r) / span) };
}

/** CPU time of some processes between two snapshots, in ms (USER_HZ = 100 on Linux). */
function cpuMs(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined, pids: number[]): number {
  if (!before || !after) return Number.NaN;
  return pids.reduce((sum, pid) => sum + between(before, after, pid) * 10, 0);
}

/** A process's CPU ticks between two snapshots; 0 unless it is in both. */
function between(before: CpuSnapshot, after: CpuSnapshot, pid: number): number {
  const start = before.perPid.get(pid);
  const end = after.perPid.get(pid);
  return start === undefined || end === undefined ? 0 : end - start;
}

/** Waits (bounded) until everything but this process has used < 0.2 cores for 2 s; false if it never did. */
async function waitForQuiet(maxSeconds: number): Promise<boolean> {
  const deadline = now() + maxSeconds * 1000;
  for (;;) {
    const before = cpuSnapshot([process.pid]);
    await sleep(2_000);
    const after = cpuSnapshot([process.pid]);
    if (!before || !after) return false;
    const others =
      ((after.busy - before.busy - (after.perPid.get(process.pid) ?? 0) + (before.perPid.get(process.pid) ?? 0)) /
        (after.total - before.total)) *
      cpus().length;
    if (others < 0.2) return true;
    if (now() >= deadline) return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Receiver

interface Receipt {
  hook: number;
  itemId: string;
  phase: string;
  at: number;
}

/** What the receiver saw during one scenario. */
class Sink {
  readonly deliveryIds = new Set<string>();
  readonly receipts: Receipt[] = [];
  /** hook → item id → first receipt time. */
  readonly byHook = new Map<number, Map<string, number>>();
  duplicates = 0;
  unsigned = 0;
  unparsable = 0;
  last = 0;

  record(hook: number, deliveryId: string, signed: boolean, body: string): void {
    const at = now();
    this.last = at;
    if (!signed) this.unsigned++;
    if (this.deliveryIds.has(deliveryId)) {
      this.duplicates++;
      return;
    }
    this.deliveryIds.add(deliveryId);
    let itemId = "";
    let phase = "";
    try {
      const data = (JSON.parse(body) as { data?: { id?: string; phase?: string } }).data;
      itemId = data?.id ?? "";
      phase = data?.phase ?? "";
    } catch {
      this.unparsable++;
    }
    this.receipts.push({ hook, itemId, phase, at });
    let seen = this.byHook.get(hook);
    if (!seen) {
      seen = new Map();
      this.byHook.set(hook, seen);
    }
    if (!seen.has(itemId)) seen.set(itemId, at);
  }

  count(phase: string): number {
    let n = 0;
    for (const r of this.receipts) if (r.phase === phase) n++;
    return n;
  }

  /** Resolves once no delivery has arrived for QUIET_MS (or at the deadline); the time of the last one. */
  async quiet(deadline: number, expected?: () => boolean): Promise<void> {
    const started = now();
    for (;;) {
      await sleep(100);
      const t = now();
      if (expected?.()) return;
      if (t - Math.max(this.last, started) >= QUIET_MS) return;
      if (t >= deadline) return;
    }
  }
}

interface Receiver {
  url: string;
  sink: Sink;
  close(): Promise<void>;
}

/**
 * The receiver answers 200 to every POST on a kept-alive connection. By default it speaks just
 * enough HTTP/1.1 over a bare socket for Plinth's requests (a request line, headers, a body of
 * `content-length` bytes; one request at a time per connection): it shares the machine with
 * Plinth, and node:http's request and response objects would cost it about four times the CPU
 * per delivery, charged to the webhook runs as if Plinth spent it. BENCH_RECEIVER=http uses
 * node:http instead.
 */
async function startReceiver(): Promise<Receiver> {
  const receiver = { sink: new Sink() } as Receiver;
  const received = (path: string, deliveryId: string, signed: boolean, body: string) => {
    const hook = Number(/^\/hook\/(\d+)/.exec(path)?.[1] ?? -1);
    receiver.sink.record(hook, deliveryId, signed, body);
  };
  const server = RECEIVER === "http" ? httpReceiver(received) : socketReceiver(received);
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, HOST, resolve));
  receiver.url = `http://${HOST}:${port}`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAll();
    });
  return receiver;
}

type Received = (path: string, deliveryId: string, signed: boolean, body: string) => void;

interface ReceiverServer {
  listen(port: number, host: string, done: () => void): void;
  close(done: () => void): void;
  closeAll(): void;
}

function httpReceiver(received: Received): ReceiverServer {
  const server: Server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/plain", "content-length": "2" });
      res.end("ok");
      received(
        req.url ?? "",
        String(req.headers["x-service-delivery"] ?? ""),
        typeof req.headers["x-service-signature-v2"] === "string",
        Buffer.concat(chunks).toString("utf8"),
      );
    });
  });
  // Longer than undici's keep-alive, so the server never closes a socket Plinth is about to reuse.
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 130_000;
  return {
    listen: (port, host, done) => server.listen(port, host, done),
    close: (done) => server.close(() => done()),
    closeAll: () => server.closeAllConnections(),
  };
}

const OK = Buffer.from("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok");
const HEADERS_END = Buffer.from("\r\n\r\n");

function socketReceiver(received: Received): ReceiverServer {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    let buffered: Buffer = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      for (;;) {
        const end = buffered.indexOf(HEADERS_END);
        if (end < 0) return;
        const head = buffered.toString("latin1", 0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        const body = buffered.toString("utf8", end + 4, end + 4 + length);
        buffered = buffered.subarray(end + 4 + length);
        socket.write(OK);
        received(
          head.slice(head.indexOf(" ") + 1, head.indexOf(" ", head.indexOf(" ") + 1)),
          /\r\nx-service-delivery: *([^\r]*)/i.exec(head)?.[1] ?? "",
          /\r\nx-service-signature-v2: *[^\r]/i.test(head),
          body,
        );
      }
    });
  });
  return {
    listen: (port, host, done) => server.listen(port, host, done),
    close: (done) => server.close(() => done()),
    closeAll: () => {
      for (const socket of sockets) socket.destroy();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Set-up through the API

interface Workspace {
  projectId: string;
  adminToken: string;
  base: string;
}

async function call(url: string, method: string, headers: Record<string, string>, body?: unknown) {
  const response = await fetch(url, {
    method,
    headers: { ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: response.status, body: parsed as Record<string, any>, headers: response.headers };
}

function expectStatus(what: string, got: { status: number; body: unknown }, want: number): void {
  if (got.status !== want) throw new Error(`${what}: ${got.status} ${JSON.stringify(got.body)}`);
}

async function setUpWorkspace(plinth: Plinth, receiver: Receiver, hooks: number): Promise<Workspace> {
  const url = plinth.url;
  const cookie = await signUpCookie(url, "B");
  const session = { origin: url, cookie };
  const org = await call(`${url}/api/org`, "POST", session, { name: "Bench Org" });
  expectStatus("create org", org, 201);
  const slug = org.body.org.slug as string;
  const created = await call(`${url}/api/org/${slug}/projects`, "POST", session, { name: "Bench Project" });
  expectStatus("create project", created, 201);
  const projectId = created.body.project.id as string;
  const projectSlug = created.body.project.slug as string;
  const adminToken = created.body.project.adminToken as string;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const got = await call(`${url}/api/org/${slug}/projects/${projectSlug}`, "GET", session);
    expectStatus("get project", got, 200);
    const status = got.body.project.status as string;
    if (status === "active") break;
    if (status !== "provisioning") throw new Error(`project became ${status}: ${JSON.stringify(got.body)}`);
    if (Date.now() > deadline) throw new Error("project not active within 30 s");
    await sleep(100);
  }
  const base = `${url}/w/${projectId}/api`;
  const admin = { authorization: `Bearer ${adminToken}` };
  expectStatus("create collection", await call(`${base}/collections`, "POST", admin, { slug: "posts" }), 201);
  for (let i = 0; i < hooks; i++) {
    const hook = await call(`${base}/webhooks`, "POST", admin, {
      name: `bench ${i}`,
      url: `${receiver.url}/hook/${i}`,
      events: ["items"],
      secret: HOOK_SECRET,
    });
    expectStatus("create webhook", hook, 201);
  }
  // One item end to end before any load: the route works and (with hooks) deliveries arrive.
  const probe = await call(`${base}/items/posts`, "POST", admin, { title: "probe", phase: "probe" });
  expectStatus("create item", probe, 201);
  if (typeof probe.body.item?.id !== "string") throw new Error(`unexpected item: ${JSON.stringify(probe.body)}`);
  if (hooks > 0) {
    const until = now() + 10_000;
    while (receiver.sink.count("probe") < hooks) {
      if (now() > until) throw new Error("the probe item's deliveries did not arrive within 10 s");
      await sleep(20);
    }
    if (receiver.sink.unsigned > 0) throw new Error("a delivery arrived without X-Service-Signature-V2");
  }
  return { projectId, adminToken, base };
}

/** Ids of the items of a phase, listed through the API. */
async function listItemIds(ws: Workspace, phase: string): Promise<Set<string>> {
  const ids = new Set<string>();
  for (let offset = 0; ; offset += 500) {
    const page = await call(`${ws.base}/items/posts?limit=500&offset=${offset}`, "GET", {
      authorization: `Bearer ${ws.adminToken}`,
    });
    expectStatus("list items", page, 200);
    const items = page.body.items as { id: string; phase?: string }[];
    for (const item of items) if (item.phase === phase) ids.add(item.id);
    if (items.length < 500) return ids;
  }
}

// ---------------------------------------------------------------------------------------------
// Measurements

interface ThroughputRow {
  database: string;
  hooks: number;
  createsPerSecond: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** Items created in the measured phase, as listed afterwards (includes requests cut off at the end). */
  created: number;
  expected: number;
  delivered: number;
  missing: number;
  duplicates: number;
  /** Deliveries without X-Service-Signature-V2 (every hook has a secret). */
  unsigned: number;
  deliveredPerSecond: number;
  duringLoadPerSecond: number;
  drainSeconds: number;
  serverCores: number;
  /**
   * The server's CPU time per item created in the measured phase, from its start until its last
   * delivery (so it includes the item's deliveries): the figure that moves least with noise.
   */
  cpuPerEvent: number;
  runnerCores: number;
  /** PostgreSQL: WAL bytes written per item, its deliveries included (NaN on SQLite). */
  walPerItem: number;
  /**
   * PostgreSQL: CPU time of the backends serving the bench's database per item, measured like
   * `cpuPerEvent` (NaN on SQLite). Unlike "other CPU", work elsewhere on the machine is not in it.
   */
  pgCpuPerItem: number;
  otherCores: number;
}

interface RateRow {
  database: string;
  rate: number;
  achieved: number;
  events: number;
  received: number;
  p50: number;
  p99: number;
  max: number;
  requestP99: number;
  non2xx: number;
  serverCores: number;
  /** Server CPU time per event, from the start of the measured phase until its last receipt. */
  cpuPerEvent: number;
  otherCores: number;
}

function itemBody(phase: string): string {
  return JSON.stringify({ title: "Hello from the benchmark", body: "A short post.", views: 1, phase });
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

/**
 * PostgreSQL's WAL written so far, cluster-wide (bytes): what a scenario writes per item is the
 * difference over its measured phase, a figure that the machine's speed does not move.
 */
async function walBytes(database: string): Promise<number> {
  if (database === "sqlite") return Number.NaN;
  const client = new pg.Client({ connectionString: PG_ADMIN_URL });
  await client.connect();
  try {
    const result = await client.query<{ bytes: string }>("select wal_bytes::text as bytes from pg_stat_wal");
    return Number(result.rows[0]?.bytes);
  } finally {
    await client.end();
  }
}

/** The PostgreSQL backends connected to bench databases (none on SQLite). */
async function pgBackends(database: string): Promise<number[]> {
  if (database === "sqlite") return [];
  const client = new pg.Client({ connectionString: PG_ADMIN_URL });
  await client.connect();
  try {
    const result = await client.query<{ pid: number }>(
      "select pid from pg_stat_activity where datname like 'plinth_bench_ws%' and pid <> pg_backend_pid()",
    );
    return result.rows.map((row) => row.pid);
  } finally {
    await client.end();
  }
}

async function pgDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const database = await createDatabase(PG_ADMIN_URL, "plinth_bench_ws");
  cleanups.push(database.drop);
  return database;
}

/** A fresh Plinth on a fresh database for one scenario, stopped (and its database dropped) after. */
async function withPlinth<T>(database: string, scenario: string, run: (plinth: Plinth) => Promise<T>): Promise<T> {
  if (QUIET_WAIT_S > 0 && !(await waitForQuiet(QUIET_WAIT_S))) {
    console.log(`  (the machine was not idle within ${QUIET_WAIT_S} s; measuring anyway)`);
  }
  const dataDir = mkdtempSync(path.join(tmpdir(), "plinth-bench-ws-"));
  const removeDir = async () => rmSync(dataDir, { recursive: true, force: true });
  cleanups.push(removeDir);
  const pgDb = database === "sqlite" ? undefined : await pgDatabase();
  const env = { DATA_DIR: dataDir, ...(pgDb ? { DATABASE_URL: pgDb.url } : {}) };
  const split = database === "pg-worker";
  const plinth = await startPlinth(`${database}-${scenario}`, split ? { ...env, WORKERS: "0" } : env);
  if (split)
    plinth.worker = await startPlinth(`${database}-${scenario}-worker`, { ...env, LOG_LEVEL: "info" }, "worker");
  try {
    return await run(plinth);
  } catch (error) {
    for (const child of [plinth, plinth.worker]) {
      const tail = child?.output().trim();
      if (child && tail && !VERBOSE) console.log(`  (${child.label} output)\n${tail.replace(/^/gm, "    ")}`);
    }
    throw error;
  } finally {
    // autocannon drops its sockets mid-request at the end of a run; let the server finish them.
    await sleep(500);
    await plinth.stop();
    await plinth.worker?.stop();
    await pgDb?.drop().catch((error: unknown) => console.error("could not drop the bench database:", error));
    await removeDir();
  }
}

async function measureThroughput(database: string, hooks: number, receiver: Receiver): Promise<ThroughputRow> {
  return withPlinth(database, `hooks${hooks}`, async (plinth) => {
    receiver.sink = new Sink();
    const ws = await setUpWorkspace(plinth, receiver, hooks);
    const options = {
      url: `${ws.base}/items/posts`,
      method: "POST",
      connections: CONNECTIONS,
      headers: { "content-type": "application/json", authorization: `Bearer ${ws.adminToken}` },
      timeout: 10_000,
    };
    process.stdout.write(`  ${database.padEnd(8)} ${hooks} hook${hooks === 1 ? " " : "s"}  warm-up ${WARMUP_S}s`);
    await autocannon({ ...options, body: itemBody("w"), duration: WARMUP_S });
    if (hooks > 0) {
      await receiver.sink.quiet(now() + WARMUP_DRAIN_S * 1000);
      process.stdout.write(" (+ its deliveries)");
    }
    process.stdout.write(`, measuring ${DURATION_S}s`);

    const sink = receiver.sink;
    const walBefore = await walBytes(database);
    // The server's pool is open by now (the warm-up used it): these are the backends that work.
    const backends = await pgBackends(database);
    const cpuBefore = cpuSnapshot([...pidsOf(plinth), process.pid, ...backends]);
    const started = now();
    const result: Result = await autocannon({ ...options, body: itemBody("m"), duration: DURATION_S });
    const loadEnded = now();
    const cpu = cpuCores(cpuBefore, cpuSnapshot([...pidsOf(plinth), process.pid]), pidsOf(plinth));
    const createsPerSecond = result["2xx"] / result.duration;
    process.stdout.write(` → ${fmtInt(createsPerSecond)} creates/s`);

    let created = 0;
    let expected = 0;
    let delivered = 0;
    let missing = 0;
    let deliveredPerSecond = Number.NaN;
    let duringLoadPerSecond = Number.NaN;
    let drainSeconds = Number.NaN;
    let cpuEnd = cpuSnapshot([...pidsOf(plinth), ...backends]);
    if (hooks > 0) {
      await sleep(300);
      // Stop waiting as soon as every 2xx'd item is in, or when receipts stop (bounded).
      await sink.quiet(
        now() + DRAIN_S * 1000,
        () => sink.count("m") >= result["2xx"] * hooks && now() - sink.last > 300,
      );
      cpuEnd = cpuSnapshot([...pidsOf(plinth), ...backends]);
      const ids = await listItemIds(ws, "m");
      created = ids.size;
      expected = created * hooks;
      // Anything still arriving (a straggler after the quiet period) counts too.
      await sink.quiet(now() + 2_000, () => sink.count("m") >= expected);
      const measured = sink.receipts.filter((r) => r.phase === "m");
      delivered = measured.length;
      for (let hook = 0; hook < hooks; hook++) {
        const seen = sink.byHook.get(hook) ?? new Map<string, number>();
        for (const id of ids) if (!seen.has(id)) missing++;
      }
      const lastAt = measured.reduce((max, r) => Math.max(max, r.at), started);
      deliveredPerSecond = delivered / ((lastAt - started) / 1000);
      duringLoadPerSecond = measured.filter((r) => r.at <= loadEnded).length / ((loadEnded - started) / 1000);
      drainSeconds = Math.max(0, (lastAt - loadEnded) / 1000);
      process.stdout.write(
        `, ${fmtInt(deliveredPerSecond)} delivered/s, ${missing === 0 ? "all delivered" : `${missing} MISSING`}` +
          `, drain ${drainSeconds.toFixed(1)}s`,
      );
    } else {
      created = result["2xx"];
    }
    const walPerItem = ((await walBytes(database)) - walBefore) / created;
    process.stdout.write("\n");
    return {
      database,
      hooks,
      createsPerSecond,
      p50: result.latency.p50,
      p99: result.latency.p99,
      non2xx: result.non2xx,
      errors: result.errors + result.timeouts,
      created,
      expected,
      delivered,
      missing,
      duplicates: sink.duplicates,
      unsigned: sink.unsigned,
      deliveredPerSecond,
      duringLoadPerSecond,
      drainSeconds,
      serverCores: cpu.server,
      cpuPerEvent: cpuMs(cpuBefore, cpuEnd, pidsOf(plinth)) / created,
      runnerCores: cpu.runner,
      otherCores: cpu.other,
      walPerItem,
      pgCpuPerItem: backends.length > 0 ? cpuMs(cpuBefore, cpuEnd, backends) / created : Number.NaN,
    };
  });
}

/** Creates items at a fixed rate; returns each created item's commit time (201 received) and request latencies. */
async function paced(
  pool: Pool,
  pathname: string,
  headers: Record<string, string>,
  rate: number,
  seconds: number,
  phase: string,
) {
  const body = itemBody(phase);
  const commits = new Map<string, number>();
  const latencies: number[] = [];
  let non2xx = 0;
  const total = Math.round(rate * seconds);
  const inFlight = new Set<Promise<void>>();
  const one = async () => {
    const sent = now();
    try {
      const response = await pool.request({ path: pathname, method: "POST", headers, body });
      const text = await response.body.text();
      const at = now();
      if (response.statusCode !== 201) {
        non2xx++;
        return;
      }
      commits.set((JSON.parse(text) as { item: { id: string } }).item.id, at);
      latencies.push(at - sent);
    } catch {
      non2xx++;
    }
  };
  const start = now();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((now() - start) * rate) / 1000) + 1);
    while (sent < due) {
      sent++;
      const request = one().finally(() => inFlight.delete(request));
      inFlight.add(request);
    }
    await sleep(Math.max(0, start + (sent * 1000) / rate - now()));
  }
  const lastSent = now();
  await Promise.all(inFlight);
  return { commits, latencies, non2xx, achieved: total / ((lastSent - start) / 1000 + 1 / rate) };
}

async function measureRate(database: string, receiver: Receiver): Promise<RateRow> {
  return withPlinth(database, "rate", async (plinth) => {
    receiver.sink = new Sink();
    const ws = await setUpWorkspace(plinth, receiver, 1);
    const pool = new Pool(plinth.url, { connections: 64 });
    try {
      const pathname = new URL(`${ws.base}/items/posts`).pathname;
      const headers = { "content-type": "application/json", authorization: `Bearer ${ws.adminToken}` };
      process.stdout.write(`  ${database.padEnd(8)} ${RATE}/s, 1 hook  warm-up ${RATE_WARMUP_S}s`);
      await paced(pool, pathname, headers, RATE, RATE_WARMUP_S, "rw");
      process.stdout.write(`, measuring ${RATE_SECONDS}s`);
      const cpuBefore = cpuSnapshot([...pidsOf(plinth), process.pid]);
      const run = await paced(pool, pathname, headers, RATE, RATE_SECONDS, "r");
      const cpu = cpuCores(cpuBefore, cpuSnapshot([...pidsOf(plinth), process.pid]), pidsOf(plinth));
      const sink = receiver.sink;
      const seen = () => sink.byHook.get(0) ?? new Map<string, number>();
      const until = now() + 10_000;
      while ([...run.commits.keys()].some((id) => !seen().has(id)) && now() < until) await sleep(50);
      const cpuEnd = cpuSnapshot(pidsOf(plinth));
      const delays: number[] = [];
      for (const [id, committed] of run.commits) {
        const received = seen().get(id);
        if (received !== undefined) delays.push(received - committed);
      }
      delays.sort((a, b) => a - b);
      run.latencies.sort((a, b) => a - b);
      const row: RateRow = {
        database,
        rate: RATE,
        achieved: run.achieved,
        events: run.commits.size,
        received: delays.length,
        p50: percentile(delays, 50),
        p99: percentile(delays, 99),
        max: delays.at(-1) ?? Number.NaN,
        requestP99: percentile(run.latencies, 99),
        non2xx: run.non2xx,
        serverCores: cpu.server,
        cpuPerEvent: cpuMs(cpuBefore, cpuEnd, pidsOf(plinth)) / (run.commits.size + run.non2xx),
        otherCores: cpu.other,
      };
      process.stdout.write(
        ` → commit-to-receipt p50 ${fmtMs(row.p50)}, p99 ${fmtMs(row.p99)}, ${row.received}/${row.events} received\n`,
      );
      return row;
    } finally {
      await pool.close();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Report

function fmtInt(n: number): string {
  return Number.isNaN(n) ? "n/a" : Math.round(n).toLocaleString("en-US");
}

function fmtMs(n: number): string {
  return Number.isNaN(n) ? "n/a" : `${n < 10 ? n.toFixed(1) : n.toFixed(0)} ms`;
}

function fmtUs(ms: number): string {
  return Number.isNaN(ms) ? "n/a" : `${fmtInt(ms * 1000)} µs`;
}

function fmtCores(n: number): string {
  return Number.isNaN(n) ? "n/a" : n.toFixed(2);
}

function table(header: string[], rows: string[][], numericFrom: number): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const render = (cells: string[]) =>
    `| ${cells.map((cell, i) => (i >= numericFrom ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => (i >= numericFrom ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`;
  return [render(header), rule, ...rows.map(render)].join("\n");
}

function machine(): string {
  const cpu = /^model name\s*:\s*(.*)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "unknown CPU";
  return `nproc ${cpus().length}, ${cpu}, ${(totalmem() / 1024 ** 3).toFixed(1)} GiB, Node ${process.version}`;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  console.log(
    `Plinth workspace benchmark: ${CONNECTIONS} connections, ${WARMUP_S}s warm-up + ${DURATION_S}s per throughput ` +
      `scenario, ${RATE}/s for ${RATE_SECONDS}s in the rate scenario, over ${HOST}\n${machine()}`,
  );
  const receiver = await startReceiver();
  cleanups.push(() => receiver.close());
  const throughput: ThroughputRow[] = [];
  const rates: RateRow[] = [];
  for (const database of ["sqlite", "postgres", "pg-worker"]) {
    if (!ONLY.has(database)) continue;
    for (const hooks of [0, 1, 3]) {
      if (SCENARIOS.has(String(hooks))) throughput.push(await measureThroughput(database, hooks, receiver));
    }
    if (SCENARIOS.has("rate")) rates.push(await measureRate(database, receiver));
  }

  const baseOf = (db: string) => throughput.find((r) => r.database === db && r.hooks === 0)?.createsPerSecond;
  if (throughput.length > 0) console.log(`\nItem creates/s (${CONNECTIONS} connections, ${DURATION_S}s measured):\n`);
  if (throughput.length > 0)
    console.log(
      table(
        [
          "db",
          "hooks",
          "creates/s",
          "vs 0 hooks",
          "p50",
          "p99",
          "non-2xx",
          "items",
          "deliveries",
          "missing",
          "delivered/s",
          "during load",
          "drain",
          "server CPU",
          "CPU/item",
          "runner CPU",
          "other CPU",
          "WAL/item",
          "PG CPU/item",
        ],
        throughput.map((r) => {
          const base = baseOf(r.database);
          return [
            r.database,
            String(r.hooks),
            fmtInt(r.createsPerSecond),
            base && r.hooks > 0 ? `${((r.createsPerSecond / base - 1) * 100).toFixed(1)}%` : "",
            `${r.p50} ms`,
            `${r.p99} ms`,
            String(r.non2xx + r.errors),
            fmtInt(r.created),
            r.hooks > 0 ? `${fmtInt(r.delivered)}/${fmtInt(r.expected)}` : "",
            r.hooks > 0 ? String(r.missing) : "",
            r.hooks > 0 ? fmtInt(r.deliveredPerSecond) : "",
            r.hooks > 0 ? fmtInt(r.duringLoadPerSecond) : "",
            r.hooks > 0 ? `${r.drainSeconds.toFixed(1)} s` : "",
            fmtCores(r.serverCores),
            fmtUs(r.cpuPerEvent),
            fmtCores(r.runnerCores),
            fmtCores(r.otherCores),
            Number.isNaN(r.walPerItem) ? "" : `${fmtInt(r.walPerItem)} B`,
            Number.isNaN(r.pgCpuPerItem) ? "" : fmtUs(r.pgCpuPerItem),
          ];
        }),
        2,
      ),
    );
  if (rates.length > 0) {
    console.log(`\nCommit-to-receipt at a fixed rate, 1 hook (${RATE_SECONDS}s measured):\n`);
    console.log(
      table(
        [
          "db",
          "rate",
          "achieved",
          "events",
          "received",
          "p50",
          "p99",
          "max",
          "POST p99",
          "non-2xx",
          "server CPU",
          "CPU/event",
          "other CPU",
        ],
        rates.map((r) => [
          r.database,
          `${r.rate}/s`,
          `${fmtInt(r.achieved)}/s`,
          String(r.events),
          String(r.received),
          fmtMs(r.p50),
          fmtMs(r.p99),
          fmtMs(r.max),
          fmtMs(r.requestP99),
          String(r.non2xx),
          fmtCores(r.serverCores),
          fmtUs(r.cpuPerEvent),
          fmtCores(r.otherCores),
        ]),
        1,
      ),
    );
  }

  console.log("\nTargets:");
  let failed = false;
  for (const database of ["sqlite", "postgres", "pg-worker"]) {
    const base = baseOf(database);
    const one = throughput.find((r) => r.database === database && r.hooks === 1);
    const rate = rates.find((r) => r.database === database);
    if (one) {
      const kept = one.deliveredPerSecond >= TARGET_CREATES_PER_S;
      const met = one.createsPerSecond >= TARGET_CREATES_PER_S && one.missing === 0 && kept;
      console.log(
        `  ${met ? "MET   " : "MISSED"} ${database.padEnd(8)} >= ${fmtInt(TARGET_CREATES_PER_S)} creates/s with 1 hook, ` +
          `every event delivered: ${fmtInt(one.createsPerSecond)} creates/s, ${one.missing} missing, ` +
          `${fmtInt(one.deliveredPerSecond)} delivered/s end to end`,
      );
      if (base) {
        // Creates that outrun their deliveries only pile up a backlog: the rate kept is the lower one.
        const sustained = Math.min(one.createsPerSecond, one.deliveredPerSecond);
        const overhead = 1 - sustained / base;
        const trailing =
          sustained < one.createsPerSecond ? `, deliveries trailing ${fmtInt(one.createsPerSecond)} creates/s` : "";
        console.log(
          `  ${overhead <= TARGET_OVERHEAD ? "MET   " : "MISSED"} ${database.padEnd(8)} webhook overhead <= ` +
            `${TARGET_OVERHEAD * 100}%: ${(overhead * 100).toFixed(1)}% (${fmtInt(sustained)}/s sustained${trailing}, vs ${fmtInt(base)} creates/s with none)`,
        );
      }
    }
    if (rate) {
      const met = rate.p99 <= TARGET_P99_MS && rate.received === rate.events && rate.non2xx === 0;
      console.log(
        `  ${met ? "MET   " : "MISSED"} ${database.padEnd(8)} commit-to-receipt p99 <= ${TARGET_P99_MS} ms at ${RATE}/s: ` +
          `p99 ${fmtMs(rate.p99)} (p50 ${fmtMs(rate.p50)}), ${rate.received}/${rate.events} received`,
      );
    }
  }
  for (const row of throughput) {
    if (row.non2xx > 0 || row.errors > 0 || row.missing > 0 || row.duplicates > 0 || row.unsigned > 0) {
      failed = true;
      console.log(
        `✗ ${row.database} ${row.hooks} hooks: ${row.non2xx} non-2xx, ${row.errors} errors, ` +
          `${row.missing} deliveries not received within the ${DRAIN_S} s wait, ` +
          `${row.duplicates} received twice, ${row.unsigned} unsigned`,
      );
    }
  }
  const hooked = throughput.filter((r) => r.hooks > 0);
  if (hooked.length > 0) {
    const dup = hooked.reduce((sum, r) => sum + r.duplicates, 0);
    const unsigned = hooked.reduce((sum, r) => sum + r.unsigned, 0);
    console.log(`Deliveries received twice: ${dup}; without X-Service-Signature-V2: ${unsigned}`);
  }
  const noise = Math.max(0, ...throughput.map((r) => r.otherCores).filter((n) => !Number.isNaN(n)));
  if (noise > 0.3) {
    console.log(
      `Note: up to ${noise.toFixed(2)} cores were used outside Plinth and this process during a measurement ` +
        "(PostgreSQL's backends in the PostgreSQL runs; otherwise other processes on the machine).",
    );
  }
  console.log(`\nStarted ${startedAt.toISOString()}, took ${((Date.now() - startedAt.getTime()) / 1000).toFixed(0)} s`);
  if (CPU_PROF_DIR) console.log(`CPU profiles of the Plinth children: ${CPU_PROF_DIR}`);
  if (failed) process.exitCode = 1;
}

async function cleanUp(): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) {
    await cleanup().catch(() => undefined);
  }
}

process.once("SIGINT", () => {
  void cleanUp().then(() => process.exit(130));
});

try {
  await main();
} catch (error) {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exitCode = 1;
} finally {
  await cleanUp();
}
