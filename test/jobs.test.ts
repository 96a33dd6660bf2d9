import { sql } from "kysely";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/database.ts";
import type { Deps } from "../src/deps.ts";
import { type JobHandlers, PermanentJobError } from "../src/jobs/handlers.ts";
import { backoffMs } from "../src/jobs/queue.ts";
import { Worker } from "../src/jobs/worker.ts";
import { dialect, sleep, startApp, type TestApp, until } from "./harness.ts";

let app: TestApp;
let deps: Deps;
const workers: Worker[] = [];

beforeAll(async () => {
  // No built-in workers: each test runs its own, with its own handlers.
  app = await startApp({ WORKERS: "0" });
  deps = app.server.deps;
});
afterEach(async () => {
  for (const worker of workers.splice(0)) await worker.stop(1_000);
  await deps.db.deleteFrom("jobs").execute();
});
afterAll(() => app.close());

async function runWorker(handlers: JobHandlers, concurrency = 4, workerDeps: Deps = deps): Promise<Worker> {
  const worker = new Worker(workerDeps, handlers, { concurrency, pollMs: 50 });
  workers.push(worker);
  await worker.start();
  return worker;
}

/** A job's `last_error` when it is dead-lettered because its last attempt's lease lapsed. */
const LAPSED_ERROR = "the worker running the last attempt stopped before it finished (its lease lapsed)";

async function job(id: string) {
  return deps.db.selectFrom("jobs").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
}

async function onlyJob() {
  const rows = await deps.db.selectFrom("jobs").selectAll().execute();
  expect(rows).toHaveLength(1);
  return rows[0]!;
}

describe("enqueue", () => {
  it("creates a job only when the enclosing transaction commits", async () => {
    await deps.db
      .transaction()
      .execute(async (trx) => {
        await deps.jobs.enqueue(trx, { kind: "test.noop", payload: {} });
        throw new Error("roll back");
      })
      .catch(() => {});
    expect(await deps.db.selectFrom("jobs").selectAll().execute()).toHaveLength(0);
    await deps.db.transaction().execute((trx) => deps.jobs.enqueue(trx, { kind: "test.noop", payload: { n: 1 } }));
    const row = await onlyJob();
    expect(row).toMatchObject({ kind: "test.noop", status: "pending", attempts: 0, payload: '{"n":1}' });
  });

  it("ignores a second enqueue with the same idempotency key", async () => {
    for (let i = 0; i < 3; i++) {
      await deps.jobs.enqueue(deps.db, { kind: "test.noop", payload: { i }, idempotencyKey: "once" });
    }
    expect((await onlyJob()).payload).toBe('{"i":0}');
  });

  it("keeps idempotency keys unique by a plain index: an older process's enqueue still works", async () => {
    // During a rolling upgrade, processes of the previous release enqueue with
    // `on conflict (idempotency_key) do nothing`, which PostgreSQL cannot match to a partial index.
    const at = new Date().toISOString();
    for (const id of ["job_old_release_1", "job_old_release_2"]) {
      await sql`insert into jobs (id, kind, payload, status, attempts, max_attempts, timeout_ms, run_at, idempotency_key, created_at, updated_at)
        values (${id}, 'test.noop', '{}', 'pending', 0, 1, 1000, ${at}, 'old-release', ${at}, ${at})
        on conflict (idempotency_key) do nothing`.execute(deps.db);
    }
    expect((await onlyJob()).id).toBe("job_old_release_1");
  });
});

