import { type Selectable, sql } from "kysely";
import { precompiled } from "../../db/compiled.ts";
import type { Db } from "../../db/database.ts";
import type { WebhookDeliveriesTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import type { JobSpec } from "../../jobs/queue.ts";
import { newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { type IntegrationKind, providerRequest } from "../integrations/providers.ts";
import { integrationConfig } from "../integrations/sealed-config.ts";
import { notifyOrgAdmins } from "../notifications/service.ts";
import { matchesOrgEvent } from "./event-patterns.ts";

/** Control-plane event kinds (DESIGN §6); `webhook.test` is only ever sent by a test. */
export const ORG_EVENT_KINDS = [
  "project.provisioned",
  "project.failed",
  "project.paused",
  "project.resumed",
  "project.restored",
  "branch.created",
  "branch.deleted",
  "domain.verified",
  "alarm.fired",
  "member.invited",
  "billing.plan_change",
] as const;
export type OrgEventKind = (typeof ORG_EVENT_KINDS)[number];

/** Which events also notify the org's admins and owners, and how they read. */
const NOTIFY: Partial<Record<OrgEventKind, (payload: Record<string, unknown>) => { title: string; body: string }>> = {
  "project.failed": (p) => ({
    title: `Project ${String(p.projectSlug)} failed to provision`,
    body: String(p.reason ?? "provisioning failed"),
  }),
  "domain.verified": (p) => ({
    title: `Domain ${String(p.hostname)} is verified`,
    body: `${String(p.hostname)} now serves project ${String(p.projectSlug)}`,
  }),
  "alarm.fired": (p) => ({
    title: `Usage alarm: ${String(p.metric)} at ${String(p.pct)}% of the plan`,
    body: `${String(p.metric)} reached ${String(p.used)} of ${String(p.limit)} (alarm at ${String(p.thresholdPct)}%) this period`,
  }),
  "member.invited": (p) => ({ title: "Invitation sent", body: `${String(p.email)} was invited as ${String(p.role)}` }),
  "billing.plan_change": (p) => ({ title: "Plan changed", body: JSON.stringify(p) }),
};

export interface DeliveryDraft {
  targetType: "webhook" | "org_url" | "integration";
  targetId: string;
  url: string;
  body: string;
}

// Read on every org event, inside the transaction of the change that raises it.
const orgTargets = precompiled((db) =>
  db.selectFrom("orgs").select(["slug", "name", "webhook_url"]).where("id", "=", "?"),
);
const orgHooks = precompiled((db) =>
  db
    .selectFrom("webhooks")
    .select(["id", "url", "events"])
    .where("org_id", "=", "?")
    .where("project_id", "is", null)
    .where("deleted_at", "is", null)
    .where("active", "=", sql.lit(1)),
);
const orgIntegrations = precompiled((db) =>
  db
    .selectFrom("integrations")
    .select(["id", "kind", "config", "events"])
    .where("org_id", "=", "?")
    .where("deleted_at", "is", null),
);

/**
 * Records an org event in the caller's transaction: one delivery (and one `webhook.deliver` job)
 * per matching org webhook, the org's `webhookUrl`, and each matching integration, plus
 * notifications where the kind calls for them. The change and its deliveries commit together.
 */
export async function emitOrgEvent(
  trx: Db,
  deps: Deps,
  event: { orgId: string; kind: OrgEventKind; payload: Record<string, unknown> },
): Promise<void> {
  const now = deps.clock.now();
  const timestamp = Math.floor(now.getTime() / 1000);
  const body = JSON.stringify({ event: event.kind, payload: event.payload, timestamp });
  const [[org], hooks, integrations] = await Promise.all([
    orgTargets(trx, deps.dialect, event.orgId),
    orgHooks(trx, deps.dialect, event.orgId),
    orgIntegrations(trx, deps.dialect, event.orgId),
  ]);
  if (!org) return;
  const drafts: DeliveryDraft[] = [];
  for (const hook of hooks) {
    if (matchesOrgEvent(fromJsonColumn<string[]>(hook.events, []), event.kind)) {
      drafts.push({ targetType: "webhook", targetId: hook.id, url: hook.url, body });
    }
  }
  if (org.webhook_url) drafts.push({ targetType: "org_url", targetId: event.orgId, url: org.webhook_url, body });
  for (const integration of integrations) {
    if (!matchesOrgEvent(fromJsonColumn<string[] | null>(integration.events, null), event.kind)) continue;
    const request = providerRequest(integration.kind as IntegrationKind, integrationConfig(deps, integration), {
      event: event.kind,
      payload: event.payload,
      timestamp,
      org: { slug: org.slug, name: org.name },
    });
    drafts.push({ targetType: "integration", targetId: integration.id, ...request });
  }
  await queueDeliveries(trx, deps, event.orgId, event.kind, drafts);
  const notification = NOTIFY[event.kind]?.(event.payload);
  if (notification)
    await notifyOrgAdmins(trx, deps, { orgId: event.orgId, kind: event.kind, ...notification, data: event.payload });
}

/** Inserts deliveries and their jobs; returns the new delivery ids. */
export async function queueDeliveries(
  trx: Db,
  deps: Deps,
  orgId: string,
  event: string,
  drafts: DeliveryDraft[],
  options: { projectId?: string; queue?: boolean } = {},
): Promise<string[]> {
  if (drafts.length === 0) return [];
  const now = deps.clock.now();
  const at = now.toISOString();
  const rows = drafts.map((draft) =>
    deliveryRow({
      id: newId("dlv", now),
      orgId,
      projectId: options.projectId ?? null,
      targetType: draft.targetType,
      targetId: draft.targetId,
      event,
      url: draft.url,
      body: draft.body,
      at,
    }),
  );
  await trx.insertInto("webhook_deliveries").values(rows).execute();
  // Test sends are attempted once, right away, by the caller; everything else goes to the queue.
  if (options.queue === false) return rows.map((row) => row.id);
  await deps.jobs.enqueue(trx, ...rows.map((row) => deliveryJob(deps, row.id)));
  return rows.map((row) => row.id);
}

/** A new delivery's row: pending, not attempted yet, with the headers every attempt carries. */
export function deliveryRow(delivery: {
  id: string;
  orgId: string;
  projectId: string | null;
  targetType: string;
  targetId: string;
  event: string;
  url: string;
  body: string;
  at: string;
}): Selectable<WebhookDeliveriesTable> {
  return {
    id: delivery.id,
    org_id: delivery.orgId,
    project_id: delivery.projectId,
    target_type: delivery.targetType,
    target_id: delivery.targetId,
    event: delivery.event,
    url: delivery.url,
    body: delivery.body,
    headers: toJsonColumn(deliveryHeaders(delivery.event, delivery.id)) ?? "{}",
    status: "pending",
    attempts: 0,
    last_status_code: null,
    last_error: null,
    created_at: delivery.at,
    updated_at: delivery.at,
  };
}

/**
 * A job outlives its attempt's own deadline (WEBHOOK_TIMEOUT_MS) by this much, so a slow receiver
 * ends the request first and the failure is recorded as an attempt, instead of the job timing out.
 */
const DELIVERY_JOB_SLACK_MS = 5_000;

/**
 * The longest an attempt may take within a `webhook.deliver` job of `jobTimeoutMs`. The job's
 * timeout was set by the process that queued it, from its own WEBHOOK_TIMEOUT_MS; the worker's
 * may be longer, and an attempt cut off by the job's deadline would be neither recorded nor
 * counted, so it ends in time to be written down.
 */
export function attemptTimeoutWithin(jobTimeoutMs: number): number {
  return Math.max(1, jobTimeoutMs - DELIVERY_JOB_SLACK_MS);
}

/**
 * The `webhook.deliver` job of a delivery. `local` is the delivery's row as inserted, handed to
 * this process's worker if it takes the job (see `JobSpec.local`).
 */
export function deliveryJob(deps: Deps, deliveryId: string, local?: Selectable<WebhookDeliveriesTable>): JobSpec {
  return {
    kind: "webhook.deliver",
    payload: { deliveryId },
    maxAttempts: deps.config.webhookMaxAttempts,
    timeoutMs: deps.config.webhookTimeoutMs + DELIVERY_JOB_SLACK_MS,
    ...(local ? { local } : {}),
  };
}

/** The headers every attempt of a delivery carries; signatures are added per attempt. */
export function deliveryHeaders(event: string, deliveryId: string): Record<string, string> {
  return {
    "Content-Type": "application/json",
    "User-Agent": "Plinth-Webhooks/0.0.1",
    "X-Service-Event": event,
    "X-Service-Delivery": deliveryId,
  };
}
