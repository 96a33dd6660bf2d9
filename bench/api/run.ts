/**
 * API benchmark (issue 2, "Performance"): drives a running Plinth over loopback with autocannon
 * and compares it with a bare baseline server measured in the same run.
 *
 *   npm run bench:api
 *
 * Each server is its own child process; the load generator runs in this process. Measured:
 *   - baseline  GET /api/orgs with a bearer token  (bench/api/baseline.ts: hash + SQLite lookup + JSON)
 *   - Plinth    GET /api/orgs with a `pak_` key, GET /api/org/{slug}/overview with that key, and
 *     the same overview with a session cookie, on SQLite and on PostgreSQL (a fresh database
 *     created and dropped by this script). The scenarios take turns, round after round, so that
 *     the cookie and key figures of a run share its background load.
 * The baseline is measured first and again last; Plinth's figures are given as a ratio of the
 * mean of those two runs, since absolute numbers drift between machines and with background load.
 *
 * Environment (all optional):
 *   BENCH_CONNECTIONS   concurrent connections           (64)
 *   BENCH_DURATION      seconds measured per scenario    (10)
 *   BENCH_WARMUP        seconds of warm-up per scenario  (3)
 *   BENCH_ONLY          comma list of baseline,sqlite,postgres (all three)
 *   BENCH_SCENARIOS     comma list of Plinth scenarios: key,key-overview,cookie (all three)
 *   BENCH_ROUNDS        rounds; each measures every scenario once, in turn  (2)
 *   BENCH_BUILDS        compiled builds to compare in one run, as label=dir, comma-separated
 *                       (dist); each serves from a process and a database of its own, in turn
 *   BENCH_METRICS_LABELS  builds (by label, comma-separated) that run with METRICS_TOKEN set, so
 *                       that requests are timed for /metrics: `BENCH_BUILDS=off=dist,on=dist
 *                       BENCH_METRICS_LABELS=on` measures what metrics cost
 *   BENCH_PG_URL        PostgreSQL maintenance database  (postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_CPU_PROF      a directory: run each Plinth child with `--cpu-prof` writing there
 *   BENCH_NODE_ARGS     extra node flags for the Plinth children, space-separated (e.g. --trace-gc)
 *   BENCH_VERBOSE       1: pass the servers' output through
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { cpus, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon, { type Result } from "autocannon";
import { createDatabase, signUpCookie } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const HOST = "127.0.0.1";
const CONNECTIONS = envInt("BENCH_CONNECTIONS", 64);
const DURATION_S = envInt("BENCH_DURATION", 10);
const WARMUP_S = envInt("BENCH_WARMUP", 3);
const ONLY = new Set((process.env.BENCH_ONLY ?? "baseline,sqlite,postgres").split(",").map((s) => s.trim()));
const SCENARIOS = new Set((process.env.BENCH_SCENARIOS ?? "key,key-overview,cookie").split(",").map((s) => s.trim()));
const ROUNDS = envInt("BENCH_ROUNDS", 2);
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const CPU_PROF_DIR = process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF) : undefined;
const VERBOSE = process.env.BENCH_VERBOSE === "1";
/** A compiled Plinth to measure: `label` names it in the results when there are several. */
interface Build {
  label: string;
  entry: string[];
}

/** Plinth as `npm start` runs it (compiled output, same V8 flags), or the sources via tsx. */
const BUILDS: Build[] =
  process.env.BENCH_FROM_SOURCE === "1"
    ? [{ label: "", entry: ["--import", "tsx", "src/main.ts"] }]
    : (process.env.BENCH_BUILDS ?? "dist").split(",").map((spec) => {
        const [label, dir] = spec.includes("=") ? spec.split("=", 2) : ["", spec];
        return { label: label ?? "", entry: ["--max-semi-space-size=32", path.join(dir ?? "dist", "main.js")] };
      });
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean);
const METRICS_LABELS = new Set((process.env.BENCH_METRICS_LABELS ?? "").split(",").filter(Boolean));