describe("running jobs", () => {
  it("runs a job once and marks it succeeded", async () => {
    const seen: unknown[] = [];
    await runWorker({ "test.record": { handle: async (payload) => void seen.push(payload) } });
    await deps.jobs.enqueue(deps.db, { kind: "test.record", payload: { hello: "world" } });
    await until("the job to succeed", async () => (await onlyJob()).status === "succeeded");
    expect(seen).toEqual([{ hello: "world" }]);
    const row = await onlyJob();
    expect(row.attempts).toBe(1);
    expect(row.finished_at).not.toBeNull();
    expect(row.locked_by).toBeNull();
  });

  it("retries a failing job with backoff until it succeeds", async () => {
    let calls = 0;
    const times: number[] = [];
    await runWorker({
      "test.flaky": {
        backoffBaseMs: 40,
        handle: async () => {
          times.push(Date.now());
          calls++;
          if (calls < 3) throw new Error(`failure ${calls}`);
        },
      },
    });
    await deps.jobs.enqueue(deps.db, { kind: "test.flaky", payload: {}, maxAttempts: 5 });
    await until("the job to succeed", async () => (await onlyJob()).status === "succeeded");
    const row = await onlyJob();
    expect(row.attempts).toBe(3);
    expect(row.last_error).toBe("failure 2");
    // Second retry waits about twice the first (±20% jitter each).
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(30);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(60);
  });

  it("dead-letters a job after its last attempt and keeps it", async () => {
    await runWorker({
      "test.broken": {
        backoffBaseMs: 10,
        handle: async () => {
          throw new Error("always broken");
        },
      },
    });
    await deps.jobs.enqueue(deps.db, { kind: "test.broken", payload: {}, maxAttempts: 3 });
    await until("the job to be dead", async () => (await onlyJob()).status === "dead");
    expect(await onlyJob()).toMatchObject({ attempts: 3, last_error: "always broken" });
  });

  it("dead-letters at once on a permanent error, and a kind with no handler", async () => {
    await runWorker({
      "test.permanent": {
        handle: async () => {
          throw new PermanentJobError("cannot ever work");
        },
      },
    });
    await deps.jobs.enqueue(deps.db, { kind: "test.permanent", payload: {}, maxAttempts: 5 });
    await deps.jobs.enqueue(deps.db, { kind: "test.unknown", payload: {} });
    await until("every job to be dead", async () => {
      const rows = await deps.db.selectFrom("jobs").select("status").execute();
      return rows.every((r) => r.status === "dead");
    });
    const rows = await deps.db.selectFrom("jobs").selectAll().orderBy("kind").execute();
    expect(rows.map((r) => [r.kind, r.attempts, r.last_error])).toEqual([
      ["test.permanent", 1, "cannot ever work"],
      ["test.unknown", 1, "no handler for job kind 'test.unknown'"],
    ]);
  });

  it("fails an attempt that outlives its timeout", async () => {
    await runWorker({
      "test.slow": { backoffBaseMs: 10, handle: () => new Promise((resolve) => setTimeout(resolve, 5_000)) },
    });
    await deps.jobs.enqueue(deps.db, { kind: "test.slow", payload: {}, timeoutMs: 100, maxAttempts: 1 });
    await until("the job to be dead", async () => (await onlyJob()).status === "dead");
    expect((await onlyJob()).last_error).toBe("job timed out after 100 ms");
  });

  it("runs no more than its concurrency at once", async () => {
    let active = 0;
    let peak = 0;
    await runWorker(
      {
        "test.busy": {
          handle: async () => {
            active++;
            peak = Math.max(peak, active);
            await sleep(30);
            active--;
          },
        },
      },
      3,
    );
    for (let i = 0; i < 12; i++) await deps.jobs.enqueue(deps.db, { kind: "test.busy", payload: { i } });
    await until("every job to succeed", async () => {
      const rows = await deps.db.selectFrom("jobs").select("status").execute();
      return rows.every((r) => r.status === "succeeded");
    });
    expect(peak).toBe(3);
  });
});

