/**
 * Scale benchmark (issue 26): one Plinth process serving many small projects.
 *
 *   npm run build && npx tsx bench/scale/run.ts
 *
 * For each database: creates BENCH_PROJECTS projects through the API (creation rate, until every
 * one is active), then measures, in alternating rounds, workspace reads round-robin across all of
 * them (`GET /w/{id}/api/collections`, each project's own admin token) next to the same read on
 * one project; then the process's open descriptors (peak), RSS (before the reads, their peak, and
 * once idle workspaces have been closed, BENCH_IDLE_WAIT after the load), and a restart: SIGTERM, start again on the same data, time until /api/health answers 200,
 * and whether any outbox sweep failed. Plinth runs as `npm start` runs it (dist/), as a child
 * process; the load generator (autocannon) runs in this process.
 *
 * Environment (all optional):
 *   BENCH_PROJECTS       projects to create                     (10000)
 *   BENCH_ONLY           comma list of sqlite,postgres          (both)
 *   BENCH_CONNECTIONS    concurrent connections                  (32)
 *   BENCH_DURATION       seconds measured per round and read     (10)
 *   BENCH_ROUNDS         rounds of (round-robin, one project)    (2)
 *   BENCH_CREATORS       project creations in flight at once     (16)
 *   BENCH_MAX_OPEN       WORKSPACE_MAX_OPEN for Plinth           (its default, from the file limit)
 *   BENCH_IDLE_WAIT      seconds to wait after the load before reading idle RSS (95)
 *   BENCH_PG_URL         PostgreSQL maintenance database         (postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_NODE_ARGS      extra node flags for Plinth, space-separated (e.g. --cpu-prof --cpu-prof-dir=prof)
 *   BENCH_SKIP_SINGLE    1: measure round-robin reads only (profiling)
 *   BENCH_VERBOSE        1: pass Plinth's output through
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon, { type Result } from "autocannon";
import { createDatabase, envInt, freePort, memoryOf, signUpCookie, sleep, spawnWatched } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const HOST = "127.0.0.1";
const PROJECTS = envInt("BENCH_PROJECTS", 10_000);
const ONLY = new Set((process.env.BENCH_ONLY ?? "sqlite,postgres").split(",").map((s) => s.trim()));
const CONNECTIONS = envInt("BENCH_CONNECTIONS", 32);
const DURATION_S = envInt("BENCH_DURATION", 10);
const ROUNDS = envInt("BENCH_ROUNDS", 2);
const CREATORS = envInt("BENCH_CREATORS", 16);
const IDLE_WAIT_S = envInt("BENCH_IDLE_WAIT", 95);
const MAX_OPEN = process.env.BENCH_MAX_OPEN;
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const VERBOSE = process.env.BENCH_VERBOSE === "1";
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean);
const SKIP_SINGLE = process.env.BENCH_SKIP_SINGLE === "1";
const MB = 1024 * 1024;

/** Issue 26's targets. */
const TARGET_SHARE = 0.5;
const TARGET_RSS_SQLITE = 400 * MB;
const TARGET_RESTART_MS = 5_000;

