import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import type { JobHandlers, JobResult, JobRun } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { firstIdAt } from "../../lib/ids.ts";
import { fromJsonColumn } from "../../lib/json.ts";
import { type AttemptRecord, type Delivery, endLapsedDeliveries, recordAttempts, startAttempts } from "./delivery.ts";
import { attemptTimeoutWithin } from "./events.ts";

const RETENTION_BATCH = 1_000;
/** Deliveries claimed, sent and recorded together by one worker slot. */
const DELIVERY_BATCH = 64;

/**
 * The `webhook.deliver` job: one attempt per run; the queue retries with backoff until
 * `maxAttempts`. And the daily retention job, which deletes deliveries (with their attempts)
 * older than WEBHOOK_DELIVERIES_RETENTION_DAYS, in batches; 0 keeps everything.
 */
export function deliveryJobs(deps: Deps) {
  return {
    "webhooks.retention": {
      async handle(_payload: Record<string, unknown>, _run: JobRun): Promise<void> {
        const days = deps.config.webhookDeliveriesRetentionDays;
        if (days === 0) return;
        // A delivery's id carries its creation time, so its primary key finds the old ones.
        const cutoff = firstIdAt("dlv", new Date(deps.clock.now().getTime() - days * DAY_MS));
        for (;;) {
          const batch = await deps.db
            .selectFrom("webhook_deliveries")
            .select("id")
            .where("id", "<", cutoff)
            .limit(RETENTION_BATCH)
            .execute();
          if (batch.length === 0) return;
          const ids = batch.map((row) => row.id);
          await deps.db.transaction().execute(async (trx) => {
            await trx.deleteFrom("webhook_attempts").where("delivery_id", "in", ids).execute();
            await trx.deleteFrom("webhook_deliveries").where("id", "in", ids).execute();
          });
          if (batch.length < RETENTION_BATCH) return;
        }
      },
    },
    "webhook.deliver": {
      batchSize: DELIVERY_BATCH,
      maxInFlight: deps.config.webhookConcurrency,
      // A delivery is inserted in the transaction that enqueues its job: no row, nothing sent.
      findsOwnRows: true,
      // The delivery and its attempts are the record; the job's row goes once it has succeeded.
      forgetsSucceeded: true,
      backoffBaseMs: deps.config.webhookBackoffBaseMs,
      async handleBatch(runs, signal) {
        const attempts = await startAttempts(
          deps,
          runs.map(({ job, payload, local }) => ({
            deliveryId: String(payload.deliveryId),
            final: job.attempts >= job.max_attempts,
            timeoutMs: attemptTimeoutWithin(job.timeout_ms),
            // Handed over by the dispatch that inserted it (see WorkspaceDispatcher).
            ...(local ? { delivery: local as Delivery } : {}),
          })),
          signal,
        );
        return attempts.map(async (attempt): Promise<JobResult> => {
          const { result, record } = await attempt;
          const failed = result.status === "failed" || result.status === "dead";
          return {
            error: failed ? new Error(`delivery failed: ${result.error ?? "unknown error"}`) : null,
            data: record,
          };
        });
      },
      record: (trx, records) =>
        recordAttempts(
          trx,
          deps,
          records.filter((record): record is AttemptRecord => record !== null && record !== undefined),
        ),
      recordLapsed: (trx, jobs, error) =>
        endLapsedDeliveries(
          trx,
          deps,
          jobs.map((job) => String(fromJsonColumn<Record<string, unknown>>(job.payload, {}).deliveryId)),
          error,
        ),
    },
  } satisfies JobHandlers;
}

export const deliverySchedule: RecurringJob[] = [
  { name: "webhooks.retention", everyMs: DAY_MS, kind: "webhooks.retention" },
];
