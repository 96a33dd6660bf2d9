import type { Deps } from "../../deps.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { settleBillingPeriods } from "./service.ts";

export function billingJobs(deps: Deps): JobHandlers {
  return { "billing.periods": { handle: () => settleBillingPeriods(deps) } };
}

export const billingSchedule: RecurringJob[] = [{ name: "billing.periods", everyMs: 60_000, kind: "billing.periods" }];
