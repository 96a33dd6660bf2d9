import { setMaxListeners } from "node:events";
import type { UpdateQueryBuilder, UpdateResult } from "kysely";
import type { Db, Dialect } from "../db/database.ts";
import type { Database } from "../db/schema.ts";
import { oneOf } from "../db/shapes.ts";
import type { Deps } from "../deps.ts";
import { asError, errorMessage } from "../errors.ts";
import { newId } from "../lib/ids.ts";
import { fromJsonColumn } from "../lib/json.ts";
import {
  type BatchJobHandler,
  isBatchHandler,
  type JobHandler,
  type JobHandlers,
  type JobResult,
  PermanentJobError,
} from "./handlers.ts";
import { JobNotifications } from "./notifications.ts";
import { backoffMs, type Job, type JobStatus, LEASE_MARGIN_MS, type LocalTaker, localOf } from "./queue.ts";
import { type RecurringJob, startSchedule } from "./schedule.ts";

type UpdateJobs = UpdateQueryBuilder<Database, "jobs", "jobs", UpdateResult>;

/**
 * Where running jobs came from: a claim (room counted as they start), or handed over at enqueue
 * (room reserved then) by a transaction known to have committed, or not known to.
 */
type JobOrigin = "claimed" | "committed" | "unknown";

/**
 * A job's deadline: a signal aborted and a promise rejected once `timeoutMs` has passed, or as
 * soon as `halt` aborts (the worker forced to stop). Call `clear` when the work is done.
 */
function jobDeadline(timeoutMs: number, halt: AbortSignal) {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let onHalt: (() => void) | undefined;
  const expired = new Promise<never>((_, reject) => {
    const end = (reason: string) => {
      controller.abort();
      reject(new Error(reason));
    };
    timer = setTimeout(() => end(`job timed out after ${timeoutMs} ms`), timeoutMs);
    onHalt = () => end("the worker stopped before the job finished");
    halt.addEventListener("abort", onHalt, { once: true });
  });
  // Raced against the work; nobody need be listening when it fires.
  expired.catch(() => {});
  const clear = () => {
    clearTimeout(timer);
    if (onHalt) halt.removeEventListener("abort", onHalt);
  };
  return { signal: controller.signal, expired, clear };
}

type Outcome = { status: Exclude<JobStatus, "running">; error?: string; retryInMs?: number };

interface Finished {
  job: Job;
  outcome: Outcome;
  data: unknown;
  done: () => void;
}

export interface WorkerOptions {
  concurrency: number;
  /** Longest sleep between looks at the queue when nothing wakes the worker. */
  pollMs?: number;
  recurring?: RecurringJob[];
}

const DEFAULT_BACKOFF_BASE_MS = 5_000;
const MAX_ERROR_LENGTH = 2_000;
/** How long finished batch jobs wait for company before their group commit. */
const GROUP_COMMIT_WINDOW_MS = 10;
/** Retries due within this many ms of each other share one look at the queue. */
const RETRY_LOOK_GRANULARITY_MS = 10;
/** Retry looks remembered at most; later ones are left to the regular poll. */
const MAX_RETRY_LOOKS = 10_000;
/** How long jobs aborted at the end of a stop's grace period get to wind down. */
const HALT_SETTLE_MS = 500;
/** Most jobs of a batchable kind claimed in one transaction. */
const MAX_BATCH_CLAIM = 256;

/** A due job as a claim first reads it, before it is leased. */
type Candidate = Pick<Job, "id" | "kind" | "status" | "attempts" | "max_attempts" | "timeout_ms">;

/** The `last_error` of a job dead-lettered because its last attempt's lease lapsed. */
const LAPSED_LAST_ATTEMPT = "the worker running the last attempt stopped before it finished (its lease lapsed)";

/**
 * Jobs in `status` whose `column` (`run_at`, or `lease_until` for lapsed leases) has come, oldest
 * first; on PostgreSQL locked, skipping those another worker's claim holds.
 */
function claimableJobs(
  trx: Db,
  dialect: Dialect,
  at: string,
  status: "pending" | "running",
  column: "run_at" | "lease_until",
  limit: number,
) {
  let query = trx
    .selectFrom("jobs")
    .select(["id", "kind", "status", "attempts", "max_attempts", "timeout_ms"])
    .where("status", "=", status)
    .where(column, column === "run_at" ? "<=" : "<", at)
    .orderBy(column)
    .limit(limit);
  if (dialect === "postgres") query = query.forUpdate().skipLocked();
  return query;
}

