import { type Selectable, sql } from "kysely";
import type { Clock } from "../clock.ts";
import type { Db, Dialect } from "../db/database.ts";
import type { JobsTable } from "../db/schema.ts";
import { insertRows } from "../db/shapes.ts";
import { newId } from "../lib/ids.ts";
import { toJsonColumn } from "../lib/json.ts";

/**
 * The channel PostgreSQL workers LISTEN on; NOTIFY is transactional, so it fires at commit.
 * Channels are database-wide; naming the schema keeps deployments that share a database apart.
 */
export function jobsChannel(schema: string | undefined): string {
  return `plinth_jobs:${schema ?? "public"}`;
}

export type JobStatus = "pending" | "running" | "succeeded" | "dead";

export interface JobSpec {
  kind: string;
  payload: Record<string, unknown>;
  /** When the job becomes due; now when omitted. */
  runAt?: Date;
  maxAttempts?: number;
  timeoutMs?: number;
  /** A second enqueue with the same key is a no-op, whatever the first job's state. */
  idempotencyKey?: string;
  /**
   * What the enqueuing code holds already and the job would otherwise read back (a delivery's
   * row, say): never stored, it reaches the handler only with a job this process's worker takes
   * at enqueue, once the enqueuing transaction is known to have committed (`JobRun.local`).
   */
  local?: unknown;
}

const DEFAULT_MAX_ATTEMPTS = 10;
/** A lease outlives the job's timeout by this much, so a slow but live worker keeps its job. */
export const LEASE_MARGIN_MS = 5_000;

export type Job = Selectable<JobsTable>;

/** See `JobQueue.setLocalTaker`. */
export interface LocalTaker {
  readonly id: string;
  /** How many of `count` new due jobs of `kind` the worker takes now (0 for kinds it claims itself). */
  reserve(kind: string, count: number): number;
  /** Gives back reserved room for jobs that were not inserted after all. */
  release(kind: string, count: number): void;
  /**
   * The taken jobs, once the enqueuing transaction is done; `committed` when it is known to have
   * committed (else the worker checks that the jobs exist before running them).
   */
  adopt(jobs: Job[], committed: boolean): void;
}

interface HandOver {
  taker: LocalTaker;
  jobs: Job[];
}

/** The `local` of each job taken at enqueue that came with one (see `JobSpec.local`). */
const locals = new WeakMap<Job, unknown>();

/** The `local` a job was enqueued with, if this process's worker took it at enqueue. */
export function localOf(job: Job): unknown {
  return locals.get(job);
}

const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * Queues jobs in the database the caller is writing to, so a job exists exactly when the change
 * that causes it commits. Local workers are woken as soon as the transaction can have committed;
 * workers in other processes by NOTIFY (PostgreSQL) or by their next poll.
 */
export class JobQueue {
  private readonly listeners = new Set<(kinds: readonly string[]) => void>();

  private readonly channel: string;
  private taker: LocalTaker | undefined;
  /** Each open `transaction()`'s worker and the jobs it took, handed over after the commit. */
  private readonly handOvers = new WeakMap<Db, HandOver>();

  constructor(
    private readonly dialect: Dialect,
    private readonly clock: Clock,
    schema: string | undefined,
  ) {
    this.channel = jobsChannel(schema);
  }

  /**
   * A worker in this process that takes new jobs straight away: jobs it reserves are inserted
   * already claimed by it, and handed over once the transaction is done, saving the claim's own
   * transaction. If this process dies, the lease lapses and any worker claims them as usual.
   *
   * - Inside `transaction()`: handed over once it has committed; a rollback gives the room back.
   * - SQLite, elsewhere: handed over on the next turn of the event loop. Every SQLite query shares
   *   one connection, so the worker's first read of them queues behind the enqueuing transaction
   *   and sees it committed (or, after a rollback, sees nothing and has nothing to do).
   * - PostgreSQL, elsewhere: not at all, as nobody knows when the transaction commits.
   */
  setLocalTaker(taker: LocalTaker | undefined): void {
    this.taker = taker;
  }

  /**
   * Runs `work` in a transaction of `db`; due jobs it enqueues go to this process's worker (see
   * `setLocalTaker`) after the commit, instead of waiting for a claim.
   */
  async transaction<T>(db: Db, work: (trx: Db) => Promise<T>): Promise<T> {
    const taker = this.taker;
    if (!taker) return db.transaction().execute(work);
    const handOver: HandOver = { taker, jobs: [] };
    let result: T;
    try {
      result = await db.transaction().execute((trx) => {
        this.handOvers.set(trx, handOver);
        return work(trx);
      });
    } catch (error) {
      for (const job of handOver.jobs) taker.release(job.kind, 1);
      throw error;
    }
    if (handOver.jobs.length > 0) taker.adopt(handOver.jobs, true);
    return result;
  }

