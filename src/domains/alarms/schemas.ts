import { z } from "@hono/zod-openapi";

export const AlarmInput = z
  .object({
    metric: z.enum(["requests", "d1", "r2"]),
    thresholdPct: z.number().int().min(1).max(100).openapi({ description: "Percent of the plan's limit, 1..100" }),
  })
  .openapi("AlarmInput");

export const AlarmSchema = z
  .object({
    id: z.string().openapi({ example: "alm_01jx0000000000000000000000" }),
    metric: z.enum(["requests", "d1", "r2"]),
    thresholdPct: z.number().int(),
    lastFiredAt: z.string().nullable(),
    createdAt: z.string(),
  })
  .openapi("Alarm");

export const AlarmParams = z.object({
  slug: z.string().openapi({ param: { name: "slug", in: "path" } }),
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "alm_01jx0000000000000000000000" }),
});