describe("leases", () => {
  it("picks up a job whose worker died once its lease has lapsed", async () => {
    const past = new Date(Date.now() - 1_000).toISOString();
    await deps.jobs.enqueue(deps.db, { kind: "test.record", payload: {} });
    const { id } = await onlyJob();
    // As a crashed worker leaves it: running, attempt counted, lease in the past.
    await deps.db
      .updateTable("jobs")
      .set({ status: "running", attempts: 1, locked_by: "wrk_dead", lease_until: past })
      .where("id", "=", id)
      .execute();
    let runs = 0;
    await runWorker({ "test.record": { handle: async () => void runs++ } });
    await until("the job to succeed", async () => (await job(id)).status === "succeeded");
    expect(runs).toBe(1);
    expect((await job(id)).attempts).toBe(2);
  });

  it("dead-letters a job whose last attempt's lease lapsed, without running it again", async () => {
    const past = new Date(Date.now() - 1_000).toISOString();
    await deps.jobs.enqueue(deps.db, { kind: "test.record", payload: {}, maxAttempts: 2 });
    const { id } = await onlyJob();
    // As a worker killed during the last attempt leaves it: running, both attempts counted.
    await deps.db
      .updateTable("jobs")
      .set({ status: "running", attempts: 2, locked_by: "wrk_dead", lease_until: past })
      .where("id", "=", id)
      .execute();
    let runs = 0;
    await runWorker({ "test.record": { handle: async () => void runs++ } });
    await until("the job to leave running", async () => (await job(id)).status !== "running");
    const row = await job(id);
    expect(row).toMatchObject({
      status: "dead",
      attempts: 2,
      locked_by: null,
      lease_until: null,
      last_error: LAPSED_ERROR,
    });
    expect(row.finished_at).not.toBeNull();
    await sleep(200);
    expect(runs).toBe(0);
  });

  it("dead-letters a batch kind's lapsed last attempts in the claim's transaction, with the handler's own rows", async () => {
    const past = new Date(Date.now() - 1_000).toISOString();
    await deps.jobs.enqueue(
      deps.db,
      ...[0, 1, 2, 3].map((n) => ({ kind: "test.batch", payload: { n }, maxAttempts: 3 })),
    );
    const rows = await deps.db.selectFrom("jobs").select(["id", "payload"]).orderBy("payload").execute();
    // Jobs 0 and 1 lapsed on their last attempt, 2 and 3 with one left.
    for (const [i, { id }] of rows.entries()) {
      await deps.db
        .updateTable("jobs")
        .set({ status: "running", attempts: i < 2 ? 3 : 2, locked_by: "wrk_dead", lease_until: past })
        .where("id", "=", id)
        .execute();
    }
    const ran: number[] = [];
    const lapsed: Array<{ ns: number[]; error: string }> = [];
    await runWorker({
      "test.batch": {
        batchSize: 8,
        maxInFlight: 8,
        async handleBatch(runs) {
          for (const { payload } of runs) ran.push(Number(payload.n));
          return runs.map(async () => ({ error: null }));
        },
        async recordLapsed(_trx, jobs, error) {
          lapsed.push({ ns: jobs.map((job) => JSON.parse(job.payload).n).sort(), error });
          // The first time, as a failed write would: the whole claim must roll back with it.
          if (lapsed.length === 1) throw new Error("recording failed");
        },
      },
    });
    await until("every job to settle", async () => {
      const settled = await deps.db.selectFrom("jobs").select("status").execute();
      return settled.every((row) => row.status === "succeeded" || row.status === "dead");
    });
    const settled = await deps.db
      .selectFrom("jobs")
      .select(["payload", "status", "attempts", "last_error"])
      .orderBy("payload")
      .execute();
    expect(settled.map((row) => [JSON.parse(row.payload).n, row.status, row.attempts, row.last_error])).toEqual([
      [0, "dead", 3, LAPSED_ERROR],
      [1, "dead", 3, LAPSED_ERROR],
      [2, "succeeded", 3, null],
      [3, "succeeded", 3, null],
    ]);
    // Told twice of the same jobs: the failed first claim dead-lettered nothing.
    expect(lapsed).toEqual([
      { ns: [0, 1], error: LAPSED_ERROR },
      { ns: [0, 1], error: LAPSED_ERROR },
    ]);
    expect(ran.sort()).toEqual([2, 3]);
  });

  it("takes a dead worker's batch jobs back at the kind's capacity, not one single slot at a time", async () => {
    const past = new Date(Date.now() - 1_000).toISOString();
    await deps.jobs.enqueue(deps.db, ...Array.from({ length: 30 }, (_, n) => ({ kind: "test.batch", payload: { n } })));
    await deps.db
      .updateTable("jobs")
      .set({ status: "running", attempts: 1, locked_by: "wrk_dead", lease_until: past })
      .execute();
    const ran = new Set<number>();
    // One single slot, and no poll after the first look: all 30 must come back in that look.
    const worker = new Worker(
      deps,
      {
        "test.batch": {
          batchSize: 64,
          maxInFlight: 64,
          async handleBatch(runs) {
            for (const { payload } of runs) ran.add(Number(payload.n));
            return runs.map(async () => ({ error: null }));
          },
        },
      },
      { concurrency: 1, pollMs: 60_000 },
    );
    workers.push(worker);
    await worker.start();
    await until("30 handlers to run", () => ran.size === 30, 3_000);
    // Their outcomes are written by the next group commit, a moment after the handler returns.
    await until("every job to succeed", async () => {
      const rows = await deps.db.selectFrom("jobs").select("status").execute();
      return rows.every((row) => row.status === "succeeded");
    });
    const settled = await deps.db.selectFrom("jobs").select(["status", "attempts"]).execute();
    expect(settled).toHaveLength(30);
    for (const row of settled) expect(row).toEqual({ status: "succeeded", attempts: 2 });
  });

  it("leaves a job alone while its lease is live", async () => {
    const future = new Date(Date.now() + 60_000).toISOString();
    await deps.jobs.enqueue(deps.db, { kind: "test.record", payload: {} });
    const { id } = await onlyJob();
    await deps.db
      .updateTable("jobs")
      .set({ status: "running", attempts: 1, locked_by: "wrk_alive", lease_until: future })
      .where("id", "=", id)
      .execute();
    let runs = 0;
    await runWorker({ "test.record": { handle: async () => void runs++ } });
    await sleep(300);
    expect(runs).toBe(0);
    expect((await job(id)).locked_by).toBe("wrk_alive");
  });

  it("hands unfinished jobs back on shutdown without counting the attempt", async () => {
    let started = false;
    const worker = await runWorker({
      "test.long": {
        handle: async () => {
          started = true;
          await sleep(3_000);
        },
      },
    });
    await deps.jobs.enqueue(deps.db, { kind: "test.long", payload: {} });
    await until("the handler to start", () => started);
    workers.splice(workers.indexOf(worker), 1);
    await worker.stop(50);
    expect(await onlyJob()).toMatchObject({ status: "pending", attempts: 0, locked_by: null, lease_until: null });
  });

  it("aborts batch jobs still running when the grace period ends, records nothing of them, and hands them back", async () => {
    let started = 0;
    let aborted = 0;
    let recorded = 0;
    const worker = await runWorker({
      "test.hang": {
        batchSize: 4,
        maxInFlight: 4,
        async handleBatch(runs) {
          started += runs.length;
          return runs.map(
            ({ signal }) =>
              new Promise((resolve) => {
                // Like an outbound request: it ends when its signal aborts, and not before.
                signal.addEventListener("abort", () => {
                  aborted++;
                  resolve({ error: new Error("aborted"), data: 1 });
                });
              }),
          );
        },
        async record() {
          recorded++;
        },
      },
    });
    await deps.jobs.enqueue(deps.db, { kind: "test.hang", payload: {}, timeoutMs: 60_000 });
    await until("the handler to start", () => started === 1);
    workers.splice(workers.indexOf(worker), 1);
    const stopping = Date.now();
    await worker.stop(100);
    expect(Date.now() - stopping).toBeLessThan(2_000);
    expect(aborted).toBe(1);
    await sleep(100);
    expect(recorded).toBe(0);
    expect(await onlyJob()).toMatchObject({ status: "pending", attempts: 0, locked_by: null, last_error: null });
  });
});

