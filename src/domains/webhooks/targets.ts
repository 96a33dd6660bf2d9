import type { Deps } from "../../deps.ts";
import { fromJsonColumn } from "../../lib/json.ts";
import { type IntegrationKind, providerAuthHeaders, providerUrl, unconfigured } from "../integrations/providers.ts";
import { integrationConfig } from "../integrations/sealed-config.ts";
import type { Delivery } from "./delivery.ts";

/** Where a delivery goes, as it stands when an attempt is made: a webhook, an org's URL or an integration. */
export interface Target {
  url: string;
  secret: string | null;
  /** Custom headers, reserved names already removed. */
  extraHeaders: Record<string, string>;
  /**
   * True when `extraHeaders` are credentials (an integration's): sent, never stored with an
   * attempt, nor is `url`, which may be one too (a Slack webhook URL).
   */
  secretHeaders: boolean;
  /** Org and workspace webhooks have a breaker; the org URL and integrations do not. */
  webhookId: string | null;
  /** A workspace webhook's (a project's own); the rest are the control plane's. */
  workspace: boolean;
  /** False for a webhook switched off: its queued deliveries become `skipped`. */
  active: boolean;
  /** Why nothing can be sent to it (an integration not configured yet): each attempt fails so. */
  refusal: string | null;
}

export function targetKey(type: string, id: string): string {
  return `${type}:${id}`;
}

/**
 * Where each delivery goes now, read once per target. A target that is gone (deleted webhook,
 * integration or org, or an org URL removed) has no entry: its deliveries become no-ops.
 */
export async function resolveTargets(deps: Deps, deliveries: Delivery[]): Promise<Map<string, Target>> {
  const ids = { webhook: new Set<string>(), org_url: new Set<string>(), integration: new Set<string>() };
  for (const delivery of deliveries) ids[delivery.target_type as keyof typeof ids]?.add(delivery.target_id);
  const targets = new Map<string, Target>();
  if (ids.webhook.size > 0) {
    // A hook is gone with its org, or with its project (a workspace hook), as when deleted itself.
    const hooks = await deps.db
      .selectFrom("webhooks")
      .innerJoin("orgs", "orgs.id", "webhooks.org_id")
      .leftJoin("projects", "projects.id", "webhooks.project_id")
      .select([
        "webhooks.id",
        "webhooks.url",
        "webhooks.secret",
        "webhooks.headers",
        "webhooks.active",
        "webhooks.project_id",
        "webhooks.deleted_at",
        "orgs.deleted_at as org_deleted_at",
        "projects.deleted_at as project_deleted_at",
      ])
      .where("webhooks.id", "in", [...ids.webhook])
      .execute();
    for (const hook of hooks) {
      if (hook.deleted_at !== null || hook.org_deleted_at !== null || hook.project_deleted_at !== null) continue;
      targets.set(targetKey("webhook", hook.id), {
        url: hook.url,
        secret: hook.secret,
        extraHeaders: withoutReservedHeaders(fromJsonColumn<Record<string, string>>(hook.headers, {})),
        secretHeaders: false,
        webhookId: hook.id,
        workspace: hook.project_id !== null,
        active: Boolean(hook.active),
        refusal: null,
      });
    }
  }
  if (ids.org_url.size > 0) {
    const orgs = await deps.db
      .selectFrom("orgs")
      .select(["id", "webhook_url", "webhook_secret", "deleted_at"])
      .where("id", "in", [...ids.org_url])
      .execute();
    for (const org of orgs) {
      if (org.deleted_at !== null || !org.webhook_url) continue;
      targets.set(targetKey("org_url", org.id), {
        url: org.webhook_url,
        secret: org.webhook_secret,
        extraHeaders: {},
        secretHeaders: false,
        webhookId: null,
        workspace: false,
        active: true,
        refusal: null,
      });
    }
  }
  if (ids.integration.size > 0) {
    const integrations = await deps.db
      .selectFrom("integrations")
      .innerJoin("orgs", "orgs.id", "integrations.org_id")
      .select([
        "integrations.id",
        "integrations.kind",
        "integrations.config",
        "integrations.deleted_at",
        "orgs.deleted_at as org_deleted_at",
      ])
      .where("integrations.id", "in", [...ids.integration])
      .execute();
    for (const integration of integrations) {
      if (integration.deleted_at !== null || integration.org_deleted_at !== null) continue;
      // Address and credentials both come from the current config, so a retry after a change
      // never sends new credentials to the old address.
      const config = integrationConfig(deps, integration);
      const kind = integration.kind as IntegrationKind;
      targets.set(targetKey("integration", integration.id), {
        url: providerUrl(kind, config),
        secret: null,
        extraHeaders: providerAuthHeaders(kind, config),
        secretHeaders: true,
        webhookId: null,
        workspace: false,
        active: true,
        refusal: unconfigured(kind, config),
      });
    }
  }
  return targets;
}

/** Standard Webhooks' headers (DESIGN §14): a custom one in another case would go out beside Plinth's. */
const STANDARD_WEBHOOKS_HEADERS = new Set(["webhook-id", "webhook-timestamp", "webhook-signature"]);

/**
 * `Content-Type`, every `X-Service-*` header (SPEC, workspace webhooks rule 9) and the Standard
 * Webhooks headers belong to Plinth.
 */
export function isReservedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower === "content-type" || lower.startsWith("x-service-") || STANDARD_WEBHOOKS_HEADERS.has(lower);
}

function withoutReservedHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !isReservedHeader(name)));
}

/**
 * `headers` less those a custom header names in any case (the custom one is sent instead, as for
 * `User-Agent`), so no header goes out twice. Reserved names never reach here as custom headers.
 */
export function withoutNamesOf(
  headers: Record<string, string>,
  custom: Record<string, string>,
): Record<string, string> {
  const names = Object.keys(custom);
  if (names.length === 0) return headers;
  const taken = new Set(names.map((name) => name.toLowerCase()));
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !taken.has(name.toLowerCase())));
}
