/**
 * How long `npm start` takes to serve (issue 32 part 6: `/api/health` within 3 s on a quiet
 * machine): from spawning `npm start` in the repository (it runs what `npm install` built and
 * compiles nothing) to the first 200 from `/api/health`, on a fresh DATA_DIR (embedded SQLite,
 * migrations included), BENCH_ROUNDS (5) times. Prints each time and the median.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { envInt, freePort, sleep } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const ROUNDS = envInt("BENCH_ROUNDS", 5);

async function once(): Promise<number> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "plinth-start-"));
  const port = await freePort("127.0.0.1");
  const started = performance.now();
  const child = spawn("npm", ["start", "--silent"], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "error" },
    stdio: "ignore",
    detached: true,
  });
  try {
    for (;;) {
      const healthy = await fetch(`http://127.0.0.1:${port}/api/health`).then(
        (response) => response.ok,
        () => false,
      );
      if (healthy) return performance.now() - started;
      if (child.exitCode !== null) throw new Error(`npm start exited (${child.exitCode})`);
      await sleep(20);
    }
  } finally {
    // npm's child (node) is in the same process group.
    if (child.pid) process.kill(-child.pid, "SIGTERM");
    await new Promise((resolve) => child.once("exit", resolve));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const times: number[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  const ms = await once();
  times.push(ms);
  console.log(`round ${round}: /api/health answered ${ms.toFixed(0)} ms after npm start`);
}
times.sort((a, b) => a - b);
console.log(
  `median ${times[Math.floor(times.length / 2)]?.toFixed(0)} ms, fastest ${times[0]?.toFixed(0)} ms, slowest ${times.at(-1)?.toFixed(0)} ms`,
);
