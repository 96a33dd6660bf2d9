import type { Selectable } from "kysely";
import pg from "pg";
import type { Db } from "../db/database.ts";
import type { JobsTable } from "../db/schema.ts";
import type { Deps } from "../deps.ts";
import { newId } from "../lib/ids.ts";
import { fromJsonColumn } from "../lib/json.ts";
import { backoffMs, jobsChannel } from "./queue.ts";

export type Job = Selectable<JobsTable>;

export interface JobRun {
  job: Job;
  /** Aborted when the job's timeout passes or the worker is forced to stop. */
  signal: AbortSignal;
}

export interface JobHandler {
  handle(payload: Record<string, unknown>, run: JobRun): Promise<void>;
  /** First retry delay; later ones double (see `backoffMs`). */
  backoffBaseMs?: number;
}

export type JobHandlers = Record<string, JobHandler>;

/** Thrown by a handler when retrying cannot help: the job is dead-lettered at once. */
export class PermanentJobError extends Error {}

export interface RecurringJob {
  /** Unique name; one run per period cluster-wide. */
  name: string;
  everyMs: number;
  kind: string;
  payload?: Record<string, unknown>;
}

export interface WorkerOptions {
  concurrency: number;
  /** Longest sleep between looks at the queue when nothing wakes the worker. */
  pollMs?: number;
  recurring?: RecurringJob[];
}

/** A lease outlives the job's timeout by this much, so a slow but live worker keeps its job. */
const LEASE_MARGIN_MS = 5_000;
const DEFAULT_BACKOFF_BASE_MS = 5_000;
const SCHEDULE_TICK_MS = 15_000;
const MAX_ERROR_LENGTH = 2_000;

/**
 * Claims due jobs and runs them, up to `concurrency` at a time.
 *
 * A claim marks the job `running` under a lease (`lease_until`) longer than its timeout; a job
 * whose worker died is claimed again once its lease lapses, so a job runs at least once and runs
 * twice only after a lease expiry. Failures are retried with exponential backoff until the job's
 * `max_attempts`, then the job is dead-lettered (`dead`) and kept for inspection. On PostgreSQL
 * claims use `FOR UPDATE SKIP LOCKED`, so any number of workers share the queue.
 */
export class Worker {
  readonly id = newId("wrk");
  private readonly running = new Map<string, Promise<void>>();
  private stopping = false;
  private loopDone: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private nextLocalRetry = Number.POSITIVE_INFINITY;
  private listener: pg.Client | undefined;
  private unsubscribe: (() => void) | undefined;
  private scheduleTimer: NodeJS.Timeout | undefined;
  private readonly pollMs: number;

  constructor(
    private readonly deps: Deps,
    private readonly handlers: JobHandlers,
    private readonly options: WorkerOptions,
  ) {
    this.pollMs = options.pollMs ?? 1_000;
  }

  async start(): Promise<void> {
    this.unsubscribe = this.deps.jobs.onWake(() => this.wake());
    if (this.deps.dialect === "postgres") await this.listen();
    if (this.options.recurring?.length) {
      await this.scheduleRecurring();
      this.scheduleTimer = setInterval(() => void this.scheduleRecurring(), SCHEDULE_TICK_MS);
      this.scheduleTimer.unref();
    }
    this.loopDone = this.loop();
  }