  /** Inserts the jobs; pass the open transaction of the change that causes them. */
  async enqueue(db: Db, ...specs: JobSpec[]): Promise<void> {
    if (specs.length === 0) return;
    const now = this.clock.now();
    const at = now.toISOString();
    const rows: Job[] = specs.map((spec) => {
      const row: Job = {
        id: newId("job", now),
        kind: spec.kind,
        payload: toJsonColumn(spec.payload) ?? "{}",
        status: "pending",
        attempts: 0,
        max_attempts: spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
        timeout_ms: spec.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        run_at: (spec.runAt ?? now).toISOString(),
        lease_until: null,
        locked_by: null,
        last_error: null,
        idempotency_key: spec.idempotencyKey ?? null,
        created_at: at,
        updated_at: at,
        finished_at: null,
      };
      // Reaches a handler only if this process's worker takes this very row (a claim reads anew).
      if (spec.local !== undefined) locals.set(row, spec.local);
      return row;
    });
    const handOver = this.handOvers.get(db);
    // Inside transaction(), the worker that was there when it began: the one that adopts.
    const taker = handOver?.taker ?? (this.dialect === "sqlite" ? this.taker : undefined);
    const taken = new Map<string, Job[]>();
    if (taker) {
      for (const row of rows) {
        if (row.run_at > at) continue;
        const mine = taken.get(row.kind) ?? [];
        taken.set(row.kind, mine);
        mine.push(row);
      }
      for (const [kind, mine] of taken) {
        const leases = mine.map((row) => new Date(now.getTime() + row.timeout_ms + LEASE_MARGIN_MS).toISOString());
        const count = taker.reserve(kind, mine.length);
        mine.length = count;
        mine.forEach((row, i) => {
          row.status = "running";
          row.attempts = 1;
          row.locked_by = taker.id;
          row.lease_until = leases[i] as string;
        });
      }
    }
    let inserted: Set<string>;
    try {
      // Only keyed jobs need the conflict check (a speculative insert, dearer than a plain one).
      const keyed = rows.some((row) => row.idempotency_key !== null);
      const ids = await insertRows(db, this.dialect, "jobs", rows, {
        ...(keyed ? { skipConflictOn: "idempotency_key" } : {}),
        returningIds: taken.size > 0,
      });
      inserted = new Set(ids);
    } catch (error) {
      // Nothing of this call is ours to run: give the room back.
      if (taker) for (const [kind, mine] of taken) taker.release(kind, mine.length);
      throw error;
    }
    if (taker && taken.size > 0) {
      // A job whose idempotency key already existed was not inserted: it is not ours to run.
      const adopted: Job[] = [];
      for (const [kind, mine] of taken) {
        const kept = mine.filter((row) => inserted.has(row.id));
        taker.release(kind, mine.length - kept.length);
        adopted.push(...kept);
      }
      if (handOver) handOver.jobs.push(...adopted);
      else if (adopted.length > 0) setImmediate(() => taker.adopt(adopted, false));
    }
    // Kinds with jobs left for a claim (all of them, unless a local taker took every one).
    const kinds = [...new Set(rows.filter((row) => row.status === "pending").map((row) => row.kind))];
    if (kinds.length === 0) return;
    if (this.dialect === "postgres") {
      await sql`select pg_notify(${this.channel}, ${kinds.join(",")})`.execute(db);
    } else {
      // Every SQLite query of this thread shares one connection, so a worker woken now queues
      // behind the caller's transaction and claims only after it commits. (A worker thread is
      // woken only once the transaction is over: see WorkerThread.)
      setImmediate(() => this.wake(kinds));
    }
  }

  /** `listener` hears the kinds of every local enqueue. */
  onWake(listener: (kinds: readonly string[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  wake(kinds: readonly string[]): void {
    for (const listener of this.listeners) listener(kinds);
  }
}

/** `base × 2^(attempt−1)`, capped at an hour, with ±20% jitter so retries of a burst spread out. */
export function backoffMs(attempt: number, baseMs: number, random: () => number = Math.random): number {
  const raw = Math.min(baseMs * 2 ** Math.max(0, attempt - 1), 3_600_000);
  return Math.round(raw * (0.8 + 0.4 * random()));
}

/** Jobs due to run now and not claimed, and how long the oldest of them has waited (metrics). */
export async function readyJobs(deps: { db: Db; clock: Clock }): Promise<{ ready: number; oldestSeconds: number }> {
  const now = deps.clock.now();
  const row = await deps.db
    .selectFrom("jobs")
    .select((eb) => [eb.fn.countAll<number | string>().as("ready"), eb.fn.min("run_at").as("oldest")])
    .where("status", "=", "pending")
    .where("run_at", "<=", now.toISOString())
    .executeTakeFirst();
  const oldest = row?.oldest ? Date.parse(row.oldest as string) : Number.NaN;
  return {
    ready: Number(row?.ready ?? 0),
    oldestSeconds: Number.isNaN(oldest) ? 0 : Math.max(0, (now.getTime() - oldest) / 1000),
  };
}
