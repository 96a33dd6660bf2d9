import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import { ValidationError } from "../../errors.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { entitlementsOf } from "../billing/entitlements.ts";
import type { OrgCtx } from "../context.ts";
import { authorize } from "../orgs/access.ts";
import { dayOf, measureUsage } from "./meter.ts";

export const USAGE_METRICS = ["requests", "d1", "r2", "neurons"] as const;
export type UsageMetric = (typeof USAGE_METRICS)[number];

/** `used` as a percentage of `limit`, to one decimal (0 when there is no limit). */
function percentOf(used: number, limit: number): number {
  return limit > 0 ? Math.round((used / limit) * 1000) / 10 : 0;
}

export interface OrgUsage {
  periodStart: string;
  periodEnd: string;
  planId: string;
  metrics: Record<UsageMetric, { used: number; limit: number; pct: number }>;
  projects: Array<{ id: string; slug: string; requests: number; d1: number; r2: number }>;
}

/**
 * What the org has used in its current period: requests added up over the period's days (of
 * every project, deleted ones included: they were served), d1 and r2 the latest measurement of
 * each live project, against its plan's limits.
 */
export async function orgUsage(deps: Deps, org: { id: string; plan_id: string }): Promise<OrgUsage> {
  const { limits, periodStart: start, periodEnd: end } = await entitlementsOf(deps, org);
  const requests = await deps.db
    .selectFrom("usage_daily")
    .select(["project_id", (eb) => eb.fn.sum<number | string>("requests").as("requests")])
    .where("org_id", "=", org.id)
    .where("date", ">=", dayOf(start))
    .where("date", "<", dayOf(end))
    .groupBy("project_id")
    .execute();
  const gauges = await deps.db
    .selectFrom("usage_daily as u")
    .select(["u.project_id", "u.d1", "u.r2"])
    .where("u.org_id", "=", org.id)
    .where("u.measured_at", "is not", null)
    .where("u.date", "=", (eb) =>
      eb
        .selectFrom("usage_daily as v")
        .select((inner) => inner.fn.max("v.date").as("date"))
        .whereRef("v.project_id", "=", "u.project_id")
        .where("v.measured_at", "is not", null),
    )
    .execute();
  const live = await deps.db
    .selectFrom("projects")
    .select(["id", "slug"])
    .where("org_id", "=", org.id)
    .where("deleted_at", "is", null)
    .orderBy("id")
    .execute();
  const requestsOf = new Map(requests.map((row) => [row.project_id, Number(row.requests ?? 0)]));
  const gaugeOf = new Map(gauges.map((row) => [row.project_id, { d1: Number(row.d1), r2: Number(row.r2) }]));
  const projects = live.map((project) => ({
    id: project.id,
    slug: project.slug,
    requests: requestsOf.get(project.id) ?? 0,
    d1: gaugeOf.get(project.id)?.d1 ?? 0,
    r2: gaugeOf.get(project.id)?.r2 ?? 0,
  }));
  const used: Record<UsageMetric, number> = {
    requests: [...requestsOf.values()].reduce((sum, n) => sum + n, 0),
    d1: projects.reduce((sum, project) => sum + project.d1, 0),
    r2: projects.reduce((sum, project) => sum + project.r2, 0),
    neurons: 0,
  };
  const metric = (name: UsageMetric) => ({
    used: used[name],
    limit: limits[name],
    pct: percentOf(used[name], limits[name]),
  });
  return {
    periodStart: start.toISOString(),
    periodEnd: end.toISOString(),
    planId: org.plan_id,
    metrics: { requests: metric("requests"), d1: metric("d1"), r2: metric("r2"), neurons: metric("neurons") },
    projects,
  };
}

export async function getUsage({ ctx }: { ctx: OrgCtx }): Promise<OrgUsage> {
  authorize(ctx, "projects:read");
  return orgUsage(ctx.deps, ctx.org);
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
/** The most days a history covers. */
export const MAX_HISTORY_DAYS = 366;
const DEFAULT_HISTORY_DAYS = 30;

/** A `YYYY-MM-DD` that is a real day, or null. */
function parseDate(text: string): string | null {
  const parts = DATE.exec(text.trim());
  if (!parts) return null;
  const day = new Date(Date.UTC(Number(parts[1]), Number(parts[2]) - 1, Number(parts[3])));
  return Number.isNaN(day.getTime()) || dayOf(day) !== text.trim() ? null : text.trim();
}

/** The org's usage per project and day, deleted and purged projects included. */
export async function getUsageHistory({ ctx, query }: { ctx: OrgCtx; query: { from?: string; to?: string } }) {
  authorize(ctx, "projects:read");
  const today = dayOf(ctx.deps.clock.now());
  const to = query.to === undefined ? today : parseDate(query.to);
  if (to === null) throw new ValidationError([{ path: "to", message: "must be a date, YYYY-MM-DD" }]);
  const from =
    query.from === undefined
      ? dayOf(new Date(Date.parse(to) - (DEFAULT_HISTORY_DAYS - 1) * DAY_MS))
      : parseDate(query.from);
  if (from === null) throw new ValidationError([{ path: "from", message: "must be a date, YYYY-MM-DD" }]);
  if (from > to) throw new ValidationError([{ path: "from", message: "must not be after to" }]);
  if ((Date.parse(to) - Date.parse(from)) / DAY_MS + 1 > MAX_HISTORY_DAYS) {
    throw new ValidationError([{ path: "from", message: `the range may cover at most ${MAX_HISTORY_DAYS} days` }]);
  }
  const rows = await ctx.deps.db
    .selectFrom("usage_daily as u")
    .leftJoin("projects as p", "p.id", "u.project_id")
    .select([
      "u.date",
      "u.project_id",
      "u.project_slug",
      "u.requests",
      "u.d1",
      "u.r2",
      "p.deleted_at",
      "p.id as live_id",
    ])
    .where("u.org_id", "=", ctx.org.id)
    .where("u.date", ">=", from)
    .where("u.date", "<=", to)
    .orderBy("u.date")
    .orderBy("u.project_slug")
    .execute();
  return {
    from,
    to,
    days: rows.map((row) => ({
      date: row.date,
      projectId: row.project_id,
      projectSlug: row.project_slug,
      projectDeleted: row.live_id === null || row.deleted_at !== null,
      requests: Number(row.requests),
      d1: Number(row.d1),
      r2: Number(row.r2),
    })),
  };
}

export function usageJobs(deps: Deps): JobHandlers {
  return { "usage.measure": { handle: () => measureUsage(deps) } };
}

export const usageSchedule: RecurringJob[] = [{ name: "usage.measure", everyMs: DAY_MS / 24, kind: "usage.measure" }];