  /** Stops claiming, waits up to `graceMs` for running jobs, then hands unfinished ones back. */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    clearInterval(this.scheduleTimer);
    this.unsubscribe?.();
    this.wake();
    await this.loopDone;
    if (this.running.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled(this.running.values()),
        new Promise((resolve) => {
          timer = setTimeout(resolve, graceMs);
        }),
      ]);
      clearTimeout(timer);
    }
    await this.releaseLeases();
    await this.listener?.end().catch(() => {});
  }

  /** Ends the current sleep, or the next one if the loop is busy claiming (no wake-up is lost). */
  private wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      const free = this.options.concurrency - this.running.size;
      let claimed = 0;
      if (free > 0) {
        try {
          const jobs = await this.claim(free);
          claimed = jobs.length;
          for (const job of jobs) this.launch(job);
        } catch (error) {
          this.deps.log.error({ err: error, worker: this.id }, "claiming jobs failed");
        }
        if (claimed === free) continue;
      }
      await this.sleep();
    }
  }

  private async sleep(): Promise<void> {
    if (!this.woken && !this.stopping) {
      const wait = Math.max(0, Math.min(this.pollMs, this.nextLocalRetry - Date.now()));
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = undefined;
    }
    this.woken = false;
    if (this.nextLocalRetry <= Date.now()) this.nextLocalRetry = Number.POSITIVE_INFINITY;
  }

  /** Marks up to `limit` due jobs (or jobs whose lease lapsed) as running under this worker's lease. */
  private async claim(limit: number): Promise<Job[]> {
    const { db, dialect, clock } = this.deps;
    return db.transaction().execute(async (trx) => {
      const now = clock.now();
      const at = now.toISOString();
      // Two index-ordered reads rather than one OR: due pending jobs by run_at (jobs_due), then jobs
      // whose lease lapsed (jobs_lease). A single OR query sorts every due job on each claim.
      let pending = trx
        .selectFrom("jobs")
        .select(["id", "timeout_ms"])
        .where("status", "=", "pending")
        .where("run_at", "<=", at)
        .orderBy("run_at")
        .limit(limit);
      if (dialect === "postgres") pending = pending.forUpdate().skipLocked();
      const candidates = await pending.execute();
      if (candidates.length < limit) {
        let lapsed = trx
          .selectFrom("jobs")
          .select(["id", "timeout_ms"])
          .where("status", "=", "running")
          .where("lease_until", "<", at)
          .orderBy("lease_until")
          .limit(limit - candidates.length);
        if (dialect === "postgres") lapsed = lapsed.forUpdate().skipLocked();
        candidates.push(...(await lapsed.execute()));
      }
      if (candidates.length === 0) return [];
      const byTimeout = new Map<number, string[]>();
      for (const { id, timeout_ms } of candidates)
        byTimeout.set(timeout_ms, [...(byTimeout.get(timeout_ms) ?? []), id]);
      const claimed: Job[] = [];
      for (const [timeoutMs, ids] of byTimeout) {
        const rows = await trx
          .updateTable("jobs")
          .set((eb) => ({
            status: "running",
            attempts: eb("attempts", "+", 1),
            locked_by: this.id,
            lease_until: new Date(now.getTime() + timeoutMs + LEASE_MARGIN_MS).toISOString(),
            updated_at: at,
          }))
          .where("id", "in", ids)
          .returningAll()
          .execute();
        claimed.push(...rows);
      }
      return claimed;
    });
  }

  private launch(job: Job): void {
    const run = this.execute(job).finally(() => {
      this.running.delete(job.id);
      this.wake();
    });
    this.running.set(job.id, run);
  }

  private async execute(job: Job): Promise<void> {
    const handler = this.handlers[job.kind];
    const log = this.deps.log;
    if (!handler) {
      await this.settle(job, { status: "dead", error: `no handler for job kind '${job.kind}'` });
      return;
    }
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new Error(`job timed out after ${job.timeout_ms} ms`));
      }, job.timeout_ms);
    });
    try {
      await Promise.race([
        handler.handle(fromJsonColumn(job.payload, {}), { job, signal: controller.signal }),
        timeout,
      ]);
      await this.settle(job, { status: "succeeded" });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const permanent = error instanceof PermanentJobError;
      if (permanent || job.attempts >= job.max_attempts) {
        log.warn({ jobId: job.id, kind: job.kind, attempts: job.attempts, error: message }, "job dead-lettered");
        await this.settle(job, { status: "dead", error: message });
      } else {
        const delay = backoffMs(job.attempts, handler.backoffBaseMs ?? DEFAULT_BACKOFF_BASE_MS);
        await this.settle(job, { status: "pending", error: message, retryInMs: delay });
        this.nextLocalRetry = Math.min(this.nextLocalRetry, Date.now() + delay);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** Records the outcome, if this worker still holds the job's lease. */
  private async settle(
    job: Job,
    outcome: { status: "succeeded" | "dead" | "pending"; error?: string; retryInMs?: number },
  ): Promise<void> {
    const now = this.deps.clock.now();
    const at = now.toISOString();
    const finished = outcome.status !== "pending";
    try {
      const result = await this.deps.db
        .updateTable("jobs")
        .set({
          status: outcome.status,
          lease_until: null,
          locked_by: null,
          updated_at: at,
          ...(outcome.error !== undefined ? { last_error: outcome.error.slice(0, MAX_ERROR_LENGTH) } : {}),
          ...(finished ? { finished_at: at } : {}),
          ...(outcome.retryInMs !== undefined
            ? { run_at: new Date(now.getTime() + outcome.retryInMs).toISOString() }
            : {}),
        })
        .where("id", "=", job.id)
        .where("locked_by", "=", this.id)
        .where("status", "=", "running")
        .executeTakeFirst();
      if (Number(result.numUpdatedRows) === 0) {
        this.deps.log.warn({ jobId: job.id, kind: job.kind }, "job lease was lost before it finished");
      }
    } catch (error) {
      // The lease will lapse and another claim will run the job again.
      this.deps.log.error({ err: error, jobId: job.id }, "recording a job outcome failed");
    }
  }

  /** Gives back jobs this worker claimed but did not finish, without counting the attempt. */
  private async releaseLeases(): Promise<void> {
    await this.deps.db
      .updateTable("jobs")
      .set((eb) => ({
        status: "pending",
        attempts: eb("attempts", "-", 1),
        lease_until: null,
        locked_by: null,
        updated_at: this.deps.clock.now().toISOString(),
      }))
      .where("locked_by", "=", this.id)
      .where("status", "=", "running")
      .execute()
      .catch((error: unknown) => this.deps.log.error({ err: error }, "releasing job leases failed"));
  }

  /** LISTENs for NOTIFYs from enqueues in any process; polling covers the gaps if it drops. */
  private async listen(): Promise<void> {
    const { databaseUrl } = this.deps.config;
    if (!databaseUrl) return;
    const client = new pg.Client({ connectionString: databaseUrl });
    client.on("notification", () => this.wake());
    client.on("error", (error) => {
      this.deps.log.warn({ err: error }, "job notification connection failed; polling until it is back");
      this.listener = undefined;
      if (!this.stopping) setTimeout(() => void this.listen().catch(() => {}), this.pollMs).unref();
    });
    await client.connect();
    await client.query(`LISTEN "${jobsChannel(this.deps.config.databaseSchema)}"`);
    this.listener = client;
  }

  /**
   * Enqueues each recurring job once per period for the whole cluster: the process that moves
   * the schedule's `next_run_at` forward (a compare-and-set) is the one that enqueues it.
   */
  private async scheduleRecurring(): Promise<void> {
    for (const recurring of this.options.recurring ?? []) {
      try {
        await this.deps.db.transaction().execute(async (trx) => scheduleOne(trx, this.deps, recurring));
      } catch (error) {
        this.deps.log.error({ err: error, schedule: recurring.name }, "scheduling a recurring job failed");
      }
    }
  }
}

async function scheduleOne(trx: Db, deps: Deps, recurring: RecurringJob): Promise<void> {
  const now = deps.clock.now();
  const at = now.toISOString();
  await trx
    .insertInto("job_schedules")
    .values({ name: recurring.name, next_run_at: at, updated_at: at })
    .onConflict((oc) => oc.column("name").doNothing())
    .execute();
  const schedule = await trx
    .selectFrom("job_schedules")
    .select("next_run_at")
    .where("name", "=", recurring.name)
    .executeTakeFirstOrThrow();
  if (schedule.next_run_at > at) return;
  const moved = await trx
    .updateTable("job_schedules")
    .set({ next_run_at: new Date(now.getTime() + recurring.everyMs).toISOString(), updated_at: at })
    .where("name", "=", recurring.name)
    .where("next_run_at", "=", schedule.next_run_at)
    .executeTakeFirst();
  if (Number(moved.numUpdatedRows) === 0) return;
  await deps.jobs.enqueue(trx, {
    kind: recurring.kind,
    payload: recurring.payload ?? {},
    idempotencyKey: `${recurring.name}@${schedule.next_run_at}`,
  });
}
