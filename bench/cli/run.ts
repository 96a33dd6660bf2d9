/**
 * How fast the `plinth` command starts (issue 32: the median of 10 runs of `plinth orgs list`
 * against a local server at most 300 ms on this machine): wall time of `node bin/plinth.js
 * orgs list` (an API key in PLINTH_API_KEY, the answer a table) and of `plinth --help`, each run
 * BENCH_RUNS (10) times one after another, against a Plinth started from `dist/` on SQLite.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { apiJson, envInt, signUpCookie, startBenchPlinth } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const RUNS = envInt("BENCH_RUNS", 10);
const BIN = path.join(ROOT, "bin/plinth.js");

function timed(args: string[], env: NodeJS.ProcessEnv): number[] {
  const times: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const started = performance.now();
    const result = spawnSync(process.execPath, [BIN, ...args], { env, encoding: "utf8" });
    times.push(performance.now() - started);
    if (result.status !== 0) throw new Error(`plinth ${args.join(" ")} exited ${result.status}: ${result.stderr}`);
  }
  return times.sort((a, b) => a - b);
}

const plinth = await startBenchPlinth({
  root: ROOT,
  dist: path.join(ROOT, "dist"),
  database: "sqlite",
  pgAdminUrl: "",
  name: "cli",
});
try {
  const cookie = await signUpCookie(plinth.url);
  const { org } = await apiJson(`${plinth.url}/api/org`, {
    method: "POST",
    cookie,
    body: JSON.stringify({ name: "CLI Bench" }),
  });
  const { token } = await apiJson(`${plinth.url}/api/org/${org.slug}/api-keys`, {
    method: "POST",
    cookie,
    body: JSON.stringify({ name: "bench", scope: "read-only" }),
  });
  const env = { ...process.env, PLINTH_URL: plinth.url, PLINTH_API_KEY: token, XDG_CONFIG_HOME: "/nonexistent" };
  for (const args of [["orgs", "list"], ["--help"]]) {
    const times = timed(args, env);
    const median = times[Math.floor(times.length / 2)] as number;
    console.log(
      `plinth ${args.join(" ").padEnd(10)} median ${median.toFixed(0)} ms, fastest ${times[0]?.toFixed(0)} ms, slowest ${times.at(-1)?.toFixed(0)} ms (${RUNS} runs)`,
    );
  }
} finally {
  await plinth.stop();
}