/** The issue's target for the key-authenticated read. */
const TARGET_RATIO = 0.4;
const TARGET_P99_MS = 10;
/** Issue 20's target: the cookie-authenticated overview at least this share of the key read's req/s. */
const COOKIE_TARGET_RATIO = 0.5;

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer`);
  return value;
}

// ---------------------------------------------------------------------------------------------
// Child processes

interface Child {
  label: string;
  proc: ChildProcess;
  pid: number;
  url: string;
  /** The last few KB of the child's output, for error messages. */
  output(): string;
  stop(): Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, HOST, () => {
      const address = probe.address();
      const port = typeof address === "object" && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

async function startChild(
  label: string,
  args: string[],
  env: Record<string, string>,
  healthPath: string,
  port: number,
): Promise<Child> {
  const inherited = { ...process.env };
  delete inherited.DATABASE_URL;
  delete inherited.DATABASE_SCHEMA;
  const proc = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...inherited, ...env },
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
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  let alive = true;
  void exited.then(() => {
    alive = false;
  });

  const stop = async () => {
    if (!alive) return;
    proc.kill("SIGTERM");
    const killer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(killer);
  };
  cleanups.push(stop);

  const url = `http://${HOST}:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (!alive) throw new Error(`${label} exited before it was ready:\n${tail}`);
    try {
      const response = await fetch(`${url}${healthPath}`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${label} did not become ready within 60 s:\n${tail}`);
    }
    await sleep(100);
  }
  return { label, proc, pid: proc.pid, url, output: () => tail, stop };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** VmRSS and VmHWM (peak RSS) of a process, in bytes; undefined when /proc is not readable. */
function memoryOf(pid: number): { rss: number; hwm: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
    return { rss: kb("VmRSS") * 1024, hwm: kb("VmHWM") * 1024 };
  } catch {
    return undefined;
  }
}

/** CPU ticks from /proc: all CPUs busy and total, the busy ticks of the given processes, and of the first of them. */
interface CpuSnapshot {
  busy: number;
  total: number;
  ours: number;
  first: number;
}

/** /proc counts CPU time in ticks of USER_HZ, which is 100 on Linux. */
const TICK_MS = 10;

function cpuSnapshot(pids: number[]): CpuSnapshot | undefined {
  try {
    const fields = (/^cpu\s+(.*)$/m.exec(readFileSync("/proc/stat", "utf8"))?.[1] ?? "").split(/\s+/).map(Number);
    // user nice system idle iowait irq softirq steal
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
    const ticks = pids.map((pid) => {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // Fields after the ")" that ends the command name; utime and stime are the 14th and 15th.
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return Number(rest[11]) + Number(rest[12]);
    });
    const busy = user + nice + system + irq + softirq + steal;
    return { busy, total: busy + idle + iowait, ours: ticks.reduce((sum, t) => sum + t, 0), first: ticks[0] ?? 0 };
  } catch {
    return undefined;
  }
}

/** Cores' worth of CPU spent outside `pids` between two snapshots. */
function otherCores(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined): number {
  if (!before || !after || after.total <= before.total) return Number.NaN;
  const other = (after.busy - before.busy - (after.ours - before.ours)) / (after.total - before.total);
  return Math.max(0, other * cpus().length);
}

// ---------------------------------------------------------------------------------------------
// Load

interface Measurement {
  server: string;
  database: string;
  scenario: string;
  kind: ScenarioKind;
  /** 1, 2, …: the round it was measured in (the baseline's runs count as rounds of their own). */
  round: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  max: number;
  total: number;
  non2xx: number;
  errors: number;
  /**
   * Peak resident memory of the server process: the highest VmRSS sampled during the measurement,
   * or its VmHWM (peak since it started) at the end, whichever is higher.
   */
  peakRss: number;
  /**
   * Cores' worth of CPU used during the measurement outside the server and this load generator:
   * PostgreSQL's backends in the PostgreSQL runs, anything else running on the machine (noise),
   * and interrupt time, which includes some of the loopback traffic itself (about 0.2 cores at
   * 20,000 req/s). Approximate.
   */
  otherCpu: number;
  /**
   * The server process's CPU time (all its threads) per response, in ms: what a request costs,
   * whatever share of the cores the server got. PostgreSQL's share of the work is not in it.
   */
  cpuPerRequest: number;
}

type ScenarioKind = "baseline" | "key" | "key-overview" | "cookie";

interface Scenario {
  kind: ScenarioKind;
  name: string;
  path: string;
  headers: Record<string, string>;
  /** Checks one response before loading, so the benchmark never measures error pages. */
  check(body: unknown): void;
}

async function measure(child: Child, database: string, scenario: Scenario, round: number): Promise<Measurement> {
  const url = `${child.url}${scenario.path}`;
  const probe = await fetch(url, { headers: scenario.headers });
  const probeBody = (await probe.json()) as unknown;
  if (probe.status !== 200) {
    throw new Error(`${child.label} ${scenario.name}: ${probe.status} ${JSON.stringify(probeBody)}`);
  }
  scenario.check(probeBody);

  const options = { url, connections: CONNECTIONS, headers: scenario.headers, timeout: 10_000 };
  process.stdout.write(`  ${child.label.padEnd(22)} ${scenario.name.padEnd(40)} warm-up ${WARMUP_S}s`);
  await autocannon({ ...options, duration: WARMUP_S });
  process.stdout.write(`, measuring ${DURATION_S}s`);

  let peakRss = memoryOf(child.pid)?.rss ?? 0;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, memoryOf(child.pid)?.rss ?? 0);
  }, 250);
  const cpuBefore = cpuSnapshot([child.pid, process.pid]);
  let result: Result;
  try {
    result = await autocannon({ ...options, duration: DURATION_S });
  } finally {
    clearInterval(sampler);
  }
  const cpuAfter = cpuSnapshot([child.pid, process.pid]);
  const otherCpu = otherCores(cpuBefore, cpuAfter);
  const serverCpuMs = cpuBefore && cpuAfter ? (cpuAfter.first - cpuBefore.first) * TICK_MS : Number.NaN;
  peakRss = Math.max(peakRss, memoryOf(child.pid)?.hwm ?? 0);

  const measurement: Measurement = {
    server: child.label,
    database,
    scenario: scenario.name,
    kind: scenario.kind,
    round,
    requestsPerSecond: result["2xx"] / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    max: result.latency.max,
    total: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    peakRss,
    otherCpu,
    cpuPerRequest: serverCpuMs / result.requests.total,
  };
  process.stdout.write(
    ` → ${fmtInt(measurement.requestsPerSecond)} req/s, p50 ${measurement.p50} ms, p99 ${measurement.p99} ms, ` +
      `${fmtCpu(measurement.cpuPerRequest)} CPU/req, non-2xx ${measurement.non2xx}\n`,
  );
  return measurement;
}

// ---------------------------------------------------------------------------------------------
// Plinth through its HTTP API

interface Credentials {
  cookie: string;
  slug: string;
  token: string;
}

async function setUpAccount(url: string): Promise<Credentials> {
  const cookie = await signUpCookie(url);

  const org = await postJson(url, "/api/org", cookie, { name: "Bench Org" }, 201);
  const slug = (org as { org: { slug: string } }).org.slug;
  const key = await postJson(url, `/api/org/${slug}/api-keys`, cookie, { name: "bench key", scope: "full" }, 201);
  const token = (key as { token: string }).token;
  if (!token?.startsWith("pak_")) throw new Error(`unexpected key response: ${JSON.stringify(key)}`);
  return { cookie, slug, token };
}

async function postJson(url: string, pathname: string, cookie: string, body: unknown, expect: number) {
  const response = await fetch(`${url}${pathname}`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: url, cookie },
    body: JSON.stringify(body),
  });
  const parsed = (await response.json()) as unknown;
  if (response.status !== expect) {
    throw new Error(`POST ${pathname}: ${response.status} ${JSON.stringify(parsed)}`);
  }
  return parsed;
}

function expectOrgList(slug: string) {
  return (body: unknown) => {
    const orgs = (body as { orgs?: { slug: string }[] }).orgs;
    if (orgs?.length !== 1 || orgs[0]?.slug !== slug) throw new Error(`unexpected org list: ${JSON.stringify(body)}`);
  };
}

function expectOverview(slug: string) {
  return (body: unknown) => {
    if ((body as { org?: { slug: string } }).org?.slug !== slug) {
      throw new Error(`unexpected overview: ${JSON.stringify(body)}`);
    }
  };
}

/** The Plinth scenarios chosen by BENCH_SCENARIOS, in the order each round measures them. */
function plinthScenarios({ cookie, slug, token }: Credentials): Scenario[] {
  const key = { authorization: `Bearer ${token}` };
  const scenarios: Scenario[] = [
    { kind: "key", name: "GET /api/orgs (pak_ key)", path: "/api/orgs", headers: key, check: expectOrgList(slug) },
    {
      kind: "key-overview",
      name: "GET /api/org/{slug}/overview (pak_ key)",
      path: `/api/org/${slug}/overview`,
      headers: key,
      check: expectOverview(slug),
    },
    {
      kind: "cookie",
      name: "GET /api/org/{slug}/overview (cookie)",
      path: `/api/org/${slug}/overview`,
      headers: { cookie },
      check: expectOverview(slug),
    },
  ];
  return scenarios.filter((scenario) => SCENARIOS.has(scenario.kind));
}

async function startPlinth(build: Build, database: "sqlite" | "postgres", databaseUrl?: string): Promise<Child> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "plinth-bench-"));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const name = build.label ? `plinth:${build.label}` : "plinth";
  const args = [...NODE_ARGS];
  if (CPU_PROF_DIR) {
    // One directory per server: the main thread (and tsx's loader thread) each write a profile.
    const dir = path.join(CPU_PROF_DIR, `${name.replace(":", "-")}-${database}`);
    mkdirSync(dir, { recursive: true });
    args.push("--cpu-prof", `--cpu-prof-dir=${dir}`);
  }
  args.push(...build.entry);
  return startChild(
    `${name}/${database}`,
    args,
    {
      PORT: String(port),
      HOST,
      PUBLIC_URL: `http://${HOST}:${port}`,
      DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      AUTH_SECRET: "bench-secret-bench-secret-bench-secret-0123",
      RATE_LIMIT_PER_MINUTE: "100000000",
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
      ...(METRICS_LABELS.has(build.label) ? { METRICS_TOKEN: "bench-metrics-token-0123456789" } : {}),
    },
    "/api/health",
    port,
  );
}

