import { DAY_MS } from "../clock.ts";
import type { Deps } from "../deps.ts";
import { pruneIdempotencyKeys } from "../http/idempotency.ts";
import type { JobHandlers } from "./handlers.ts";
import type { RecurringJob } from "./schedule.ts";

/** Finished jobs are kept this long for inspection: succeeded a day, dead-lettered a month. */
const KEEP_SUCCEEDED_MS = DAY_MS;
const KEEP_DEAD_MS = 30 * DAY_MS;
const BATCH = 1_000;

export function maintenanceJobs(deps: Deps): JobHandlers {
  return {
    "jobs.prune": {
      async handle() {
        const now = deps.clock.now().getTime();
        await pruneBatches(deps, "succeeded", new Date(now - KEEP_SUCCEEDED_MS).toISOString());
        await pruneBatches(deps, "dead", new Date(now - KEEP_DEAD_MS).toISOString());
        await pruneIdempotencyKeys(deps, BATCH);
      },
    },
  };
}

export const maintenanceSchedule: RecurringJob[] = [{ name: "jobs.prune", everyMs: DAY_MS, kind: "jobs.prune" }];

/** Deletes in batches so a large backlog never holds a long write lock. */
async function pruneBatches(deps: Deps, status: string, finishedBefore: string): Promise<void> {
  for (;;) {
    const batch = await deps.db
      .selectFrom("jobs")
      .select("id")
      .where("status", "=", status)
      .where("finished_at", "<", finishedBefore)
      .limit(BATCH)
      .execute();
    if (batch.length === 0) return;
    await deps.db
      .deleteFrom("jobs")
      .where(
        "id",
        "in",
        batch.map((row) => row.id),
      )
      .execute();
    if (batch.length < BATCH) return;
  }
}