describe("recurring jobs", () => {
  it("are enqueued once per period however many workers run", async () => {
    const recurring = [{ name: "test.tick", everyMs: 60_000, kind: "test.tick" }];
    const ticks: number[] = [];
    const handlers: JobHandlers = { "test.tick": { handle: async () => void ticks.push(Date.now()) } };
    for (let i = 0; i < 3; i++) {
      const worker = new Worker(deps, handlers, { concurrency: 2, pollMs: 50, recurring });
      workers.push(worker);
      await worker.start();
    }
    await until("a scheduled tick", () => ticks.length >= 1);
    await sleep(300);
    expect(ticks).toHaveLength(1);
    await deps.db.deleteFrom("job_schedules").execute();
  });
});

describe.runIf(dialect === "postgres")("two workers on PostgreSQL", () => {
  it("drain 1,000 jobs with each processed exactly once", async () => {
    // Two independent connection pools, as two processes would have.
    const handles = [openDatabase(app.config), openDatabase(app.config)];
    try {
      const processed: string[][] = [[], []];
      for (const [i, handle] of handles.entries()) {
        await runWorker(
          {
            "test.count": {
              handle: async (_payload, { job }) => {
                processed[i]!.push(job.id);
              },
            },
          },
          8,
          { ...deps, db: handle.db },
        );
      }
      const specs = Array.from({ length: 1_000 }, (_, n) => ({ kind: "test.count", payload: { n } }));
      for (let i = 0; i < specs.length; i += 250) await deps.jobs.enqueue(deps.db, ...specs.slice(i, i + 250));
      await until(
        "1,000 jobs to succeed",
        async () => {
          const row = await deps.db
            .selectFrom("jobs")
            .select((eb) => eb.fn.countAll<string>().as("n"))
            .where("status", "=", "succeeded")
            .executeTakeFirstOrThrow();
          return Number(row.n) === 1_000;
        },
        60_000,
      );
      const all = [...processed[0]!, ...processed[1]!];
      expect(all).toHaveLength(1_000);
      expect(new Set(all).size).toBe(1_000);
      // Both took part.
      expect(processed[0]!.length).toBeGreaterThan(0);
      expect(processed[1]!.length).toBeGreaterThan(0);
    } finally {
      for (const worker of workers.splice(0)) await worker.stop(1_000);
      for (const handle of handles) await handle.close();
    }
  });
});