/**
 * Starts each build on a database of its own, then measures round after round: each scenario in
 * turn, and within a scenario each build in turn.
 */
async function benchPlinth(database: "sqlite" | "postgres"): Promise<Measurement[]> {
  const servers: { child: Child; scenarios: Scenario[] }[] = [];
  const drops: (() => Promise<void>)[] = [];
  try {
    for (const build of BUILDS) {
      let databaseUrl: string | undefined;
      if (database === "postgres") {
        const created = await createDatabase(PG_ADMIN_URL, "plinth_bench");
        cleanups.push(created.drop);
        drops.push(created.drop);
        databaseUrl = created.url;
      }
      const child = await startPlinth(build, database, databaseUrl);
      servers.push({ child, scenarios: plinthScenarios(await setUpAccount(child.url)) });
    }
    const results: Measurement[] = [];
    const count = servers[0]?.scenarios.length ?? 0;
    for (let round = 1; round <= ROUNDS; round++) {
      for (let i = 0; i < count; i++) {
        for (const { child, scenarios } of servers) {
          results.push(await measure(child, database, scenarios[i] as Scenario, round));
        }
      }
    }
    return results;
  } finally {
    // autocannon drops its sockets mid-request at the end of a run; let the servers finish the
    // orphaned requests before asking them to shut down.
    await sleep(1000);
    for (const { child } of servers) {
      await child.stop();
      const tail = child.output().trim();
      if (tail && !VERBOSE) console.log(`  (${child.label} output)\n${tail.replace(/^/gm, "    ")}`);
    }
    for (const drop of drops) {
      await drop().catch((error: unknown) => console.error("could not drop a bench database:", error));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Baseline

interface Baseline {
  measure(): Promise<Measurement>;
  stop(): Promise<void>;
}

/** Starts the baseline server; it is measured at the start of the run and again at the end. */
async function startBaseline(): Promise<Baseline> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "plinth-bench-baseline-"));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  const token = `pak_${randomBytes(32).toString("hex")}`;
  const port = await freePort();
  const child = await startChild(
    "baseline",
    [
      ...(CPU_PROF_DIR ? ["--cpu-prof", `--cpu-prof-dir=${path.join(CPU_PROF_DIR, "baseline")}`] : []),
      "--import",
      "tsx",
      "bench/api/baseline.ts",
    ],
    { PORT: String(port), DATA_DIR: dataDir, BASELINE_TOKEN: token },
    "/health",
    port,
  );
  let runs = 0;
  return {
    measure: async () => {
      runs += 1;
      return measure(
        child,
        "sqlite",
        {
          kind: "baseline",
          name: `GET /api/orgs (bearer), run ${runs}`,
          path: "/api/orgs",
          headers: { authorization: `Bearer ${token}` },
          check: expectOrgList("baseline-org"),
        },
        runs,
      );
    },
    stop: () => child.stop(),
  };
}

