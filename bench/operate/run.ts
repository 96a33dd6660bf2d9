import { cpus } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { apiJson, benchProject, envInt, memoryOf, sleep, startBenchPlinth } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const DISTS = (process.env.BENCH_DISTS ?? "dist").split(",").map((d) => path.resolve(ROOT, d.trim()));
const ROUNDS = envInt("BENCH_ROUNDS", 2);
const CONNECTIONS = envInt("BENCH_CONNECTIONS", 32);
const DURATION = envInt("BENCH_DURATION", 8);
const ONLY = new Set((process.env.BENCH_ONLY ?? "sqlite,postgres").split(",").map((s) => s.trim()));
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const MB = 1024 * 1024;

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
  const { url, child, stop } = await startBenchPlinth({
    root: ROOT,
    dist,
    database,
    pgAdminUrl: PG_ADMIN_URL,
    name: "operate",
  });
  try {
    const { adminToken, ws } = await benchProject(url, "Operate");
    await apiJson(`${ws}/collections`, { method: "POST", token: adminToken, body: JSON.stringify({ slug: "posts" }) });
    let itemId = "";
    for (let n = 0; n < 100; n++) {
      const { item } = await apiJson(`${ws}/items/posts`, {
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
    await stop();
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
