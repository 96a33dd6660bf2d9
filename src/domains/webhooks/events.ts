import { sql } from "kysely";
import { precompiled } from "../../db/compiled.ts";
import type { Db } from "../../db/database.ts";
import type { Deps } from "../../deps.ts";
import { newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { type IntegrationKind, providerRequest } from "../integrations/providers.ts";
import { notifyOrgAdmins } from "../notifications/service.ts";
import { matchesOrgEvent } from "./event-patterns.ts";

/** Control-plane event kinds (DESIGN §6); `webhook.test` is only ever sent by a test. */
export const ORG_EVENT_KINDS = [
  "project.provisioned",
  "project.failed",
  "project.paused",
  "project.resumed",
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
  "alarm.fired": (p) => ({ title: "An alarm fired", body: JSON.stringify(p) }),
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
    const request = providerRequest(
      integration.kind as IntegrationKind,
      fromJsonColumn<Record<string, unknown>>(integration.config, {}),
      { event: event.kind, payload: event.payload, timestamp, org: { slug: org.slug, name: org.name } },
    );
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
  const rows = drafts.map((draft) => {
    const id = newId("dlv", now);
    return {
      id,
      org_id: orgId,
      project_id: options.projectId ?? null,
      target_type: draft.targetType,
      target_id: draft.targetId,
      event,
      url: draft.url,
      body: draft.body,
      headers: toJsonColumn(deliveryHeaders(event, id)) ?? "{}",
      status: "pending",
      attempts: 0,
      last_status_code: null,
      last_error: null,
      created_at: at,
      updated_at: at,
    };
  });
  await trx.insertInto("webhook_deliveries").values(rows).execute();
  // Test sends are attempted once, right away, by the caller; everything else goes to the queue.
  if (options.queue === false) return rows.map((row) => row.id);
  await deps.jobs.enqueue(
    trx,
    ...rows.map((row) => ({
      kind: "webhook.deliver",
      payload: { deliveryId: row.id },
      maxAttempts: deps.config.webhookMaxAttempts,
      timeoutMs: deps.config.webhookTimeoutMs + 5_000,
    })),
  );
  return rows.map((row) => row.id);
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
