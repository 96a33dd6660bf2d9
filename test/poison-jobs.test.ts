/**
 * Poison jobs (issue 20): a job whose handler kills its worker's process never fails an attempt
 * by an error, so only its lapsed leases can count against it. Real processes: the worker of
 * test/fixtures/poison-worker.ts, started again and again on the test app's database (SQLite, or
 * its PostgreSQL schema), each killing itself (SIGKILL) on the job, until the job is dead.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LEASE_MARGIN_MS } from "../src/jobs/queue.ts";
import { sleep, startApp, type TestApp, until } from "./harness.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const MAX_ATTEMPTS = 3;
/** Each lease lapses this long after its claim, plus LEASE_MARGIN_MS. */
const TIMEOUT_MS = 500;
const LAPSED_ERROR = "the worker running the last attempt stopped before it finished (its lease lapsed)";

let app: TestApp;
const children: ChildProcess[] = [];

beforeAll(async () => {
  // The API process runs no jobs: only the poison workers do.
  app = await startApp({ WORKERS: "0" });
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await app?.close();
});

/** Starts a poison worker on the app's database; `exited` resolves to its signal (or exit code). */
function startPoisonWorker(runsFile: string) {
  const { config } = app;
  const env: Record<string, string | undefined> = {
    ...process.env,
    NODE_ENV: "production",
    LOG_LEVEL: "info",
    DATA_DIR: config.dataDir,
    POISON_RUNS_FILE: runsFile,
  };
  delete env.DATABASE_URL;
  delete env.DATABASE_SCHEMA;
  delete env.TEST;
  delete env.VITEST;
  if (config.databaseUrl)
    Object.assign(env, { DATABASE_URL: config.databaseUrl, DATABASE_SCHEMA: config.databaseSchema });
  const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "test/fixtures/poison-worker.ts")], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  const keep = (chunk: Buffer) => {
    output += chunk.toString("utf8");
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<string | number | null>((resolve) =>
    child.once("exit", (code, signal) => resolve(signal ?? code)),
  );
  return { child, exited, output: () => output };
}

describe("a job that kills the process running it", () => {
  it(`runs ${MAX_ATTEMPTS} times, one worker dying each time, then is dead-lettered without running again`, async () => {
    const { db, jobs } = app.server.deps;
    const runsFile = path.join(app.config.dataDir, "poison-runs");
    /** Each run the handler began: the attempt it was, and when (ms). */
    const runs = () =>
      existsSync(runsFile)
        ? readFileSync(runsFile, "utf8")
            .trim()
            .split("\n")
            .map((line) => line.split(" ").map(Number) as [number, number])
        : [];
    const job = () => db.selectFrom("jobs").selectAll().where("kind", "=", "test.poison").executeTakeFirstOrThrow();
    await jobs.enqueue(db, { kind: "test.poison", payload: {}, maxAttempts: MAX_ATTEMPTS, timeoutMs: TIMEOUT_MS });

    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      // Claims the job once the last worker's lease has lapsed, and dies running it.
      const worker = startPoisonWorker(runsFile);
      const ended = await Promise.race([worker.exited, sleep(30_000).then(() => "still running")]);
      expect(ended, worker.output()).toBe("SIGKILL");
      expect(runs().map(([n]) => n)).toEqual(Array.from({ length: attempt }, (_, i) => i + 1));
      expect(await job()).toMatchObject({ status: "running", attempts: attempt, last_error: null });
    }
    // Each run after the first waited for the lease of the one before to lapse (the lease was
    // taken a moment before that run began, so the margin alone is a safe lower bound).
    const times = runs().map(([, at]) => at);
    for (let i = 1; i < times.length; i++) {
      expect((times[i] as number) - (times[i - 1] as number)).toBeGreaterThanOrEqual(LEASE_MARGIN_MS);
    }

    // The next worker claims it when the last lease lapses, and dead-letters it instead of dying.
    const survivor = startPoisonWorker(runsFile);
    await until("the job to be dead-lettered", async () => (await job()).status === "dead", 30_000);
    const dead = await job();
    expect(dead).toMatchObject({
      status: "dead",
      attempts: MAX_ATTEMPTS,
      locked_by: null,
      lease_until: null,
      last_error: LAPSED_ERROR,
    });
    expect(dead.finished_at).not.toBeNull();
    await sleep(500);
    expect(runs()).toHaveLength(MAX_ATTEMPTS);
    expect(survivor.child.exitCode, survivor.output()).toBeNull();
    expect(survivor.child.signalCode, survivor.output()).toBeNull();
    expect(survivor.output()).toContain("job dead-lettered");
    survivor.child.kill("SIGTERM");
    await survivor.exited;
  }, 90_000);
});
