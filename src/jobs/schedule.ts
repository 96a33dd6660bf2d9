import type { Db } from "../db/database.ts";
import type { Deps } from "../deps.ts";

export interface RecurringJob {
  /** Unique name; one run per period cluster-wide. */
  name: string;
  everyMs: number;
  kind: string;
  payload?: Record<string, unknown>;
}

/** How often a worker looks whether a recurring job is due. */
const SCHEDULE_TICK_MS = 15_000;

/**
 * Enqueues each recurring job once per period for the whole cluster, now and every tick, until
 * the returned function is called. Every worker runs this; the process that moves a schedule's
 * `next_run_at` forward (a compare-and-set) is the one that enqueues its job.
 */
export async function startSchedule(deps: Deps, recurring: RecurringJob[]): Promise<() => void> {
  if (recurring.length === 0) return () => {};
  const tick = async () => {
    for (const job of recurring) {
      try {
        await deps.db.transaction().execute(async (trx) => scheduleOne(trx, deps, job));
      } catch (error) {
        deps.log.error({ err: error, schedule: job.name }, "scheduling a recurring job failed");
      }
    }
  };
  await tick();
  const timer = setInterval(() => void tick(), SCHEDULE_TICK_MS);
  timer.unref();
  return () => clearInterval(timer);
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
