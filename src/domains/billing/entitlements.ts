import type { Selectable } from "kysely";
import type { SubscriptionsTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import type { PlanLimits } from "../plans/catalog.ts";
import { planOf } from "../plans/service.ts";

const GIB = 1024 * 1024 * 1024;

export const PACK_TYPES = ["requests", "neurons", "r2", "d1"] as const;
export type PackType = (typeof PACK_TYPES)[number];

/** What one pack adds to its metric's limit for the period it is bought in (DESIGN §11). */
export const PACK_AMOUNTS: Record<PackType, number> = {
  requests: 1_000_000,
  neurons: 1_000_000,
  r2: 10 * GIB,
  d1: 1 * GIB,
};

/** What a pack costs, in US cents. */
export const PACK_PRICES_CENTS: Record<PackType, number> = { requests: 1_000, neurons: 1_000, r2: 500, d1: 500 };

export type SubscriptionRow = Selectable<SubscriptionsTable>;

/** The calendar month in UTC around `now`: the period of an org without a subscription. */
export function calendarMonth(now: Date): { start: Date; end: Date } {
  return {
    start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)),
    end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)),
  };
}

/** What an org may use now, and over which period: every limit in Plinth reads this. */
export interface Entitlements {
  planId: string;
  limits: PlanLimits;
  periodStart: Date;
  periodEnd: Date;
}

/**
 * The org's entitlements, computed from what is stored here (its plan, its subscription's period,
 * the packs bought for that period): never from the payment provider, so that its outage or a
 * late webhook blocks no request. The period is the subscription's while it runs, else the
 * calendar month in UTC (DESIGN §8).
 */
export async function entitlementsOf(deps: Deps, org: { id: string; plan_id: string }): Promise<Entitlements> {
  const now = deps.clock.now();
  const subscription = await deps.db
    .selectFrom("subscriptions")
    .select(["status", "current_period_start", "current_period_end"])
    .where("org_id", "=", org.id)
    .executeTakeFirst();
  const nowIso = now.toISOString();
  const period =
    subscription &&
    subscription.status !== "canceled" &&
    subscription.current_period_start <= nowIso &&
    nowIso < subscription.current_period_end
      ? { start: new Date(subscription.current_period_start), end: new Date(subscription.current_period_end) }
      : calendarMonth(now);
  const limits = { ...planOf(deps.config, org.plan_id).limits };
  const packs = await deps.db
    .selectFrom("packs")
    .select(["type", (eb) => eb.fn.sum<number | string>("amount").as("amount")])
    .where("org_id", "=", org.id)
    .where("period_start", "<=", nowIso)
    .where("period_end", ">", nowIso)
    .groupBy("type")
    .execute();
  for (const pack of packs) limits[pack.type as PackType] += Number(pack.amount ?? 0);
  return { planId: org.plan_id, limits, periodStart: period.start, periodEnd: period.end };
}
