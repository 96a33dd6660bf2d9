import type { Selectable } from "kysely";
import type { Db } from "../../db/database.ts";
import type { WebhooksTable } from "../../db/schema.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../errors.ts";
import { newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { isMasked, maskSecret } from "../../lib/mask.ts";
import { recordAuditAs } from "../audit/service.ts";
import { ownedRecords } from "../owned-records.ts";
import { deliveryView, listDeliveries } from "../webhooks/deliveries.ts";
import { attemptDelivery, sendTestDelivery } from "../webhooks/delivery.ts";
import { assertDeliverableUrl } from "../webhooks/service.ts";
import { isReservedHeader } from "../webhooks/targets.ts";
import { requireAdmin, type WorkspaceCtx, workspaceActor } from "./access.ts";

type WebhookRow = Selectable<WebhooksTable>;

export interface WorkspaceHookInput {
  name?: string | undefined;
  url?: string | undefined;
  events?: string[] | undefined;
  secret?: string | null | undefined;
  headers?: Record<string, string> | null | undefined;
  payloadFields?: string[] | null | undefined;
  active?: boolean | undefined;
}

function storedHeaders(row: WebhookRow): Record<string, string> {
  return fromJsonColumn<Record<string, string>>(row.headers, {});
}

/**
 * A workspace hook as read: never its secret, only whether it has one, and its custom headers'
 * values masked as integration secrets are (they often carry a receiver's credentials).
 */
function toHook(row: WebhookRow) {
  return {
    id: row.id,
    name: row.name ?? "",
    url: row.url,
    events: fromJsonColumn<string[]>(row.events, []),
    headers: Object.fromEntries(Object.entries(storedHeaders(row)).map(([name, value]) => [name, maskSecret(value)])),
    payloadFields: fromJsonColumn<string[] | null>(row.payload_fields, null),
    hasSecret: row.secret !== null,
    active: Boolean(row.active),
    consecutiveFailures: row.consecutive_failures,
    lastFailureAt: row.last_failure_at,
    disabledReason: row.disabled_reason,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Audits a change to a workspace hook as whoever made it; secrets are never in the data. */
async function auditHook(trx: Db, ctx: WorkspaceCtx, action: string, hookId: string, data: Record<string, unknown>) {
  await recordAuditAs(trx, ctx.deps, workspaceActor(ctx), ctx.ip, {
    orgId: ctx.project.org_id,
    action,
    target: { type: "webhook", id: hookId },
    data: { projectId: ctx.project.id, ...data },
  });
}

/** RFC 9110 token characters: what a header name may be made of. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Visible ASCII, space and tab: no line breaks or other control characters. */
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;
/** Headers the HTTP client sets from the request itself (framing, connection, target). */
const CLIENT_HEADERS = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "proxy-connection",
  "upgrade",
  "te",
  "trailer",
  "expect",
]);

/** Custom headers per hook at most, and their names and values together at most this many bytes. */
const MAX_CUSTOM_HEADERS = 50;
export const MAX_CUSTOM_HEADER_BYTES = 8 * 1024;

/**
 * Custom headers must be sendable as given: valid names and values, none that the HTTP client
 * owns, none that Plinth sets (`Content-Type`, `X-Service-*`, SPEC rule 9; Standard Webhooks'
 * `webhook-id`, `-timestamp`, `-signature`), no name twice in two cases, and few and small enough
 * that a receiver takes them (Node refuses a request whose headers pass 16 KiB with 431). Anything
 * else would be stored and then fail every attempt.
 */
function assertHeadersAllowed(headers: Record<string, string> | null | undefined): void {
  const issues: Array<{ path: string; message: string }> = [];
  const entries = Object.entries(headers ?? {});
  if (entries.length > MAX_CUSTOM_HEADERS) {
    issues.push({ path: "headers", message: `at most ${MAX_CUSTOM_HEADERS} custom headers` });
  }
  const bytes = entries.reduce((sum, [name, value]) => sum + Buffer.byteLength(name) + Buffer.byteLength(value), 0);
  if (bytes > MAX_CUSTOM_HEADER_BYTES) {
    issues.push({ path: "headers", message: `names and values at most ${MAX_CUSTOM_HEADER_BYTES} bytes in all` });
  }
  const seen = new Map<string, string>();
  for (const [name, value] of entries) {
    const path = `headers.${name}`;
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name)) issues.push({ path, message: "not a valid header name" });
    else if (isReservedHeader(name))
      issues.push({ path, message: "Content-Type, X-Service-* and webhook-id/-timestamp/-signature are reserved" });
    else if (CLIENT_HEADERS.has(lower))
      issues.push({ path, message: "set by the HTTP client from the request itself" });
    else if (seen.has(lower)) issues.push({ path, message: `the same header as '${seen.get(lower)}'` });
    if (isMasked(value)) {
      issues.push({
        path,
        message: "is masked, as read, and no value is stored under this name: send the value itself",
      });
    } else if (!HEADER_VALUE.test(value)) {
      issues.push({ path, message: "a header value may hold visible ASCII, spaces and tabs only" });
    }
    seen.set(lower, name);
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/**
 * The custom headers a PATCH leaves on `current` (undefined: as they are). A value sent back
 * masked, as read, keeps the one stored under that name (in any case), so a read-modify-write
 * keeps it. Stored values never follow a change of `url`, neither sent back masked nor left out:
 * whoever can edit the hook could otherwise send credentials they never saw to an address of
 * their choosing. Such a change needs the headers again in full (or `null` to drop them).
 */
function headersAfter(current: WebhookRow, input: WorkspaceHookInput): Record<string, string> | null | undefined {
  const stored = storedHeaders(current);
  const moves = input.url !== undefined && input.url !== current.url;
  if (input.headers === undefined) {
    if (moves && Object.keys(stored).length > 0) {
      throw new ValidationError([
        { path: "headers", message: "must be sent again, in full (or null to drop them), when url changes" },
      ]);
    }
    return undefined;
  }
  if (input.headers === null) return null;
  const sent = Object.entries(input.headers);
  if (moves) {
    const kept = sent.filter(([, value]) => isMasked(value));
    if (kept.length > 0) {
      throw new ValidationError(
        kept.map(([name]) => ({
          path: `headers.${name}`,
          message: "must be sent again, not masked, when url changes",
        })),
      );
    }
  }
  const byName = new Map(Object.entries(stored).map(([name, value]) => [name.toLowerCase(), value]));
  // A masked value with nothing stored under its name stays masked, for assertHeadersAllowed to refuse.
  return Object.fromEntries(
    sent.map(([name, value]) => [name, isMasked(value) ? (byName.get(name.toLowerCase()) ?? value) : value]),
  );
}

const hooks = ownedRecords("webhooks", "webhook");
const ownedBy = (ctx: WorkspaceCtx) => ({ project_id: ctx.project.id });

export async function createHook({
  ctx,
  input,
}: {
  ctx: WorkspaceCtx;
  input: Required<Pick<WorkspaceHookInput, "name" | "url" | "events">> & WorkspaceHookInput;
}) {
  requireAdmin(ctx, true);
  assertHeadersAllowed(input.headers);
  await assertDeliverableUrl(ctx.deps, input.url, "url");
  const now = ctx.deps.clock.now();
  const row: WebhookRow = {
    id: newId("whk", now),
    org_id: ctx.project.org_id,
    project_id: ctx.project.id,
    name: input.name,
    url: input.url,
    events: toJsonColumn(input.events) ?? "[]",
    secret: input.secret ?? null,
    headers: input.headers ? toJsonColumn(input.headers) : null,
    payload_fields: input.payloadFields && input.payloadFields.length > 0 ? toJsonColumn(input.payloadFields) : null,
    active: 1,
    consecutive_failures: 0,
    last_failure_at: null,
    disabled_reason: null,
    created_by: ctx.caller.kind === "admin" ? ctx.caller.id : null,
    created_at: now.toISOString(),
    updated_at: now.toISOString(),
    deleted_at: null,
  };
  await ctx.deps.db.transaction().execute(async (trx) => {
    await trx.insertInto("webhooks").values(row).execute();
    await auditHook(trx, ctx, "workspace_webhook.created", row.id, { url: row.url, events: input.events });
  });
  return { webhook: toHook(row) };
}

export async function listHooks({ ctx }: { ctx: WorkspaceCtx }) {
  requireAdmin(ctx, false);
  const rows = await ctx.deps.db
    .selectFrom("webhooks")
    .selectAll()
    .where("project_id", "=", ctx.project.id)
    .where("deleted_at", "is", null)
    .orderBy("created_at")
    .orderBy("id")
    .execute();
  return { webhooks: rows.map(toHook) };
}

export async function getHook({ ctx, id }: { ctx: WorkspaceCtx; id: string }) {
  requireAdmin(ctx, false);
  return { webhook: toHook(await hooks.find(ctx.deps, ownedBy(ctx), id)) };
}

/** Updates a hook; `active: true` resumes a disabled one, and gives any hook a fresh counter and no reason. */
export async function updateHook({ ctx, id, input }: { ctx: WorkspaceCtx; id: string; input: WorkspaceHookInput }) {
  requireAdmin(ctx, true);
  await hooks.find(ctx.deps, ownedBy(ctx), id);
  if (input.url !== undefined) await assertDeliverableUrl(ctx.deps, input.url, "url");
  const changes: Partial<WebhookRow> = {
    ...(input.name !== undefined ? { name: input.name } : {}),
    ...(input.url !== undefined ? { url: input.url } : {}),
    ...(input.events !== undefined ? { events: toJsonColumn(input.events) ?? "[]" } : {}),
    ...(input.secret !== undefined ? { secret: input.secret } : {}),
    ...(input.payloadFields !== undefined
      ? {
          payload_fields:
            input.payloadFields && input.payloadFields.length > 0 ? toJsonColumn(input.payloadFields) : null,
        }
      : {}),
    ...(input.active === false ? { active: 0 } : {}),
  };
  const row = await ctx.deps.db.transaction().execute((trx) =>
    hooks.change(
      trx,
      ctx.deps,
      ownedBy(ctx),
      id,
      // Headers are settled against the hook as it stands, locked: a concurrent change of its url
      // or headers cannot carry stored values past the rules of headersAfter.
      (current) => {
        const headers = headersAfter(current, input);
        assertHeadersAllowed(headers);
        return {
          ...changes,
          ...(headers !== undefined ? { headers: headers ? toJsonColumn(headers) : null } : {}),
          // `active: true` always starts the counter afresh (SPEC: it resumes and resets), also on a
          // hook still active with some failures counted.
          ...(input.active === true ? { active: 1, consecutive_failures: 0, disabled_reason: null } : {}),
          updated_at: ctx.deps.clock.now().toISOString(),
        };
      },
      // As it is now: of concurrent resumes only the first finds the hook disabled.
      (current) =>
        auditHook(
          trx,
          ctx,
          input.active === true && !current.active ? "workspace_webhook.resumed" : "workspace_webhook.updated",
          id,
          {
            fields: Object.keys(input).filter((key) => key !== "secret"),
            ...(input.secret !== undefined ? { secretChanged: true } : {}),
          },
        ),
    ),
  );
  return { webhook: toHook(row) };
}

export async function deleteHook({ ctx, id }: { ctx: WorkspaceCtx; id: string }): Promise<void> {
  requireAdmin(ctx, true);
  await ctx.deps.db.transaction().execute((trx) =>
    hooks.change(
      trx,
      ctx.deps,
      ownedBy(ctx),
      id,
      () => ({ deleted_at: ctx.deps.clock.now().toISOString(), active: 0 }),
      (current) => auditHook(trx, ctx, "workspace_webhook.deleted", id, { url: current.url }),
    ),
  );
}

/** Sends the synthetic `webhook.test` event now, whatever the hook's patterns; one attempt. */
export async function testHook({ ctx, id }: { ctx: WorkspaceCtx; id: string }) {
  requireAdmin(ctx, true);
  const hook = await hooks.find(ctx.deps, ownedBy(ctx), id);
  const body = JSON.stringify({
    channel: "webhook",
    event: "webhook.test",
    data: { webhookId: hook.id },
    deliveredAt: ctx.deps.clock.now().toISOString(),
  });
  const delivery = await sendTestDelivery(
    ctx.deps,
    ctx.project.org_id,
    { targetType: "webhook", targetId: hook.id, url: hook.url, body },
    {
      includeInactive: true,
      projectId: ctx.project.id,
      audit: (trx, deliveryId) => auditHook(trx, ctx, "workspace_webhook.tested", hook.id, { deliveryId }),
    },
  );
  return { delivery };
}

export async function listHookDeliveries({
  ctx,
  id,
  query,
}: {
  ctx: WorkspaceCtx;
  id: string;
  query: { status?: string | undefined; limit?: number | undefined; offset?: number | undefined };
}) {
  requireAdmin(ctx, false);
  await hooks.find(ctx.deps, ownedBy(ctx), id);
  return { deliveries: await listDeliveries(ctx.deps.db, id, query) };
}

/**
 * Sends a past delivery again exactly as it first went: same body, same headers, same signature
 * (a receiver that checks freshness may refuse an old timestamp; that is the receiver's call),
 * to the same URL, whatever the webhook's is now (its address is checked again at connect, as
 * every send's is). The attempt is recorded like any other and counts for the breaker of an
 * active webhook. A delivery still being retried keeps its retries if this attempt fails (a
 * success ends them); a finished one takes this attempt's outcome, with no retries after it. A
 * deleted webhook's deliveries are gone with it (404).
 */
export async function retryDelivery({ ctx, id: deliveryId }: { ctx: WorkspaceCtx; id: string }) {
  requireAdmin(ctx, true);
  const delivery = await ctx.deps.db
    .selectFrom("webhook_deliveries as d")
    .innerJoin("webhooks as w", "w.id", "d.target_id")
    .select(["d.id", "d.status", "d.target_id", "d.url"])
    .where("d.id", "=", deliveryId)
    .where("d.target_type", "=", "webhook")
    .where("d.project_id", "=", ctx.project.id)
    .where("w.deleted_at", "is", null)
    .executeTakeFirst();
  if (!delivery) throw new NotFoundError("delivery not found");
  const first = await ctx.deps.db
    .selectFrom("webhook_attempts")
    .select(["request_headers", "url"])
    .where("delivery_id", "=", deliveryId)
    .orderBy("attempt")
    .executeTakeFirst();
  if (!first?.request_headers) throw new ConflictError("this delivery has not been attempted yet; nothing to re-send");
  await ctx.deps.db
    .transaction()
    .execute((trx) => auditHook(trx, ctx, "workspace_webhook.delivery_retried", delivery.target_id, { deliveryId }));
  await attemptDelivery(ctx.deps, deliveryId, {
    final: delivery.status !== "pending" && delivery.status !== "failed",
    includeInactive: true,
    replay: {
      // An attempt recorded before attempts kept their URL (0010) went where the delivery was made for.
      url: first.url ?? delivery.url,
      headers: fromJsonColumn<Record<string, string>>(first.request_headers, {}),
    },
  });
  return { delivery: await deliveryView(ctx.deps.db, deliveryId) };
}
