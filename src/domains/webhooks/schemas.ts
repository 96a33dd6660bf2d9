import { z } from "@hono/zod-openapi";
import { httpUrl, pageQuery } from "../fields.ts";
import { ORG_EVENT_KINDS } from "./events.ts";

/** Dot-separated lowercase segments (`project.paused`), optionally ending in `.*` for a prefix. */
const PATTERN_FORM = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*(\.\*)?$/;

/**
 * `*`, an event kind, or `<prefix>.*`. Kinds beyond today's (ORG_EVENT_KINDS, and `webhook.test`)
 * are accepted, since more may be added: such a pattern matches nothing until they are.
 */
export const orgEventPattern = z
  .string()
  .min(1)
  .max(100)
  .refine((pattern) => pattern === "*" || PATTERN_FORM.test(pattern), {
    message: `must be '*', an event kind such as '${ORG_EVENT_KINDS[0]}' (lowercase, dot-separated) or a prefix such as 'project.*'`,
  });

export const WebhookInput = z
  .object({
    url: httpUrl,
    events: z.array(orgEventPattern).min(1).max(50),
  })
  .openapi("WebhookInput");

export const UpdateWebhookInput = z
  .object({
    url: httpUrl.optional(),
    events: z.array(orgEventPattern).min(1).max(50).optional(),
    active: z.boolean().optional().openapi({ description: "`true` resumes a disabled webhook" }),
  })
  .openapi("UpdateWebhookInput");

/** Where a webhook's circuit breaker stands (SPEC's breaker table), on org and workspace webhooks alike. */
export const breakerState = {
  active: z.boolean(),
  consecutiveFailures: z.number().int(),
  lastFailureAt: z.string().nullable(),
  disabledReason: z.string().nullable(),
};

export const WebhookSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z.array(z.string()),
    ...breakerState,
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("Webhook");

export const AttemptSchema = z.object({
  attempt: z.number().int(),
  statusCode: z.number().int().nullable(),
  latencyMs: z.number().int(),
  error: z.string().nullable(),
  responseBody: z.string().nullable().openapi({ description: "The receiver's response, cut to 2 KiB" }),
  createdAt: z.string(),
});

export const DeliverySchema = z
  .object({
    id: z.string(),
    event: z.string(),
    status: z.enum(["pending", "succeeded", "failed", "dead", "skipped"]),
    attemptCount: z.number().int(),
    lastStatusCode: z.number().int().nullable(),
    lastError: z.string().nullable(),
    createdAt: z.string(),
    updatedAt: z.string(),
    attempts: z.array(AttemptSchema),
  })
  .openapi("WebhookDelivery");

export const DeliveriesQuery = z.object({
  ...pageQuery(50, 200),
  status: z.enum(["pending", "succeeded", "failed", "dead", "skipped"]).optional(),
});

export const WebhookParams = z.object({
  slug: z.string().openapi({ param: { name: "slug", in: "path" } }),
  id: z.string().openapi({ param: { name: "id", in: "path" } }),
});

export const WebhookIdParams = z.object({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });

/** The signing and identity headers of every delivery (SPEC, Workspace webhook events rule 7; DESIGN §6). */
export const DeliveryHeaders = z.object({
  "X-Service-Event": z.string().openapi({ description: "The event's kind (workspace: `<channel>:<event>`)" }),
  "X-Service-Delivery": z.string().openapi({ description: "The delivery's id, the same on every retry" }),
  "X-Service-Timestamp": z.string().optional().openapi({ description: "Unix seconds at signing (with a secret)" }),
  "X-Service-Signature": z
    .string()
    .optional()
    .openapi({ description: "Hex HMAC-SHA256 of the raw body with the secret (legacy, unchanged)" }),
  "X-Service-Signature-V2": z
    .string()
    .optional()
    .openapi({ description: "Hex HMAC-SHA256 of `<timestamp>.<raw body>` with the secret (prefer this one)" }),
  "webhook-id": z
    .string()
    .optional()
    .openapi({ description: "Standard Webhooks: = X-Service-Delivery (with a secret)" }),
  "webhook-timestamp": z
    .string()
    .optional()
    .openapi({ description: "Standard Webhooks: = X-Service-Timestamp (with a secret)" }),
  "webhook-signature": z.string().optional().openapi({
    description:
      "Standard Webhooks: `v1,<base64 HMAC-SHA256 of {id}.{timestamp}.{raw body}>`; the key is the bytes after `whsec_` when they are standard base64, else the secret's UTF-8 bytes",
  }),
});

/** What a receiver's answer means, for every delivery. */
export const deliveryResponses = {
  200: { description: "Any 2xx acknowledges the delivery" },
  500: {
    description:
      "Any other answer (3xx included: redirects are not followed), or none within WEBHOOK_TIMEOUT_MS, is a failed attempt: retried with backoff up to WEBHOOK_MAX_ATTEMPTS, and counted by the breaker",
  },
};
