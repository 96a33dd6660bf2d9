import { z } from "@hono/zod-openapi";

export const PitrRestoreInput = z
  .object({
    timestamp: z
      .number()
      .int()
      .positive()
      .openapi({ description: "The instant to restore to: Unix ms (a value below 10^11 is read as seconds)" }),
  })
  .openapi("PitrRestoreInput");

export const PitrRestoreResult = z
  .object({ restoredTo: z.string().openapi({ description: "ISO-8601: the instant the workspace now holds" }) })
  .openapi("PitrRestoreResult");

export const RestoreWindowSchema = z
  .object({
    earliest: z.string().openapi({ description: "ISO-8601: the earliest instant a restore can reach" }),
    latest: z.string().openapi({ description: "ISO-8601: now" }),
  })
  .openapi("RestoreWindow");