// ---------------------------------------------------------------------------------------------
// Report

function fmtInt(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

function fmtCpu(ms: number): string {
  return Number.isNaN(ms) ? "n/a" : `${(ms * 1000).toFixed(0)} µs`;
}

function fmtMb(bytes: number): string {
  return bytes > 0 ? `${(bytes / 1024 / 1024).toFixed(0)} MB` : "n/a";
}

/** A markdown table; columns in `numeric` are right-aligned. */
function printMarkdown(header: string[], lines: string[][], numeric: Set<number>): void {
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? "").length)));
  const render = (cells: string[]) =>
    `| ${cells.map((cell, i) => (numeric.has(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0))).join(" | ")} |`;
  console.log(render(header));
  console.log(`|${widths.map((w, i) => (numeric.has(i) ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`);
  for (const line of lines) console.log(render(line));
}

function percent(part: number, whole: number | undefined): string {
  return whole ? `${((part / whole) * 100).toFixed(1)}%` : "n/a";
}

function printTable(rows: Measurement[], reference: number | undefined): void {
  const header = [
    "server",
    "db",
    "scenario",
    "round",
    "req/s",
    "p50",
    "p99",
    "max",
    "non-2xx",
    "errors",
    "peak RSS",
    "other CPU",
    "CPU/req",
    "vs baseline",
  ];
  const lines = rows.map((m) => [
    m.server.split("/")[0] ?? m.server,
    m.database,
    m.scenario,
    String(m.round),
    fmtInt(m.requestsPerSecond),
    `${m.p50} ms`,
    `${m.p99} ms`,
    `${m.max} ms`,
    String(m.non2xx),
    String(m.errors),
    fmtMb(m.peakRss),
    Number.isNaN(m.otherCpu) ? "n/a" : `${m.otherCpu.toFixed(2)} cores`,
    fmtCpu(m.cpuPerRequest),
    percent(m.requestsPerSecond, reference),
  ]);
  printMarkdown(header, lines, new Set([3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]));
}

