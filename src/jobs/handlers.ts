import type { Db } from "../db/database.ts";
import type { Job } from "./queue.ts";

/** What a job handler is given and returns: the contract between the worker and the domains. */

export interface JobRun {
  job: Job;
  /** Aborted when the job's timeout passes or the worker is forced to stop. */
  signal: AbortSignal;
  /**
   * The `local` the job was enqueued with (`JobSpec.local`), when this worker took it at enqueue
   * from a transaction known to have committed; otherwise undefined, and the handler reads what
   * it needs.
   */
  local?: unknown;
}

/** Runs one job per call, in one of the worker's `concurrency` slots. */
export interface SingleJobHandler {
  handle(payload: Record<string, unknown>, run: JobRun): Promise<void>;
  /** First retry delay; later ones double (see `backoffMs`). */
  backoffBaseMs?: number;
}

/**
 * How one job of a batch went: `error` fails this attempt (null: done), and `data` is what the
 * handler's `record` writes about it, in the same transaction as the job's outcome.
 */
export interface JobResult {
  error: Error | null;
  data?: unknown;
}

/**
 * For kinds that are many, small and I/O-bound (webhook deliveries). Jobs are claimed many at a
 * time (up to `maxInFlight` at once), handed over `batchSize` at a time so the handler can load
 * what they need in one go, and each job's result is committed as soon as it is ready, grouped
 * with the results that finish at about the same time (one transaction per group): a slow job
 * never holds back the others.
 */
export interface BatchJobHandler {
  batchSize: number;
  /** Most jobs of this kind running at once in this worker. */
  maxInFlight: number;
  /** Starts the jobs; resolves to one promise per job, in the order given. */
  handleBatch(
    runs: Array<JobRun & { payload: Record<string, unknown> }>,
    signal: AbortSignal,
  ): Promise<Array<Promise<JobResult>>>;
  /**
   * True when the handler reads each job's own rows and does nothing for a job whose rows are
   * missing: then jobs handed over at enqueue (see `JobQueue.setLocalTaker`) need no check that
   * their transaction committed, as a rolled-back one left nothing to find.
   */
  findsOwnRows?: boolean;
  /**
   * True when the handler's own rows are the record of each job (a delivery and its attempts):
   * a succeeded job's row is then deleted at once instead of kept a day, which spares the queue
   * a row version and its index entries per job.
   */
  forgetsSucceeded?: boolean;
  /** Writes the `data` of jobs finished together, in the transaction that settles them. */
  record?(trx: Db, data: unknown[]): Promise<void>;
  /**
   * Writes what the handler's own rows say of jobs dead-lettered, never to run again, because the
   * worker running their last attempt stopped (`error` says so), in the transaction that does it.
   */
  recordLapsed?(trx: Db, jobs: Job[], error: string): Promise<void>;
  backoffBaseMs?: number;
}

export type JobHandler = SingleJobHandler | BatchJobHandler;

export type JobHandlers = Record<string, JobHandler>;

/** Thrown by a handler when retrying cannot help: the job is dead-lettered at once. */
export class PermanentJobError extends Error {}

export function isBatchHandler(handler: JobHandler): handler is BatchJobHandler {
  return "handleBatch" in handler;
}