describe("backoff", () => {
  it("doubles from the base, caps at an hour and jitters by at most 20%", () => {
    expect(backoffMs(1, 5_000, () => 0.5)).toBe(5_000);
    expect(backoffMs(2, 5_000, () => 0.5)).toBe(10_000);
    expect(backoffMs(4, 5_000, () => 0.5)).toBe(40_000);
    expect(backoffMs(30, 5_000, () => 0.5)).toBe(3_600_000);
    expect(backoffMs(1, 5_000, () => 0)).toBe(4_000);
    expect(backoffMs(1, 5_000, () => 1)).toBe(6_000);
  });
});

describe("batch handlers", () => {
  /** Records each job's payload `n` through `record`, in the transaction that settles it. */
  function counting(seen: number[], recorded: number[], fail: Set<number> = new Set()): JobHandlers {
    return {
      "test.batch": {
        batchSize: 8,
        maxInFlight: 32,
        backoffBaseMs: 10,
        async handleBatch(runs) {
          return runs.map(async ({ payload }) => {
            const n = Number(payload.n);
            seen.push(n);
            return { error: fail.has(n) ? new Error(`job ${n} failed`) : null, data: n };
          });
        },
        async record(_trx, data) {
          recorded.push(...(data as number[]));
        },
      },
    };
  }

  it("runs failed batch jobs again once their backoffs pass, each on time, not at the next poll", async () => {
    const runs = new Map<string, number>();
    const worker = new Worker(
      deps,
      {
        "test.batch": {
          batchSize: 8,
          maxInFlight: 8,
          backoffBaseMs: 500,
          async handleBatch(jobs) {
            return jobs.map(async ({ job }) => {
              const n = (runs.get(job.id) ?? 0) + 1;
              runs.set(job.id, n);
              return { error: n === 1 ? new Error("first attempt fails") : null };
            });
          },
        },
      },
      { concurrency: 1, pollMs: 10_000 },
    );
    workers.push(worker);
    await worker.start();
    const started = Date.now();
    // Three jobs whose retries wait at the same time and fall due at three different times.
    for (const n of [1, 2, 3]) {
      await deps.jobs.enqueue(deps.db, { kind: "test.batch", payload: { n }, maxAttempts: 3 });
      await sleep(100);
    }
    await until(
      "3 jobs to succeed",
      async () => {
        const rows = await deps.db.selectFrom("jobs").select("status").execute();
        return rows.length === 3 && rows.every((row) => row.status === "succeeded");
      },
      3_000,
    );
    expect([...runs.values()]).toEqual([2, 2, 2]);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it("runs many jobs in batches, records each once, and settles them all", async () => {
    const seen: number[] = [];
    const recorded: number[] = [];
    await runWorker(counting(seen, recorded));
    await deps.db
      .transaction()
      .execute((trx) =>
        deps.jobs.enqueue(
          trx,
          ...Array.from({ length: 100 }, (_, n) => ({ kind: "test.batch", payload: { n }, maxAttempts: 1 })),
        ),
      );
    await until("100 jobs to succeed", async () => {
      const rows = await deps.db.selectFrom("jobs").select("status").execute();
      return rows.length === 100 && rows.every((row) => row.status === "succeeded");
    });
    expect([...seen].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, n) => n));
    expect([...recorded].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, n) => n));
  });

  it("retries only the jobs of a batch that failed, and never runs jobs whose transaction rolled back", async () => {
    const seen: number[] = [];
    const recorded: number[] = [];
    await runWorker(counting(seen, recorded, new Set([3])));
    await deps.db
      .transaction()
      .execute(async (trx) => {
        await deps.jobs.enqueue(trx, { kind: "test.batch", payload: { n: 99 } });
        throw new Error("roll back");
      })
      .catch(() => {});
    await deps.db
      .transaction()
      .execute((trx) =>
        deps.jobs.enqueue(trx, ...[1, 2, 3].map((n) => ({ kind: "test.batch", payload: { n }, maxAttempts: 2 }))),
      );
    await until("3 jobs to settle", async () => {
      const rows = await deps.db.selectFrom("jobs").select("status").execute();
      return rows.length === 3 && rows.every((row) => row.status === "succeeded" || row.status === "dead");
    });
    const rows = await deps.db
      .selectFrom("jobs")
      .select(["payload", "status", "attempts"])
      .orderBy("payload")
      .execute();
    expect(rows.map((row) => [JSON.parse(row.payload).n, row.status, row.attempts])).toEqual([
      [1, "succeeded", 1],
      [2, "succeeded", 1],
      [3, "dead", 2],
    ]);
    // The rolled-back job was never run (on SQLite it was handed over, but its row never existed).
    expect(seen.filter((n) => n === 3)).toHaveLength(2);
    expect(seen).not.toContain(99);
    expect(recorded).not.toContain(99);
  });

  it("hands jobs enqueued in jobs.transaction() to the local worker at commit, and frees the room of a failure", async () => {
    const started: number[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const worker = await runWorker({
      "test.batch": {
        batchSize: 4,
        maxInFlight: 4,
        async handleBatch(runs) {
          return runs.map(async ({ payload }) => {
            started.push(Number(payload.n));
            await gate;
            return { error: null };
          });
        },
      },
    });
    const enqueue = (trx: Parameters<typeof deps.jobs.enqueue>[0], ns: number[]) =>
      deps.jobs.enqueue(trx, ...ns.map((n) => ({ kind: "test.batch", payload: { n } })));
    // A failed enqueue and a rolled-back transaction each reserved all four slots; they must come back.
    await expect(
      deps.jobs.transaction(deps.db, (trx) =>
        deps.jobs.enqueue(
          trx,
          ...[80, 81, 82, 83].map((n) => ({ kind: "test.batch", payload: { n }, maxAttempts: Number.NaN })),
        ),
      ),
    ).rejects.toThrow();
    await deps.jobs
      .transaction(deps.db, async (trx) => {
        await enqueue(trx, [90, 91, 92, 93]);
        throw new Error("roll back");
      })
      .catch(() => {});
    await deps.jobs.transaction(deps.db, (trx) => enqueue(trx, [1, 2, 3, 4]));
    // Already the worker's as they commit: inserted running under its lease, with no claim.
    const rows = await deps.db.selectFrom("jobs").select(["status", "locked_by", "attempts"]).execute();
    expect(rows).toHaveLength(4);
    for (const row of rows) expect(row).toEqual({ status: "running", locked_by: worker.id, attempts: 1 });
    await until("4 handlers to start", () => started.length === 4);
    release();
    await until("every job to succeed", async () => {
      const settled = await deps.db.selectFrom("jobs").select("status").execute();
      return settled.every((row) => row.status === "succeeded");
    });
    expect([...started].sort()).toEqual([1, 2, 3, 4]);
  });

  it("passes a job's `local` only with a job taken at a committed enqueue, never with a claimed one", async () => {
    const seen = new Map<number, unknown>();
    const handlers: JobHandlers = {
      "test.batch": {
        batchSize: 8,
        maxInFlight: 8,
        async handleBatch(runs) {
          for (const { payload, local } of runs) seen.set(Number(payload.n), local);
          return runs.map(async () => ({ error: null }));
        },
      },
    };
    const spec = (n: number) => ({ kind: "test.batch", payload: { n }, local: { n } });
    // Before any worker runs: claimed later, read from the database, so without `local`.
    await deps.db.transaction().execute((trx) => deps.jobs.enqueue(trx, spec(1)));
    await runWorker(handlers);
    await until("job 1 to run", () => seen.has(1));
    // Taken by the worker at enqueue, in a transaction that commits: `local` comes along.
    await deps.jobs.transaction(deps.db, (trx) => deps.jobs.enqueue(trx, spec(2), spec(3)));
    await until("jobs 2 and 3 to run", () => seen.has(2) && seen.has(3));
    // Enqueued outside jobs.transaction(): on SQLite taken before anyone knows whether it
    // commits, on PostgreSQL claimed; either way without `local`.
    await deps.db.transaction().execute((trx) => deps.jobs.enqueue(trx, spec(4)));
    await until("job 4 to run", () => seen.has(4));
    expect(Object.fromEntries(seen)).toEqual({ 1: undefined, 2: { n: 2 }, 3: { n: 3 }, 4: undefined });
  });

  it("fails only the jobs of a batch still running at its deadline", async () => {
    await runWorker({
      "test.batch": {
        batchSize: 8,
        maxInFlight: 8,
        async handleBatch(runs) {
          // Job 1 never finishes; job 2 does at once.
          return runs.map(({ payload }) =>
            payload.n === 1 ? new Promise<never>(() => {}) : Promise.resolve({ error: null }),
          );
        },
      },
    });
    await deps.db
      .transaction()
      .execute((trx) =>
        deps.jobs.enqueue(
          trx,
          ...[1, 2].map((n) => ({ kind: "test.batch", payload: { n }, maxAttempts: 1, timeoutMs: 200 })),
        ),
      );
    await until("2 jobs to settle", async () => {
      const rows = await deps.db.selectFrom("jobs").select("status").execute();
      return rows.length === 2 && rows.every((row) => row.status === "succeeded" || row.status === "dead");
    });
    const rows = await deps.db
      .selectFrom("jobs")
      .select(["payload", "status", "last_error"])
      .orderBy("payload")
      .execute();
    expect(rows.map((row) => [JSON.parse(row.payload).n, row.status, row.last_error])).toEqual([
      [1, "dead", "job timed out after 200 ms"],
      [2, "succeeded", null],
    ]);
  });
});
