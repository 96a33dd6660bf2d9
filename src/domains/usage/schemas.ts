import { z } from "@hono/zod-openapi";

const Metric = z.object({
  used: z.number(),
  limit: z.number(),
  pct: z.number().openapi({ description: "used / limit in percent, one decimal (may pass 100)" }),
});

export const UsageSchema = z
  .object({
    periodStart: z.string().openapi({ description: "ISO-8601: the billing period's start (the calendar month, UTC)" }),
    periodEnd: z.string().openapi({ description: "ISO-8601: its end (exclusive)" }),
    planId: z.string(),
    metrics: z.object({ requests: Metric, d1: Metric, r2: Metric, neurons: Metric }),
    projects: z.array(
      z.object({ id: z.string(), slug: z.string(), requests: z.number(), d1: z.number(), r2: z.number() }),
    ),
  })
  .openapi("Usage");

export const UsageHistorySchema = z
  .object({
    from: z.string(),
    to: z.string(),
    days: z.array(
      z.object({
        date: z.string(),
        projectId: z.string(),
        projectSlug: z.string(),
        projectDeleted: z.boolean(),
        requests: z.number(),
        d1: z.number(),
        r2: z.number(),
      }),
    ),
  })
  .openapi("UsageHistory");