/** One server's figures for one scenario over all rounds: means of the rounds' figures. */
interface Summary {
  server: string;
  database: string;
  scenario: string;
  kind: ScenarioKind;
  rounds: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  cpuPerRequest: number;
  /** The rounds' req/s, in order. */
  byRound: number[];
}

function summarize(rows: Measurement[]): Summary[] {
  const groups = new Map<string, Measurement[]>();
  for (const row of rows.filter((r) => r.kind !== "baseline")) {
    const key = `${row.server}\u0000${row.scenario}`;
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;
  return [...groups.values()].map((group) => {
    const first = group[0] as Measurement;
    return {
      server: first.server,
      database: first.database,
      scenario: first.scenario,
      kind: first.kind,
      rounds: group.length,
      requestsPerSecond: mean(group.map((m) => m.requestsPerSecond)),
      p50: mean(group.map((m) => m.p50)),
      p99: mean(group.map((m) => m.p99)),
      cpuPerRequest: mean(group.map((m) => m.cpuPerRequest)),
      byRound: group.map((m) => m.requestsPerSecond),
    };
  });
}

/** The same server's key-authenticated `GET /api/orgs`, the yardstick of the other scenarios. */
function keyRead(summaries: Summary[], of: Summary): Summary | undefined {
  return summaries.find((s) => s.server === of.server && s.kind === "key");
}

function printSummary(summaries: Summary[], reference: number | undefined): void {
  const header = [
    "server",
    "db",
    "scenario",
    "rounds",
    "req/s",
    "p50",
    "p99",
    "vs key /orgs",
    "by round",
    "CPU/req",
    "CPU vs key /orgs",
    "vs baseline",
  ];
  const lines = summaries.map((s) => {
    const key = keyRead(summaries, s);
    const byRound = key
      ? s.byRound.map((rate, i) => percent(rate, key.byRound[i])).join(", ")
      : s.byRound.map((rate) => fmtInt(rate)).join(", ");
    return [
      s.server.split("/")[0] ?? s.server,
      s.database,
      s.scenario,
      String(s.rounds),
      fmtInt(s.requestsPerSecond),
      `${s.p50.toFixed(1)} ms`,
      `${s.p99.toFixed(1)} ms`,
      percent(s.requestsPerSecond, key?.requestsPerSecond),
      byRound,
      fmtCpu(s.cpuPerRequest),
      key ? `${(s.cpuPerRequest / key.cpuPerRequest).toFixed(2)}×` : "n/a",
      percent(s.requestsPerSecond, reference),
    ];
  });
  printMarkdown(header, lines, new Set([3, 4, 5, 6, 7, 9, 10, 11]));
}

async function main(): Promise<void> {
  console.log(
    `Plinth API benchmark: ${CONNECTIONS} connections, ${WARMUP_S}s warm-up + ${DURATION_S}s per scenario, ` +
      `${ROUNDS} round${ROUNDS > 1 ? "s" : ""}, over ${HOST} (node ${process.version})`,
  );
  const rows: Measurement[] = [];
  // The baseline is measured before and after Plinth and the mean is the reference, so that a
  // change in background load during the run moves the reference less.
  const baselineRuns: Measurement[] = [];
  const baseline = ONLY.has("baseline") ? await startBaseline() : undefined;
  if (baseline) baselineRuns.push(await baseline.measure());
  if (ONLY.has("sqlite")) rows.push(...(await benchPlinth("sqlite")));
  if (ONLY.has("postgres")) rows.push(...(await benchPlinth("postgres")));
  if (baseline && rows.length > 0) baselineRuns.push(await baseline.measure());
  await baseline?.stop();
  rows.unshift(...baselineRuns);
  const reference =
    baselineRuns.length > 0
      ? baselineRuns.reduce((sum, run) => sum + run.requestsPerSecond, 0) / baselineRuns.length
      : undefined;

  console.log("");
  printTable(rows, reference);
  console.log("");
  const summaries = summarize(rows);
  console.log(
    "Over all rounds (req/s, p50, p99 and CPU/req: the means of the rounds'; by round: each round's req/s vs key /orgs; " +
      "CPU vs key /orgs: CPU per request as a multiple of the key read's):",
  );
  console.log("");
  printSummary(summaries, reference);
  console.log("");

  let failed = false;
  for (const row of rows) {
    if (row.non2xx > 0 || row.errors > 0) {
      failed = true;
      console.log(`✗ ${row.server} ${row.scenario}: ${row.non2xx} non-2xx responses, ${row.errors} errors/timeouts`);
    }
  }
  if (reference) {
    console.log(
      `Baseline reference: ${fmtInt(reference)} req/s (mean of ${baselineRuns.length} run${baselineRuns.length > 1 ? "s" : ""})`,
    );
    console.log(
      `Target: key-authenticated GET /api/orgs >= ${TARGET_RATIO * 100}% of the baseline ` +
        `(>= ${fmtInt(reference * TARGET_RATIO)} req/s here) with p99 <= ${TARGET_P99_MS} ms`,
    );
    for (const summary of summaries.filter((s) => s.kind === "key")) {
      const ratio = summary.requestsPerSecond / reference;
      const met = ratio >= TARGET_RATIO && summary.p99 <= TARGET_P99_MS;
      console.log(
        `  ${met ? "MET   " : "MISSED"} ${summary.server.padEnd(24)} ${(ratio * 100).toFixed(1)}% of baseline, p99 ${summary.p99.toFixed(1)} ms`,
      );
    }
  }
  const cookies = summaries.filter((s) => s.kind === "cookie" && keyRead(summaries, s));
  if (cookies.length > 0) {
    console.log(
      `Target: cookie-authenticated GET /api/org/{slug}/overview >= ${COOKIE_TARGET_RATIO * 100}% of the same ` +
        "server's key-authenticated GET /api/orgs",
    );
    for (const summary of cookies) {
      const ratio = summary.requestsPerSecond / (keyRead(summaries, summary) as Summary).requestsPerSecond;
      const cost = summary.cpuPerRequest / (keyRead(summaries, summary) as Summary).cpuPerRequest;
      console.log(
        `  ${ratio >= COOKIE_TARGET_RATIO ? "MET   " : "MISSED"} ${summary.server.padEnd(24)} ${(ratio * 100).toFixed(1)}% of the key read, ` +
          `p50 ${summary.p50.toFixed(1)} ms, p99 ${summary.p99.toFixed(1)} ms, ${cost.toFixed(2)}× its CPU per request`,
      );
    }
  }
  const noise = Math.max(
    ...rows
      .filter((r) => r.database === "sqlite")
      .map((r) => r.otherCpu)
      .filter((n) => !Number.isNaN(n)),
    0,
  );
  if (noise > 0.4) {
    console.log(
      `Note: other processes on this machine used up to ${noise.toFixed(2)} cores during the SQLite measurements; ` +
        "absolute figures are depressed and noisy (the ratios within a run are the comparable figures).",
    );
  }
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