function descriptorsOf(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

interface Plinth {
  pid: number;
  url: string;
  /** Milliseconds from spawn until /api/health answered 200. */
  readyMs: number;
  /** Lines Plinth logged at error level or above so far. */
  errors(): string[];
  stop(): Promise<void>;
}

/** Starts Plinth (dist/) and waits until it is healthy. */
async function startPlinth(env: Record<string, string>, port: number): Promise<Plinth> {
  const inherited = { ...process.env };
  delete inherited.DATABASE_URL;
  delete inherited.DATABASE_SCHEMA;
  const started = performance.now();
  const errors: string[] = [];
  const child = spawnWatched(
    [...NODE_ARGS, "--max-semi-space-size=32", path.join(ROOT, "dist/main.js")],
    { cwd: ROOT, env: { ...inherited, ...env, PORT: String(port), HOST, PUBLIC_URL: `http://${HOST}:${port}` } },
    (text) => {
      if (VERBOSE) process.stderr.write(text);
      for (const line of text.split("\n")) if (/"level":(50|60)/.test(line)) errors.push(line.slice(0, 500));
    },
  );
  const url = `http://${HOST}:${port}`;
  for (;;) {
    if (!child.alive()) throw new Error(`plinth exited before it was ready:\n${child.tail()}`);
    try {
      if ((await fetch(`${url}/api/health`)).ok) break;
    } catch {
      // not listening yet
    }
    if (performance.now() - started > 120_000) {
      await child.stop();
      throw new Error(`plinth did not become healthy within 120 s:\n${child.tail()}`);
    }
    await sleep(20);
  }
  return { pid: child.pid, url, readyMs: performance.now() - started, errors: () => errors, stop: () => child.stop() };
}

async function api(url: string, method: string, route: string, token: string, body?: unknown) {
  const response = await fetch(`${url}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${text}`);
  return JSON.parse(text);
}

interface Project {
  id: string;
  adminToken: string;
}

/** Creates PROJECTS projects, CREATORS at a time; resolves once every one is active. */
async function createProjects(
  url: string,
  slug: string,
  key: string,
): Promise<{ projects: Project[]; perSecond: number }> {
  const started = performance.now();
  const projects: Project[] = [];
  let next = 0;
  const creator = async () => {
    while (next < PROJECTS) {
      const n = next++;
      const created = await api(url, "POST", `/api/org/${slug}/projects`, key, { name: `scale ${n}` });
      projects.push({ id: created.project.id, adminToken: created.adminToken });
      if (projects.length % 1000 === 0) process.stdout.write(`    ${projects.length} created\n`);
    }
  };
  await Promise.all(Array.from({ length: CREATORS }, creator));
  for (;;) {
    let active = 0;
    for (let offset = 0; offset < PROJECTS; offset += 500) {
      const page = await api(url, "GET", `/api/org/${slug}/projects?limit=500&offset=${offset}`, key);
      active += page.projects.filter((p: { status: string }) => p.status === "active").length;
    }
    if (active === PROJECTS) break;
    await sleep(1_000);
  }
  return { projects, perSecond: PROJECTS / ((performance.now() - started) / 1000) };
}

interface Reading {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
}

/** Workspace reads for DURATION_S: round-robin across `projects`, or always the first. */
async function measureReads(plinth: Plinth, projects: Project[], roundRobin: boolean): Promise<Reading> {
  let next = 0;
  const result: Result = await autocannon({
    url: plinth.url,
    connections: CONNECTIONS,
    duration: DURATION_S,
    timeout: 10_000,
    requests: [
      {
        method: "GET",
        setupRequest: (request) => {
          const project = projects[roundRobin ? next++ % projects.length : 0] as Project;
          return {
            ...request,
            path: `/w/${project.id}/api/collections`,
            headers: { authorization: `Bearer ${project.adminToken}` },
          };
        },
      },
    ],
  });
  return {
    requestsPerSecond: result["2xx"] / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.non2xx + result.errors + result.timeouts,
  };
}

async function runOn(database: "sqlite" | "postgres"): Promise<void> {
  console.log(`\n== ${database}: ${PROJECTS} projects`);
  const dataDir = mkdtempSync(path.join(tmpdir(), "plinth-scale-"));
  const created = database === "postgres" ? await createDatabase(PG_ADMIN_URL, "plinth_scale") : undefined;
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    LOG_LEVEL: "error",
    AUTH_SECRET: "bench-secret-bench-secret-bench-secret-0123",
    RATE_LIMIT_PER_MINUTE: "100000000",
    ...(created ? { DATABASE_URL: created.url } : {}),
    ...(MAX_OPEN ? { WORKSPACE_MAX_OPEN: MAX_OPEN } : {}),
  };
  const port = await freePort(HOST);
  let plinth = await startPlinth(env, port);
  try {
    const cookie = await signUpCookie(plinth.url);
    const orgResponse = await fetch(`${plinth.url}/api/org`, {
      method: "POST",
      headers: { cookie, origin: plinth.url, "content-type": "application/json" },
      body: JSON.stringify({ name: "Scale" }),
    });
    const slug = ((await orgResponse.json()) as { org: { slug: string } }).org.slug;
    const keyResponse = await fetch(`${plinth.url}/api/org/${slug}/api-keys`, {
      method: "POST",
      headers: { cookie, origin: plinth.url, "content-type": "application/json" },
      body: JSON.stringify({ name: "scale", scope: "full" }),
    });
    const key = ((await keyResponse.json()) as { token: string }).token;

    const { projects, perSecond } = await createProjects(plinth.url, slug, key);
    console.log(`  created ${PROJECTS} projects: ${perSecond.toFixed(0)} projects/s (until all active)`);

    const before = memoryOf(plinth.pid).rss;
    let peakFds = descriptorsOf(plinth.pid);
    const sampler = setInterval(() => {
      peakFds = Math.max(peakFds, descriptorsOf(plinth.pid));
    }, 100);
    const rows: Array<{ round: number; kind: string } & Reading> = [];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const roundRobin of SKIP_SINGLE ? [true] : [true, false]) {
        const reading = await measureReads(plinth, projects, roundRobin);
        rows.push({ round, kind: roundRobin ? "round-robin" : "one project", ...reading });
        console.log(
          `  round ${round} ${(roundRobin ? "round-robin" : "one project").padEnd(12)} ${reading.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${reading.p50} ms  p99 ${reading.p99} ms  errors ${reading.errors}`,
        );
      }
    }
    clearInterval(sampler);
    const peak = memoryOf(plinth.pid).hwm;
    await sleep(IDLE_WAIT_S * 1000);
    const idle = memoryOf(plinth.pid).rss;
    const mean = (kind: string) =>
      rows.filter((row) => row.kind === kind).reduce((sum, row) => sum + row.requestsPerSecond, 0) / ROUNDS;
    const share = mean("round-robin") / mean("one project");
    const errors = rows.reduce((sum, row) => sum + row.errors, 0);
    console.log(
      `  round-robin ${(share * 100).toFixed(1)}% of one project (target ≥ ${TARGET_SHARE * 100}%), errors ${errors}` +
        `, descriptors peak ${peakFds}, RSS before ${(before / MB).toFixed(0)} MB, peak ${(peak / MB).toFixed(0)} MB` +
        (database === "sqlite" ? ` (target ≤ ${TARGET_RSS_SQLITE / MB})` : "") +
        `, idle ${IDLE_WAIT_S} s after ${(idle / MB).toFixed(0)} MB, descriptors then ${descriptorsOf(plinth.pid)}`,
    );

    await plinth.stop();
    plinth = await startPlinth(env, port);
    await sleep(5_000);
    const sweepFailures = plinth.errors().filter((line) => line.includes("sweep"));
    console.log(
      `  restart: healthy after ${plinth.readyMs.toFixed(0)} ms (target ≤ ${TARGET_RESTART_MS}), ` +
        `failed sweeps ${sweepFailures.length}, errors logged ${plinth.errors().length}, descriptors 5 s after ${descriptorsOf(plinth.pid)}`,
    );
    for (const line of plinth.errors().slice(0, 5)) console.log(`    ${line}`);
  } finally {
    await plinth.stop();
    await created?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

console.log(`scale benchmark: ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), Node ${process.version}`);
for (const database of ["sqlite", "postgres"] as const) {
  if (ONLY.has(database)) await runOn(database);
}
