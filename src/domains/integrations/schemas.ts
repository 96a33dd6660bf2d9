import { z } from "@hono/zod-openapi";
import { SlugParams } from "../orgs/schemas.ts";
import { orgEventPattern } from "../webhooks/schemas.ts";
import { INTEGRATION_KINDS } from "./providers.ts";

const EventPatterns = z.array(orgEventPattern).max(50).nullable();

/** Keys a config may hold in all, nested ones included, and characters a key may have (checked by the service). */
export const MAX_CONFIG_KEYS = 50;
export const MAX_CONFIG_KEY_LENGTH = 100;

const Config = z.record(z.string(), z.unknown()).openapi({
  description: `Arbitrary values; at most ${MAX_CONFIG_KEYS} keys in all, nested ones included, each of at most ${MAX_CONFIG_KEY_LENGTH} characters`,
});

export const IntegrationInput = z
  .object({
    kind: z.enum(INTEGRATION_KINDS),
    config: Config.optional(),
    events: EventPatterns.optional().openapi({
      description: "Event patterns (`alarm.fired`, `project.*`, `*`); null or empty means all events",
    }),
  })
  .openapi("IntegrationInput");

export const UpdateIntegrationInput = z
  .object({
    kind: z
      .enum(INTEGRATION_KINDS)
      .optional()
      .openapi({ description: "May be sent back as read; an integration's kind cannot change (422)" }),
    config: Config.optional(),
    events: EventPatterns.optional(),
  })
  .openapi("UpdateIntegrationInput");

export const IntegrationSchema = z
  .object({
    id: z.string(),
    kind: z.enum(INTEGRATION_KINDS),
    config: z.record(z.string(), z.unknown()).openapi({ description: "Secret values masked" }),
    configured: z.boolean().openapi({
      description: "Whether `config` holds every field the provider needs; until it does, each send fails naming them",
    }),
    events: z.array(z.string()).nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("Integration");

export const IntegrationParams = SlugParams.extend({
  id: z.string().openapi({ param: { name: "id", in: "path" } }),
});