/**
 * Marks the candidates `running` under `workerId`'s lease, which outlives each job's timeout by
 * LEASE_MARGIN_MS (one update per timeout), and counts the attempt; returns the jobs as leased.
 */
async function leaseJobs(
  trx: Db,
  dialect: Dialect,
  workerId: string,
  now: Date,
  candidates: Candidate[],
): Promise<Job[]> {
  const at = now.toISOString();
  const byTimeout = new Map<number, string[]>();
  for (const { id, timeout_ms } of candidates) {
    const ids = byTimeout.get(timeout_ms);
    if (ids) ids.push(id);
    else byTimeout.set(timeout_ms, [id]);
  }
  const leased: Job[] = [];
  for (const [timeoutMs, ids] of byTimeout) {
    const rows = await trx
      .updateTable("jobs")
      .set((eb) => ({
        status: "running",
        attempts: eb("attempts", "+", 1),
        locked_by: workerId,
        lease_until: new Date(now.getTime() + timeoutMs + LEASE_MARGIN_MS).toISOString(),
        updated_at: at,
      }))
      .where(oneOf(dialect, "id", ids))
      .returningAll()
      .execute();
    leased.push(...rows);
  }
  return leased;
}

/**
 * Claims due jobs and runs them: up to `concurrency` single jobs at a time, and up to
 * `maxInFlight` jobs of each batchable kind.
 *
 * A claim marks the job `running` under a lease (`lease_until`) longer than its timeout and
 * counts the attempt; a job whose worker died is claimed again once its lease lapses, so a job
 * runs at least once and runs twice only after a lease expiry. Failures are retried with
 * exponential backoff until the job's `max_attempts`, then the job is dead-lettered (`dead`) and
 * kept for inspection. An attempt whose lease lapsed counts as failed: a poison job, one that
 * kills the process running it, runs `max_attempts` times, and the claim after its last lapse
 * dead-letters it without running it. On PostgreSQL claims use `FOR UPDATE SKIP LOCKED`, so any
 * number of workers share the queue.
 */
export class Worker implements LocalTaker {
  readonly id = newId("wrk");
  /** Running handler calls: single jobs by id, batches by the id of their first job. */
  private readonly running = new Map<string, Promise<void>>();
  private runningSingles = 0;
  /** Jobs in flight per batchable kind. */
  private readonly inFlight = new Map<string, number>();
  private finished: Finished[] = [];
  private flushing: Promise<void> | undefined;
  private stopping = false;
  /**
   * Aborted when `stop`'s grace period ends with jobs still running: their signals abort, and
   * what they finish after that is not recorded (their leases are handed back instead).
   */
  private readonly halt = new AbortController();
  private loopDone: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  /** Kinds to look at on the next claim: named by an enqueue, or a claim that filled up. */
  private readonly hinted = new Set<string>();
  private nextFullLook = 0;
  /** When this worker's failed jobs fall due again (ms, ascending): each wakes a full look. */
  private readonly retryTimes: number[] = [];
  private notifications: JobNotifications | undefined;
  private unsubscribe: (() => void) | undefined;
  private stopSchedule: (() => void) | undefined;
  private readonly pollMs: number;
  /** Batchable kinds and how many of each may run at once. */
  private readonly batchKinds: Map<string, number>;
  private readonly singleKinds: string[];

  constructor(
    private readonly deps: Deps,
    private readonly handlers: JobHandlers,
    private readonly options: WorkerOptions,
  ) {
    this.pollMs = options.pollMs ?? 1_000;
    // Every running job's deadline listens on it.
    setMaxListeners(0, this.halt.signal);
    const entries = Object.entries(handlers);
    this.batchKinds = new Map(
      entries.flatMap(
        ([kind, h]): Array<[string, number]> => (isBatchHandler(h) ? [[kind, Math.max(1, h.maxInFlight)]] : []),
      ),
    );
    this.singleKinds = entries.filter(([, h]) => !isBatchHandler(h)).map(([kind]) => kind);
  }

