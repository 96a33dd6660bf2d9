import { sql } from "kysely";
import type { Clock } from "../clock.ts";
import type { Db, Dialect } from "../db/database.ts";
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
}

export const DEFAULT_MAX_ATTEMPTS = 10;
export const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * Queues jobs in the database the caller is writing to, so a job exists exactly when the change
 * that causes it commits. Local workers are woken as soon as the transaction can have committed;
 * workers in other processes by NOTIFY (PostgreSQL) or by their next poll.
 */
export class JobQueue {
  private readonly listeners = new Set<() => void>();

  private readonly channel: string;

  constructor(
    private readonly dialect: Dialect,
    private readonly clock: Clock,
    schema: string | undefined,
  ) {
    this.channel = jobsChannel(schema);
  }

  /** Inserts the jobs; pass the open transaction of the change that causes them. */
  async enqueue(db: Db, ...specs: JobSpec[]): Promise<void> {
    if (specs.length === 0) return;
    const now = this.clock.now();
    const at = now.toISOString();
    await db
      .insertInto("jobs")
      .values(
        specs.map((spec) => ({
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
        })),
      )
      .onConflict((oc) => oc.column("idempotency_key").doNothing())
      .execute();
    if (this.dialect === "postgres") {
      await sql`select pg_notify(${this.channel}, '')`.execute(db);
    } else {
      // Every SQLite query shares one connection, so a worker woken now queues behind the
      // caller's transaction and claims only after it commits.
      setImmediate(() => this.wake());
    }
  }

  onWake(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  wake(): void {
    for (const listener of this.listeners) listener();
  }
}

/** `base × 2^(attempt−1)`, capped at an hour, with ±20% jitter so retries of a burst spread out. */
export function backoffMs(attempt: number, baseMs: number, random: () => number = Math.random): number {
  const raw = Math.min(baseMs * 2 ** Math.max(0, attempt - 1), 3_600_000);
  return Math.round(raw * (0.8 + 0.4 * random()));
}
