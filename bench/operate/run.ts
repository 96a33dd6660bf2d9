/**
 * Operating benchmark (issue 22, "Performance"): what usage metering and tenant error recording
 * cost the workspace API's reads, and whether a flood of errors from an anonymous client keeps
 * memory flat.
 *
 *   npm run build && npx tsx bench/operate/run.ts
 *
 * For each database and each build (BENCH_DISTS, comma-separated, default `dist`; give the build
 * of a commit before metering to compare, rounds alternate between builds): a Plinth child
 * process, one project with 100 items, then autocannon (BENCH_CONNECTIONS connections,
 * BENCH_DURATION s after 2 s of warm-up) on
 *   - reads: GET one item with the admin token (200s; metered);
 *   - flood: GET an item of the project with no credentials (401s: each one a tenant error),
 *     then a made-up project id (404s: nothing recorded),
 * printing req/s, p99 and the process's RSS before, at its peak and after each.
 *
 * Environment (all optional):
 *   BENCH_DISTS        builds to compare        (dist)
 *   BENCH_ROUNDS       rounds per build         (2)
 *   BENCH_CONNECTIONS  autocannon connections   (32)
 *   BENCH_DURATION     seconds measured         (8)
 *   BENCH_ONLY         sqlite,postgres          (both)
 *   BENCH_PG_URL       PostgreSQL maintenance database (postgres://postgres@127.0.0.1:5432/postgres)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { createDatabase, envInt, freePort, memoryOf, signUpCookie, sleep, spawnWatched } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const HOST = "127.0.0.1";
const DISTS = (process.env.BENCH_DISTS ?? "dist").split(",").map((d) => path.resolve(ROOT, d.trim()));
const ROUNDS = envInt("BENCH_ROUNDS", 2);
const CONNECTIONS = envInt("BENCH_CONNECTIONS", 32);
const DURATION = envInt("BENCH_DURATION", 8);
const ONLY = new Set((process.env.BENCH_ONLY ?? "sqlite,postgres").split(",").map((s) => s.trim()));
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const MB = 1024 * 1024;

async function json(url: string, init: RequestInit & { token?: string; cookie?: string }) {
  const headers: Record<string, string> = { "content-type": "application/json", origin: new URL(url).origin };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  if (init.cookie) headers.cookie = init.cookie;
  const response = await fetch(url, { ...init, headers });
  const text = await response.text();
  if (!response.ok) throw new Error(`${init.method ?? "GET"} ${url}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

async function load(pid: number, url: string, headers: Record<string, string>, expected: number) {
  const run = (duration: number) => autocannon({ url, connections: CONNECTIONS, duration, headers });
  await run(2);
  const before = memoryOf(pid).rss;
  const result = await run(DURATION);
  await sleep(1_500);
  const after = memoryOf(pid).rss;
  const matching = result.statusCodeStats?.[String(expected) as "200"]?.count ?? 0;
  return {
    rps: matching / DURATION,
    p99: result.latency.p99,
    other: result.requests.total - matching,
    rss: { before, peak: memoryOf(pid).hwm, after },
  };
}

async function runOnce(database: "sqlite" | "postgres", dist: string) {
  const dataDir = mkdtempSync(path.join(tmpdir(), "plinth-operate-"));
  const created = database === "postgres" ? await createDatabase(PG_ADMIN_URL, "plinth_operate") : undefined;
  const port = await freePort(HOST);
  const url = `http://${HOST}:${port}`;
  const inherited = { ...process.env };
  delete inherited.DATABASE_URL;
  const child = spawnWatched(["--max-semi-space-size=32", path.join(dist, "main.js")], {
    cwd: ROOT,
    env: {
      ...inherited,
      PORT: String(port),
      HOST,
      PUBLIC_URL: url,
      DATA_DIR: dataDir,
      LOG_LEVEL: "error",
      AUTH_SECRET: "bench-secret-bench-secret-bench-secret-0123",
      RATE_LIMIT_PER_MINUTE: "100000000",
      ...(created ? { DATABASE_URL: created.url } : {}),
    },
  });
  try {
    for (;;) {
      if (!child.alive()) throw new Error(`plinth exited:\n${child.tail()}`);
      if (
        await fetch(`${url}/api/health`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      await sleep(50);
    }
    const cookie = await signUpCookie(url);
    const { org } = await json(`${url}/api/org`, { method: "POST", cookie, body: JSON.stringify({ name: "Operate" }) });
    const { project, adminToken } = await json(`${url}/api/org/${org.slug}/projects`, {
      method: "POST",
      cookie,
      body: JSON.stringify({ name: "Busy" }),
    });
    for (;;) {
      const read = await json(`${url}/api/org/${org.slug}/projects/${project.slug}`, { cookie });
      if (read.project.status === "active") break;
      await sleep(100);
    }
    const ws = `${url}/w/${project.id}/api`;
    await json(`${ws}/collections`, { method: "POST", token: adminToken, body: JSON.stringify({ slug: "posts" }) });
    let itemId = "";
    for (let n = 0; n < 100; n++) {
      const { item } = await json(`${ws}/items/posts`, {
        method: "POST",
        token: adminToken,
        body: JSON.stringify({ n }),
      });
      itemId = item.id;
    }
    const reads = await load(child.pid, `${ws}/items/posts/${itemId}`, { authorization: `Bearer ${adminToken}` }, 200);
    const anonymous = await load(child.pid, `${ws}/items/posts/${itemId}`, {}, 401);
    const madeUp = await load(child.pid, `${url}/w/prj_00000000000000000000000000/api/items/posts/x`, {}, 404);
    return { reads, anonymous, madeUp };
  } finally {
    await child.stop();
    await created?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const line = (label: string, r: Awaited<ReturnType<typeof runOnce>>["reads"]) =>
  `  ${label.padEnd(26)} ${r.rps.toFixed(0).padStart(6)} req/s  p99 ${String(r.p99).padStart(4)} ms  ` +
  `RSS ${(r.rss.before / MB).toFixed(0)} → peak ${(r.rss.peak / MB).toFixed(0)} → ${(r.rss.after / MB).toFixed(0)} MB` +
  (r.other > 0 ? `  (${r.other} other answers)` : "");

console.log(`operate benchmark: ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), Node ${process.version}`);
for (const database of ["sqlite", "postgres"] as const) {
  if (!ONLY.has(database)) continue;
  for (let round = 1; round <= ROUNDS; round++) {
    for (const dist of DISTS) {
      const result = await runOnce(database, dist);
      console.log(`\n== ${database}, round ${round}, ${path.relative(ROOT, dist) || dist}`);
      console.log(line("reads (200, metered)", result.reads));
      console.log(line("anonymous flood (401s)", result.anonymous));
      console.log(line("made-up project (404s)", result.madeUp));
    }
  }
}