  async start(): Promise<void> {
    this.unsubscribe = this.deps.jobs.onWake((kinds) => this.wake(kinds));
    this.deps.jobs.setLocalTaker(this);
    if (this.deps.dialect === "postgres") {
      this.notifications = new JobNotifications(this.deps, this.pollMs, (kinds) => this.wake(kinds));
      await this.notifications.start();
    }
    this.stopSchedule = await startSchedule(this.deps, this.options.recurring ?? []);
    this.loopDone = this.loop();
  }

  /**
   * Stops claiming, waits up to `graceMs` for running jobs, then aborts what still runs (their
   * signals fire, so an outbound request ends at once), records none of it, and hands those jobs
   * back for another worker to run.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    this.deps.jobs.setLocalTaker(undefined);
    this.stopSchedule?.();
    this.unsubscribe?.();
    // Nothing is left to be woken for; the connection closes while jobs wind down.
    const unlistening = this.notifications?.stop();
    this.wake();
    await this.loopDone;
    if (!(await this.settled(graceMs))) {
      this.halt.abort();
      await this.settled(HALT_SETTLE_MS);
    }
    await this.releaseLeases();
    await unlistening;
  }

  /** Whether every running job ended within `ms`. */
  private async settled(ms: number): Promise<boolean> {
    if (this.running.size === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([
      Promise.allSettled(this.running.values()).then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), ms);
      }),
    ]);
    clearTimeout(timer);
    return ended;
  }

  /**
   * Ends the current sleep, or the next one if the loop is busy claiming (no wake-up is lost).
   * `kinds`: what was enqueued (looked at next); none named means a full look.
   */
  private wake(kinds?: readonly string[]): void {
    if (kinds === undefined) this.nextFullLook = 0;
    else for (const kind of kinds) this.hinted.add(kind);
    this.woken = true;
    this.wakeUp?.();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      let full = false;
      try {
        full = await this.claim();
      } catch (error) {
        this.deps.log.error({ err: error, worker: this.id }, "claiming jobs failed");
      }
      if (!full) await this.sleep();
    }
  }

  private async sleep(): Promise<void> {
    if (!this.woken && !this.stopping) {
      const wait = Math.max(
        0,
        Math.min(this.nextFullLook, this.retryTimes[0] ?? Number.POSITIVE_INFINITY) - Date.now(),
      );
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
    const now = Date.now();
    let due = 0;
    while (due < this.retryTimes.length && (this.retryTimes[due] as number) <= now) due++;
    if (due > 0) {
      this.retryTimes.splice(0, due);
      this.nextFullLook = 0;
    }
  }

  /** Looks again at `at` (ms), when a retry falls due; retries close together share one look. */
  private lookAgainAt(at: number): void {
    const slot = Math.ceil(at / RETRY_LOOK_GRANULARITY_MS) * RETRY_LOOK_GRANULARITY_MS;
    let i = this.retryTimes.length;
    while (i > 0 && (this.retryTimes[i - 1] as number) > slot) i--;
    if (this.retryTimes[i - 1] === slot || this.retryTimes.length >= MAX_RETRY_LOOKS) return;
    this.retryTimes.splice(i, 0, slot);
  }

  /**
   * Claims what there is room for and launches it: due jobs (or jobs whose lease lapsed) are
   * marked `running` under this worker's lease. Returns true when some pool took all it asked
   * for, so there may be more to claim at once.
   */
  private async claim(): Promise<boolean> {
    const { db, dialect, clock } = this.deps;
    const { concurrency } = this.options;
    // A full look (every known kind, lapsed leases, unknown kinds) at start, on every poll and
    // when a local retry falls due; in between, only the kinds an enqueue named or that had more.
    const fullLook = Date.now() >= this.nextFullLook;
    if (fullLook) this.nextFullLook = Date.now() + this.pollMs;
    const wants: Array<[string, number]> = [];
    for (const [kind, capacity] of this.batchKinds) {
      if (!fullLook && !this.hinted.has(kind)) continue;
      const room = capacity - (this.inFlight.get(kind) ?? 0);
      // Under load, wait for a useful amount of room rather than claim a job or two at a time.
      if (room >= Math.max(1, Math.floor(capacity / 4))) wants.push([kind, Math.min(room, MAX_BATCH_CLAIM)]);
    }
    const singleRoom = concurrency - this.runningSingles;
    const singles = fullLook || this.singleKinds.some((kind) => this.hinted.has(kind)) ? singleRoom : 0;
    if (wants.length === 0 && singles <= 0) return false;
    for (const [kind] of wants) this.hinted.delete(kind);
    if (singles > 0) for (const kind of this.singleKinds) this.hinted.delete(kind);

    const { claimed, full } = await db.transaction().execute(async (trx) => {
      const now = clock.now();
      const at = now.toISOString();
      const claimable = (status: "pending" | "running", column: "run_at" | "lease_until", limit: number) =>
        claimableJobs(trx, dialect, at, status, column, limit);
      const due = (limit: number) => claimable("pending", "run_at", limit);
      const candidates: Candidate[] = [];
      let full = false;
      // Each batchable kind, then the other known kinds, by the (status, kind, run_at) index.
      for (const [kind, limit] of wants) {
        const rows = await due(limit).where("kind", "=", kind).execute();
        // On a full look, room left goes to this kind's jobs whose lease lapsed (a worker that
        // died mid-batch leaves hundreds), at the kind's own capacity, not the single slots'.
        if (fullLook && rows.length < limit) {
          rows.push(
            ...(await claimable("running", "lease_until", limit - rows.length)
              .where("kind", "=", kind)
              .execute()),
          );
        }
        // A full claim may have left more behind: look at this kind again next time.
        if (rows.length === limit) {
          full = true;
          this.hinted.add(kind);
        }
        candidates.push(...rows);
      }
      let slots = singles;
      if (slots > 0 && this.singleKinds.length > 0) {
        const rows = await due(slots).where("kind", "in", this.singleKinds).execute();
        slots -= rows.length;
        if (slots === 0) for (const kind of this.singleKinds) this.hinted.add(kind);
        candidates.push(...rows);
      }
      // Other jobs whose lease lapsed: among the running ones, few (those in flight).
      if (fullLook && slots > 0) {
        let lapsed = claimable("running", "lease_until", slots);
        if (this.batchKinds.size > 0) lapsed = lapsed.where("kind", "not in", [...this.batchKinds.keys()]);
        const rows = await lapsed.execute();
        slots -= rows.length;
        candidates.push(...rows);
      }
      // Only when nothing known is due: kinds no handler here knows, which are dead-lettered.
      if (fullLook && candidates.length === 0 && slots > 0) {
        const known = [...this.batchKinds.keys(), ...this.singleKinds];
        let unknown = due(slots);
        if (known.length > 0) unknown = unknown.where("kind", "not in", known);
        const rows = await unknown.execute();
        slots -= rows.length;
        candidates.push(...rows);
      }
      full ||= singles > 0 && slots === 0;
      if (candidates.length === 0) return { claimed: [], full: false };
      // A lapsed job counted its attempt when it was claimed: one whose last attempt lapsed is
      // not run again, or a job that takes its process down (out of memory, a native abort) would
      // do so to every worker that claims it, forever, as only a handler's error fails an attempt.
      const lastLapsed = (job: Candidate) => job.status === "running" && job.attempts >= job.max_attempts;
      const spent = candidates.filter(lastLapsed);
      if (spent.length > 0) await this.deadLetterLapsed(trx, at, spent);
      const runnable = candidates.filter((job) => !lastLapsed(job));
      if (runnable.length === 0) return { claimed: [], full };
      return { claimed: await leaseJobs(trx, dialect, this.id, now, runnable), full };
    });
    this.launchAll(claimed);
    return full;
  }

  /**
   * Dead-letters jobs whose last attempt's lease lapsed, and lets each batchable kind's handler
   * write what its own rows say of them (`recordLapsed`), in the claim's transaction.
   */
  private async deadLetterLapsed(trx: Db, at: string, spent: Candidate[]): Promise<void> {
    const dead = await trx
      .updateTable("jobs")
      .set({
        status: "dead",
        lease_until: null,
        locked_by: null,
        last_error: LAPSED_LAST_ATTEMPT,
        updated_at: at,
        finished_at: at,
      })
      .where(
        oneOf(
          this.deps.dialect,
          "id",
          spent.map((job) => job.id),
        ),
      )
      .returningAll()
      .execute();
    const byKind = new Map<string, Job[]>();
    for (const job of dead) {
      this.deps.log.warn(
        { jobId: job.id, kind: job.kind, attempts: job.attempts, error: LAPSED_LAST_ATTEMPT },
        "job dead-lettered",
      );
      const jobs = byKind.get(job.kind);
      if (jobs) jobs.push(job);
      else byKind.set(job.kind, [job]);
    }
    for (const [kind, jobs] of byKind) {
      const handler = this.handlers[kind];
      if (handler && isBatchHandler(handler)) await handler.recordLapsed?.(trx, jobs, LAPSED_LAST_ATTEMPT);
    }
  }

  reserve(kind: string, count: number): number {
    const capacity = this.batchKinds.get(kind);
    if (this.stopping || capacity === undefined) return 0;
    const taken = Math.max(0, Math.min(count, capacity - (this.inFlight.get(kind) ?? 0)));
    this.countInFlight(kind, taken);
    return taken;
  }

  release(kind: string, count: number): void {
    this.countInFlight(kind, -count);
  }

  adopt(jobs: Job[], committed: boolean): void {
    // Stopping: the leases are released (or lapse) and the jobs are claimed again.
    if (this.stopping) {
      for (const job of jobs) this.release(job.kind, 1);
      return;
    }
    this.launchAll(jobs, committed ? "committed" : "unknown");
  }

  /** Starts jobs (claimed, or handed over): batches per batchable kind, single jobs one by one. */
  private launchAll(jobs: Job[], origin: JobOrigin = "claimed"): void {
    const batches = new Map<string, Job[]>();
    for (const job of jobs) {
      const handler = this.handlers[job.kind];
      if (handler && isBatchHandler(handler)) {
        const batch = batches.get(job.kind);
        if (batch) batch.push(job);
        else batches.set(job.kind, [job]);
      } else {
        this.track(job.id, this.execute(job));
        this.runningSingles++;
      }
    }
    for (const [kind, batch] of batches) {
      const handler = this.handlers[kind] as BatchJobHandler;
      batch.sort((a, b) => (a.run_at < b.run_at ? -1 : a.run_at > b.run_at ? 1 : 0));
      for (let i = 0; i < batch.length; i += handler.batchSize) {
        const part = batch.slice(i, i + handler.batchSize);
        if (origin === "claimed") this.countInFlight(kind, part.length);
        this.track(part[0]?.id ?? kind, this.executeBatch(part, handler, origin));
      }
    }
  }

  private track(id: string, run: Promise<void>): void {
    this.running.set(
      id,
      run.finally(() => this.running.delete(id)),
    );
  }

  /** Runs `work` with an AbortSignal that fires after `timeoutMs`; rejects then too. */
  private async withTimeout<T>(timeoutMs: number, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const deadline = jobDeadline(timeoutMs, this.halt.signal);
    try {
      return await Promise.race([work(deadline.signal), deadline.expired]);
    } finally {
      deadline.clear();
    }
  }

  private async execute(job: Job): Promise<void> {
    const handler = this.handlers[job.kind];
    try {
      if (!handler || isBatchHandler(handler)) {
        await this.settle(job, { status: "dead", error: `no handler for job kind '${job.kind}'` });
        return;
      }
      try {
        await this.withTimeout(job.timeout_ms, (signal) =>
          handler.handle(fromJsonColumn(job.payload, {}), { job, signal }),
        );
        await this.settle(job, { status: "succeeded" });
      } catch (error) {
        await this.settle(job, this.failure(job, handler, error));
      }
    } finally {
      this.runningSingles--;
      this.wake(this.singleKinds);
    }
  }

  /**
   * Runs a batch under one deadline (the longest of its jobs' timeouts). Each job's result joins
   * the next group commit as soon as it is ready; a job still running at the deadline is
   * committed as a failed attempt, like a single job that times out.
   */
  private async executeBatch(claimed: Job[], handler: BatchJobHandler, origin: JobOrigin): Promise<void> {
    const kind = claimed[0]?.kind ?? "";
    // Jobs handed over at enqueue exist only if that transaction committed.
    const jobs = origin === "unknown" && !handler.findsOwnRows ? await this.committed(claimed) : claimed;
    this.countInFlight(kind, jobs.length - claimed.length);
    if (jobs.length === 0) return;
    const {
      signal,
      expired: deadline,
      clear,
    } = jobDeadline(Math.max(...jobs.map((job) => job.timeout_ms)), this.halt.signal);
    // A batch's jobs all listen on this one signal.
    setMaxListeners(0, signal);
    try {
      const results = await Promise.race([
        handler.handleBatch(
          jobs.map((job) => ({
            job,
            payload: fromJsonColumn(job.payload, {}),
            signal,
            // Only from a commit known to have happened: a rolled-back one left nothing to act on.
            ...(origin === "committed" ? { local: localOf(job) } : {}),
          })),
          signal,
        ),
        deadline,
      ]).catch((error: unknown) => jobs.map(() => Promise.resolve<JobResult>({ error: asError(error) })));
      await Promise.all(
        jobs.map(async (job, i) => {
          const result = await Promise.race([
            results[i] ?? Promise.resolve<JobResult>({ error: null }),
            deadline,
          ]).catch((error: unknown): JobResult => ({ error: asError(error) }));
          const outcome: Outcome = result.error ? this.failure(job, handler, result.error) : { status: "succeeded" };
          await this.commit(job, outcome, result.data);
          this.countInFlight(kind, -1);
        }),
      );
    } finally {
      clear();
    }
  }

  private countInFlight(kind: string, delta: number): void {
    if (delta !== 0) this.inFlight.set(kind, (this.inFlight.get(kind) ?? 0) + delta);
  }

  private async committed(jobs: Job[]): Promise<Job[]> {
    try {
      const rows = await this.deps.db
        .selectFrom("jobs")
        .select("id")
        .where(
          oneOf(
            this.deps.dialect,
            "id",
            jobs.map((job) => job.id),
          ),
        )
        .where("locked_by", "=", this.id)
        .execute();
      const found = new Set(rows.map((row) => row.id));
      return jobs.filter((job) => found.has(job.id));
    } catch (error) {
      // Unknown: leave them to their leases, which lapse and let a claim run them.
      this.deps.log.error({ err: error }, "checking handed-over jobs failed");
      return [];
    }
  }

  /** Queues a finished batch job for the next group commit; resolves once it is written. */
  private commit(job: Job, outcome: Outcome, data: unknown): Promise<void> {
    // Halted: the job's lease is handed back, and another worker runs it again.
    if (this.halt.signal.aborted) return Promise.resolve();
    return new Promise((done) => {
      this.finished.push({ job, outcome, data, done });
      if (!this.flushing) this.flushing = this.flush();
    });
  }

  /**
   * Writes finished batch jobs, a group at a time: their records and outcomes in one transaction.
   * If that transaction fails, each job is written on its own, so one bad record costs only its
   * own job an attempt.
   */
  private async flush(): Promise<void> {
    // The work itself (a delivery's POST) is done; waiting a few ms before writing it down lets
    // results that finish close together share one commit, which at a steady trickle of jobs
    // is most of what recording them costs.
    await new Promise<void>((resolve) => setTimeout(resolve, GROUP_COMMIT_WINDOW_MS));
    while (this.finished.length > 0) {
      const group = this.finished;
      this.finished = [];
      try {
        await this.deps.db.transaction().execute(async (trx) => {
          await this.record(trx, group);
          await this.settleAll(
            trx,
            group.map((item) => item.job),
            group.map((item) => item.outcome),
          );
        });
      } catch (error) {
        this.deps.log.error({ err: error, jobs: group.length }, "recording a group of jobs failed; one by one");
        for (const item of group) await this.commitAlone(item);
      }
      for (const item of group) item.done();
      this.wake([]);
    }
    this.flushing = undefined;
  }

  /** Hands each kind's finished jobs to its handler's `record`. */
  private async record(trx: Db, group: Finished[]): Promise<void> {
    const byKind = new Map<string, unknown[]>();
    for (const item of group) {
      const data = byKind.get(item.job.kind);
      if (data) data.push(item.data);
      else byKind.set(item.job.kind, [item.data]);
    }
    for (const [kind, data] of byKind) {
      const handler = this.handlers[kind];
      if (handler && isBatchHandler(handler)) await handler.record?.(trx, data);
    }
  }

  private async commitAlone(item: Finished): Promise<void> {
    // Only batch jobs are group-committed, so the job's handler is a batch handler.
    const handler = this.handlers[item.job.kind] as BatchJobHandler;
    try {
      await this.deps.db.transaction().execute(async (trx) => {
        await this.record(trx, [item]);
        await this.settleAll(trx, [item.job], [item.outcome]);
      });
    } catch (error) {
      // The work could not be recorded: count this attempt as failed (the job runs again).
      await this.settle(item.job, this.failure(item.job, handler, error));
    }
  }

  /** The outcome of a failed attempt: retried with backoff, or dead after the last attempt. */
  private failure(job: Job, handler: JobHandler, error: unknown): Outcome {
    const message = errorMessage(error);
    if (error instanceof PermanentJobError || job.attempts >= job.max_attempts) {
      this.deps.log.warn(
        { jobId: job.id, kind: job.kind, attempts: job.attempts, error: message },
        "job dead-lettered",
      );
      return { status: "dead", error: message };
    }
    const delay = backoffMs(job.attempts, handler.backoffBaseMs ?? DEFAULT_BACKOFF_BASE_MS);
    return { status: "pending", error: message, retryInMs: delay };
  }

  /** Records the outcome, if this worker still holds the job's lease. */
  private async settle(job: Job, outcome: Outcome): Promise<void> {
    if (this.halt.signal.aborted) return;
    try {
      await this.settleAll(this.deps.db, [job], [outcome]);
    } catch (error) {
      // The lease will lapse and another claim will run the job again.
      this.deps.log.error({ err: error, jobId: job.id }, "recording a job outcome failed");
    }
  }

  /** Records outcomes of jobs this worker holds; successes in one statement. */
  private async settleAll(db: Db, jobs: Job[], outcomes: Outcome[]): Promise<void> {
    const now = this.deps.clock.now();
    const at = now.toISOString();
    // A job this worker holds is `running` under its lease, and `locked_by` alone says so: a claim
    // sets it with the status, and every settle and release clears it. Matching on `status` as
    // well would invite the planner to the (status, kind, run_at) index, whose `running` entries
    // include every job finished since the last VACUUM.
    const held = (query: UpdateJobs) => query.where("locked_by", "=", this.id);
    const forgotten: string[] = [];
    const succeeded: string[] = [];
    for (const [i, job] of jobs.entries()) {
      if (outcomes[i]?.status !== "succeeded") continue;
      const handler = this.handlers[job.kind];
      (handler && isBatchHandler(handler) && handler.forgetsSucceeded ? forgotten : succeeded).push(job.id);
    }
    let lost = 0;
    if (forgotten.length > 0) {
      const result = await db
        .deleteFrom("jobs")
        .where(oneOf(this.deps.dialect, "id", forgotten))
        .where("locked_by", "=", this.id)
        .executeTakeFirst();
      lost += forgotten.length - Number(result.numDeletedRows);
    }
    if (succeeded.length > 0) {
      const result = await held(
        db
          .updateTable("jobs")
          .set({ status: "succeeded", lease_until: null, locked_by: null, updated_at: at, finished_at: at })
          .where(oneOf(this.deps.dialect, "id", succeeded)),
      ).executeTakeFirst();
      lost += succeeded.length - Number(result.numUpdatedRows);
    }
    for (const [i, job] of jobs.entries()) {
      const outcome = outcomes[i];
      if (!outcome || outcome.status === "succeeded") continue;
      const result = await held(
        db
          .updateTable("jobs")
          .set({
            status: outcome.status,
            lease_until: null,
            locked_by: null,
            updated_at: at,
            last_error: (outcome.error ?? "").slice(0, MAX_ERROR_LENGTH),
            ...(outcome.status === "dead" ? { finished_at: at } : {}),
            ...(outcome.retryInMs !== undefined
              ? { run_at: new Date(now.getTime() + outcome.retryInMs).toISOString() }
              : {}),
          })
          .where("id", "=", job.id),
      ).executeTakeFirst();
      lost += 1 - Number(result.numUpdatedRows);
      // Look again when the retry falls due, counted from its `run_at` as written (not from when
      // the attempt failed, which is earlier: a look then would find nothing and wait a poll).
      if (outcome.retryInMs !== undefined) this.lookAgainAt(Date.now() + outcome.retryInMs);
    }
    if (lost > 0) this.deps.log.warn({ kind: jobs[0]?.kind, lost }, "job lease was lost before it finished");
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
}
