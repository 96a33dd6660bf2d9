import type { Selectable } from "kysely";
import type { Db } from "../../db/database.ts";
import type { WebhookDeliveriesTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import type { JobHandlers, RecurringJob } from "../../jobs/worker.ts";
import { newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { recordSystemAudit } from "../audit/service.ts";
import { type IntegrationKind, providerAuthHeaders, providerUrl } from "../integrations/providers.ts";
import { notifyOrgAdmins } from "../notifications/service.ts";
import { deliveryView } from "./deliveries.ts";
import { type DeliveryDraft, queueDeliveries } from "./events.ts";
import { signatureHeaders } from "./signing.ts";

/** Consecutive failed attempts after which a webhook is switched off (SPEC: circuit breaker). */
export const BREAKER_THRESHOLD = 15;

export type Delivery = Selectable<WebhookDeliveriesTable>;
export type DeliveryStatus = "pending" | "succeeded" | "failed" | "dead" | "skipped";

const TERMINAL = new Set(["succeeded", "dead", "skipped"]);

interface Target {
  url: string;
  secret: string | null;
  extraHeaders: Record<string, string>;
  /** Org and workspace webhooks have a breaker; the org URL and integrations do not. */
  webhookId: string | null;
  /** The breaker's counter as read; a success needs no write when it is already 0. */
  failures: number;
}

/**
 * Where a delivery goes now, or null when its target is gone or switched off: a delivery queued
 * before its webhook was disabled or deleted becomes a no-op (`skipped`).
 */
async function resolveTarget(deps: Deps, delivery: Delivery, includeInactive: boolean): Promise<Target | null> {
  if (delivery.target_type === "webhook") {
    const hook = await deps.db
      .selectFrom("webhooks")
      .select(["id", "url", "secret", "headers", "active", "deleted_at", "consecutive_failures"])
      .where("id", "=", delivery.target_id)
      .executeTakeFirst();
    if (!hook || hook.deleted_at !== null || (!hook.active && !includeInactive)) return null;
    return {
      url: hook.url,
      secret: hook.secret,
      extraHeaders: fromJsonColumn<Record<string, string>>(hook.headers, {}),
      webhookId: hook.id,
      failures: hook.consecutive_failures,
    };
  }
  if (delivery.target_type === "org_url") {
    const org = await deps.db
      .selectFrom("orgs")
      .select(["webhook_url", "webhook_secret", "deleted_at"])
      .where("id", "=", delivery.target_id)
      .executeTakeFirst();
    if (!org || org.deleted_at !== null || !org.webhook_url) return null;
    return { url: org.webhook_url, secret: org.webhook_secret, extraHeaders: {}, webhookId: null, failures: 0 };
  }
  const integration = await deps.db
    .selectFrom("integrations")
    .select(["kind", "config", "deleted_at"])
    .where("id", "=", delivery.target_id)
    .executeTakeFirst();
  if (!integration || integration.deleted_at !== null) return null;
  // Address and credentials both come from the current config, so a retry after a change never
  // sends new credentials to the old address.
  const config = fromJsonColumn<Record<string, unknown>>(integration.config, {});
  return {
    url: providerUrl(integration.kind as IntegrationKind, config),
    secret: null,
    extraHeaders: providerAuthHeaders(integration.kind as IntegrationKind, config),
    webhookId: null,
    failures: 0,
  };
}

/** `Content-Type` and every `X-Service-*` header belong to Plinth (SPEC, workspace webhooks rule 9). */
export function isReservedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower === "content-type" || lower.startsWith("x-service-");
}

function withoutReservedHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !isReservedHeader(name)));
}

export interface AttemptOutcome {
  delivery: Delivery;
  ok: boolean;
}

/**
 * Makes one attempt at a delivery and records it: the attempt row, the delivery's status, and the
 * breaker of its webhook. `final` marks a failure as the last attempt (`dead`); `countsForBreaker`
 * is false for test sends.
 */
export async function attemptDelivery(
  deps: Deps,
  deliveryId: string,
  options: {
    final: boolean;
    countsForBreaker: boolean;
    includeInactive?: boolean;
    /** Re-send with exactly these headers (a replay of an earlier attempt), even if finished. */
    replayHeaders?: Record<string, string>;
    signal?: AbortSignal;
  },
): Promise<AttemptOutcome | null> {
  const delivery = await deps.db
    .selectFrom("webhook_deliveries")
    .selectAll()
    .where("id", "=", deliveryId)
    .executeTakeFirst();
  if (!delivery) return null;
  if (TERMINAL.has(delivery.status) && !options.replayHeaders) return { delivery, ok: delivery.status === "succeeded" };
  const target = await resolveTarget(deps, delivery, options.includeInactive ?? false);
  if (!target) {
    const skipped = await deps.db
      .updateTable("webhook_deliveries")
      .set({ status: "skipped", updated_at: deps.clock.now().toISOString() })
      .where("id", "=", deliveryId)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { delivery: skipped, ok: false };
  }

  const timestamp = Math.floor(deps.clock.now().getTime() / 1000);
  // Reserved headers come last, and custom ones that name them are dropped, so a webhook's custom
  // headers can never replace Content-Type or an X-Service-* header.
  const headers = options.replayHeaders ?? {
    ...withoutReservedHeaders(target.extraHeaders),
    ...fromJsonColumn<Record<string, string>>(delivery.headers, {}),
    ...(target.secret ? signatureHeaders(target.secret, delivery.body, timestamp) : {}),
  };
  const response = await deps.outbound.post(target.url, headers, delivery.body, options.signal);
  const ok = response.statusCode !== null && response.statusCode >= 200 && response.statusCode < 300;
  const error = ok ? null : (response.error ?? `HTTP ${response.statusCode}`);
  const status: DeliveryStatus = ok ? "succeeded" : options.final ? "dead" : "failed";
  const at = deps.clock.now().toISOString();

  const updated = await deps.db.transaction().execute(async (trx) => {
    await trx
      .insertInto("webhook_attempts")
      .values({
        id: newId("att"),
        delivery_id: deliveryId,
        attempt: delivery.attempts + 1,
        status_code: response.statusCode,
        latency_ms: Math.round(response.latencyMs),
        error,
        response_body: response.body,
        request_headers: toJsonColumn(headers),
        created_at: at,
      })
      .execute();
    const row = await trx
      .updateTable("webhook_deliveries")
      .set((eb) => ({
        status,
        attempts: eb("attempts", "+", 1),
        last_status_code: response.statusCode,
        last_error: error,
        updated_at: at,
      }))
      .where("id", "=", deliveryId)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (target.webhookId && options.countsForBreaker) {
      if (ok && target.failures > 0) {
        await trx
          .updateTable("webhooks")
          .set({ consecutive_failures: 0 })
          .where("id", "=", target.webhookId)
          .where("consecutive_failures", ">", 0)
          .execute();
      } else if (!ok) {
        await recordFailure(trx, deps, target.webhookId, at);
      }
    }
    return row;
  });
  return { delivery: updated, ok };
}

