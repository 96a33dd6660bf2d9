import type { Selectable } from "kysely";
import { isUniqueViolation } from "../../db/database.ts";
import type { AlarmsTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import { ConflictError, NotFoundError, PlanLimitError } from "../../errors.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { isIdOf, newId } from "../../lib/ids.ts";
import { recordAudit, recordSystemAudit } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { orgUsage } from "../usage/service.ts";
import { emitOrgEvent } from "../webhooks/events.ts";

type AlarmRow = Selectable<AlarmsTable>;

/** Alarms an org may have (DESIGN §10). */
export const ALARMS_PER_ORG = 20;

export function toAlarm(row: AlarmRow) {
  return {
    id: row.id,
    metric: row.metric as "requests" | "d1" | "r2",
    thresholdPct: Number(row.threshold_pct),
    lastFiredAt: row.last_fired_at,
    createdAt: row.created_at,
  };
}

export async function createAlarm({
  ctx,
  input,
}: {
  ctx: OrgCtx;
  input: { metric: "requests" | "d1" | "r2"; thresholdPct: number };
}) {
  authorize(ctx, "alarms:manage");
  const now = ctx.deps.clock.now();
  try {
    const row = await inOrgTransaction(
      ctx,
      async (trx) => {
        const existing = await trx
          .selectFrom("alarms")
          .select(["metric", "threshold_pct"])
          .where("org_id", "=", ctx.org.id)
          .execute();
        if (
          existing.some((alarm) => alarm.metric === input.metric && Number(alarm.threshold_pct) === input.thresholdPct)
        ) {
          throw new ConflictError(`an alarm on ${input.metric} at ${input.thresholdPct}% exists already`);
        }
        if (existing.length >= ALARMS_PER_ORG) {
          throw new PlanLimitError(`an org has at most ${ALARMS_PER_ORG} alarms`, {
            limit: ALARMS_PER_ORG,
            used: existing.length,
            planId: ctx.org.plan_id,
          });
        }
        const alarm: AlarmRow = {
          id: newId("alm", now),
          org_id: ctx.org.id,
          metric: input.metric,
          threshold_pct: input.thresholdPct,
          last_fired_at: null,
          created_at: now.toISOString(),
        };
        await trx.insertInto("alarms").values(alarm).execute();
        await recordAudit(trx, ctx, {
          orgId: ctx.org.id,
          action: "alarm.created",
          target: { type: "alarm", id: alarm.id },
          data: { metric: input.metric, thresholdPct: input.thresholdPct },
        });
        return alarm;
      },
      { exclusive: true },
    );
    return { alarm: toAlarm(row) };
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new ConflictError(`an alarm on ${input.metric} at ${input.thresholdPct}% exists already`);
    }
    throw error;
  }
}

export async function listAlarms({ ctx }: { ctx: OrgCtx }) {
  authorize(ctx, "projects:read");
  const rows = await ctx.deps.db
    .selectFrom("alarms")
    .selectAll()
    .where("org_id", "=", ctx.org.id)
    .orderBy("id")
    .execute();
  return { alarms: rows.map(toAlarm) };
}

export async function deleteAlarm({ ctx, id }: { ctx: OrgCtx; id: string }) {
  authorize(ctx, "alarms:manage");
  await inOrgTransaction(ctx, async (trx) => {
    const removed = isIdOf("alm", id)
      ? await trx
          .deleteFrom("alarms")
          .where("id", "=", id)
          .where("org_id", "=", ctx.org.id)
          .returningAll()
          .executeTakeFirst()
      : undefined;
    if (!removed) throw new NotFoundError("alarm not found");
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "alarm.deleted",
      target: { type: "alarm", id },
      data: { metric: removed.metric, thresholdPct: Number(removed.threshold_pct) },
    });
  });
}

/**
 * The `alarms.evaluate` job (every minute): each org with alarms has its usage computed once;
 * an alarm whose metric has reached its threshold and that has not fired in the current period
 * fires: `alarm.fired` through the delivery engine (with its notification), and an audit row, in
 * the transaction that marks it fired, so it fires once per period whatever runs at once.
 */
export async function evaluateAlarms(deps: Deps): Promise<void> {
  const alarms = await deps.db
    .selectFrom("alarms")
    .innerJoin("orgs", "orgs.id", "alarms.org_id")
    .selectAll("alarms")
    .select("orgs.plan_id")
    .where("orgs.deleted_at", "is", null)
    .orderBy("alarms.org_id")
    .execute();
  const byOrg = new Map<string, typeof alarms>();
  for (const alarm of alarms) byOrg.set(alarm.org_id, [...(byOrg.get(alarm.org_id) ?? []), alarm]);
  for (const [orgId, orgAlarms] of byOrg) {
    try {
      const usage = await orgUsage(deps, { id: orgId, plan_id: orgAlarms[0]?.plan_id as string });
      // The org's own period: its subscription's, or the calendar month.
      const periodStart = usage.periodStart;
      for (const alarm of orgAlarms) {
        const metric = usage.metrics[alarm.metric as "requests" | "d1" | "r2"];
        if (!metric || metric.pct < Number(alarm.threshold_pct)) continue;
        if (alarm.last_fired_at !== null && alarm.last_fired_at >= periodStart) continue;
        await deps.db.transaction().execute(async (trx) => {
          const fired = await trx
            .updateTable("alarms")
            .set({ last_fired_at: deps.clock.now().toISOString() })
            .where("id", "=", alarm.id)
            .where((eb) => eb.or([eb("last_fired_at", "is", null), eb("last_fired_at", "<", periodStart)]))
            .executeTakeFirst();
          if (Number(fired.numUpdatedRows) === 0) return;
          const payload = {
            alarmId: alarm.id,
            metric: alarm.metric,
            thresholdPct: Number(alarm.threshold_pct),
            used: metric.used,
            limit: metric.limit,
            pct: metric.pct,
            periodStart,
          };
          await emitOrgEvent(trx, deps, { orgId, kind: "alarm.fired", payload });
          await recordSystemAudit(trx, deps, {
            orgId,
            action: "alarm.fired",
            target: { type: "alarm", id: alarm.id },
            data: payload,
          });
        });
      }
    } catch (error) {
      deps.log.error({ err: error, orgId }, "evaluating an org's alarms failed");
    }
  }
}

export function alarmJobs(deps: Deps): JobHandlers {
  return { "alarms.evaluate": { handle: () => evaluateAlarms(deps) } };
}

export const alarmSchedule: RecurringJob[] = [{ name: "alarms.evaluate", everyMs: 60_000, kind: "alarms.evaluate" }];
