import type { Deps } from "../../deps.ts";
import { PlanLimitError } from "../../errors.ts";
import { type OrgUsage, orgUsage } from "./service.ts";

/** How long an org's usage, as quotas read it, is reused before it is computed again. */
const CACHE_MS = 10_000;
/** Orgs remembered at most. */
const MAX_CACHED = 10_000;

const cache = new Map<string, { until: number; usage: Promise<OrgUsage> }>();

/**
 * The org's usage for its hard quotas (DESIGN §8: r2 on upload, d1 on workspace writes), from
 * the usage tables, computed at most every CACHE_MS per org and process: a quota costs a write
 * a map look-up, not a query. A measurement or an upload in this process forgets it at once.
 */
async function usageFor(deps: Deps, orgId: string): Promise<OrgUsage | null> {
  const now = Date.now();
  const known = cache.get(orgId);
  if (known && known.until > now) return known.usage;
  const usage = (async () => {
    const org = await deps.db.selectFrom("orgs").select(["id", "plan_id"]).where("id", "=", orgId).executeTakeFirst();
    if (!org) throw new Error("org not found");
    return orgUsage(deps, org);
  })();
  if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value as string);
  cache.set(orgId, { until: now + CACHE_MS, usage });
  return usage.catch(() => {
    cache.delete(orgId);
    return null;
  });
}

/** Forgets what this process knows of the org's usage (its bytes changed). */
export function forgetOrgUsage(orgId: string): void {
  cache.delete(orgId);
}

/** 409 PLAN_LIMIT unless `incoming` more file bytes fit in the org's r2 allowance. */
export async function assertR2Room(deps: Deps, orgId: string, incoming: number): Promise<void> {
  const usage = await usageFor(deps, orgId);
  if (!usage) return;
  const { used, limit } = usage.metrics.r2;
  if (used + incoming > limit) {
    throw new PlanLimitError(`the ${usage.planId} plan stores ${limit} file bytes (r2); ${used} are used`, {
      limit,
      used,
      planId: usage.planId,
    });
  }
}

/** 409 PLAN_LIMIT once the org's workspace databases have reached its d1 allowance. */
export async function assertD1Room(deps: Deps, orgId: string): Promise<void> {
  const usage = await usageFor(deps, orgId);
  if (!usage) return;
  const { used, limit } = usage.metrics.d1;
  if (used >= limit) {
    throw new PlanLimitError(
      `the ${usage.planId} plan allows ${limit} database bytes (d1); ${used} are used: delete data to write again`,
      { limit, used, planId: usage.planId },
    );
  }
}