/**
 * Counts a failed attempt against the webhook and trips the breaker at the threshold: the
 * webhook is switched off with a reason, its org's admins are notified and the audit log says
 * so. Only the attempt that moves the counter to the threshold does this, once.
 */
async function recordFailure(trx: Db, deps: Deps, webhookId: string, at: string): Promise<void> {
  const hook = await trx
    .updateTable("webhooks")
    .set((eb) => ({ consecutive_failures: eb("consecutive_failures", "+", 1), last_failure_at: at }))
    .where("id", "=", webhookId)
    .returning(["id", "org_id", "project_id", "url", "active", "consecutive_failures"])
    .executeTakeFirst();
  if (!hook?.active || hook.consecutive_failures < BREAKER_THRESHOLD) return;
  const reason = `disabled after ${BREAKER_THRESHOLD} consecutive failed deliveries`;
  await trx
    .updateTable("webhooks")
    .set({ active: 0, disabled_reason: reason, updated_at: at })
    .where("id", "=", webhookId)
    .execute();
  await recordSystemAudit(trx, deps, {
    orgId: hook.org_id,
    action: "webhook.auto_disabled",
    target: { type: "webhook", id: hook.id },
    data: { url: hook.url, consecutiveFailures: hook.consecutive_failures, reason },
  });
  await notifyOrgAdmins(trx, deps, {
    orgId: hook.org_id,
    kind: "webhook.auto_disabled",
    title: "A webhook was disabled",
    body: `${hook.url} was ${reason}. Fix the receiver, then resume it with PATCH {"active": true}.`,
    data: { webhookId: hook.id, projectId: hook.project_id },
  });
}

/**
 * Records a test delivery (`webhook.test`) and makes its one attempt now: no queue, no retries,
 * no effect on the breaker. Returns the delivery as listed.
 */
export async function sendTestDelivery(
  deps: Deps,
  orgId: string,
  draft: DeliveryDraft,
  options: { includeInactive?: boolean; projectId?: string } = {},
) {
  const [deliveryId] = await deps.db.transaction().execute((trx) =>
    queueDeliveries(trx, deps, orgId, "webhook.test", [draft], {
      queue: false,
      ...(options.projectId ? { projectId: options.projectId } : {}),
    }),
  );
  const id = deliveryId as string;
  await attemptDelivery(deps, id, { final: true, countsForBreaker: false, includeInactive: options.includeInactive });
  return deliveryView(deps.db, id);
}

const RETENTION_BATCH = 1_000;
const DAY_MS = 86_400_000;

/**
 * The `webhook.deliver` job: one attempt per run; the queue retries with backoff until
 * `maxAttempts`. And the daily retention job, which deletes deliveries (with their attempts)
 * older than WEBHOOK_DELIVERIES_RETENTION_DAYS, in batches; 0 keeps everything.
 */
export function deliveryJobs(deps: Deps): JobHandlers {
  return {
    "webhooks.retention": {
      async handle() {
        const days = deps.config.webhookDeliveriesRetentionDays;
        if (days === 0) return;
        const cutoff = new Date(deps.clock.now().getTime() - days * DAY_MS).toISOString();
        for (;;) {
          const batch = await deps.db
            .selectFrom("webhook_deliveries")
            .select("id")
            .where("created_at", "<", cutoff)
            .limit(RETENTION_BATCH)
            .execute();
          if (batch.length === 0) return;
          const ids = batch.map((row) => row.id);
          await deps.db.transaction().execute(async (trx) => {
            await trx.deleteFrom("webhook_attempts").where("delivery_id", "in", ids).execute();
            await trx.deleteFrom("webhook_deliveries").where("id", "in", ids).execute();
          });
          if (batch.length < RETENTION_BATCH) return;
        }
      },
    },
    "webhook.deliver": {
      backoffBaseMs: deps.config.webhookBackoffBaseMs,
      async handle(payload, run) {
        const outcome = await attemptDelivery(deps, String(payload.deliveryId), {
          final: run.job.attempts >= run.job.max_attempts,
          countsForBreaker: true,
          signal: run.signal,
        });
        if (outcome && !outcome.ok && outcome.delivery.status !== "skipped") {
          throw new Error(`delivery failed: ${outcome.delivery.last_error ?? "unknown error"}`);
        }
      },
    },
  };
}

export const deliverySchedule: RecurringJob[] = [
  { name: "webhooks.retention", everyMs: DAY_MS, kind: "webhooks.retention" },
];
