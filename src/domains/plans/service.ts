import type { Config } from "../../config.ts";
import type { Plan } from "./catalog.ts";

/** The catalog, for `GET /api/plans`. */
export function listPlans(config: Pick<Config, "plans">): { plans: Plan[] } {
  return { plans: config.plans };
}

/**
 * The plan an org is on. An org whose plan the operator's catalog no longer holds (PLANS_FILE
 * changed) is held to DEFAULT_PLAN's limits, rather than to none.
 */
export function planOf(config: Pick<Config, "plans" | "defaultPlan">, planId: string): Plan {
  const plan = config.plans.find((candidate) => candidate.id === planId);
  if (plan) return plan;
  return config.plans.find((candidate) => candidate.id === config.defaultPlan) as Plan;
}
