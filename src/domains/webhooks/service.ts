import type { z } from "@hono/zod-openapi";
import type { Selectable } from "kysely";
import type { WebhooksTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import { NotFoundError, ValidationError } from "../../errors.ts";
import { actorOf } from "../../http/principal.ts";
import { newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { checkOutboundUrl } from "../../lib/ssrf.ts";
import { recordAudit } from "../audit/service.ts";
import type { Ctx, OrgCtx } from "../context.ts";
import { authorize, inOrgTransaction, resolveOrgAccess } from "../orgs/access.ts";
import { ownedRecords } from "../owned-records.ts";
import { listDeliveries } from "./deliveries.ts";
import { sendTestDelivery } from "./delivery.ts";
import type { DeliveriesQuery, UpdateWebhookInput, WebhookInput, WebhookSchema } from "./schemas.ts";
import { newSigningSecret } from "./signing.ts";

type Webhook = z.infer<typeof WebhookSchema>;
type WebhookRow = Selectable<WebhooksTable>;

function toWebhook(row: WebhookRow): Webhook {
  return {
    id: row.id,
    url: row.url,
    events: fromJsonColumn<string[]>(row.events, []),
    active: Boolean(row.active),
    consecutiveFailures: row.consecutive_failures,
    lastFailureAt: row.last_failure_at,
    disabledReason: row.disabled_reason,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** Refuses (422, naming the field) an outbound URL that is not http(s) or reaches a private address. */
export async function assertDeliverableUrl(deps: Deps, url: string, path: string): Promise<void> {
  const problem = await checkOutboundUrl(url, { allowPrivate: deps.config.allowPrivateWebhookUrls });
  if (problem) throw new ValidationError([{ path, message: problem }]);
}

const webhooks = ownedRecords("webhooks", "webhook");
/** An org's own webhooks (a workspace's have a project). */
const ownedBy = (ctx: OrgCtx) => ({ org_id: ctx.org.id, project_id: null });

/** Creates an org webhook; its signing secret is returned this once. */
export async function createWebhook({ ctx, input }: { ctx: OrgCtx; input: z.infer<typeof WebhookInput> }) {
  authorize(ctx, "webhooks:manage");
  await assertDeliverableUrl(ctx.deps, input.url, "url");
  const now = ctx.deps.clock.now();
  const at = now.toISOString();
  const secret = newSigningSecret();
  const row: WebhookRow = {
    id: newId("whk", now),
    org_id: ctx.org.id,
    project_id: null,
    name: null,
    url: input.url,
    events: toJsonColumn([...new Set(input.events)]) ?? "[]",
    secret,
    headers: null,
    payload_fields: null,
    active: 1,
    consecutive_failures: 0,
    last_failure_at: null,
    disabled_reason: null,
    created_by: actorOf(ctx.principal).id,
    created_at: at,
    updated_at: at,
    deleted_at: null,
  };
  await inOrgTransaction(ctx, async (trx) => {
    await trx.insertInto("webhooks").values(row).execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "webhook.created",
      target: { type: "webhook", id: row.id },
      data: { url: row.url, events: input.events },
    });
  });
  return { webhook: toWebhook(row), secret };
}

export async function listWebhooks({ ctx }: { ctx: OrgCtx }) {
  authorize(ctx, "webhooks:read");
  const rows = await ctx.deps.db
    .selectFrom("webhooks")
    .selectAll()
    .where("org_id", "=", ctx.org.id)
    .where("project_id", "is", null)
    .where("deleted_at", "is", null)
    .orderBy("created_at")
    .orderBy("id")
    .execute();
  return { webhooks: rows.map(toWebhook) };
}

/** Changes URL or events; `active: true` resumes a disabled webhook, and gives any a fresh failure count. */
export async function updateWebhook({
  ctx,
  id,
  input,
}: {
  ctx: OrgCtx;
  id: string;
  input: z.infer<typeof UpdateWebhookInput>;
}) {
  authorize(ctx, "webhooks:manage");
  const found = await webhooks.find(ctx.deps, ownedBy(ctx), id);
  // Nothing to change (`{}`): nothing is written or audited, as for the org and its projects.
  if (Object.values(input).every((value) => value === undefined)) return { webhook: toWebhook(found) };
  if (input.url !== undefined) await assertDeliverableUrl(ctx.deps, input.url, "url");
  const changes: Partial<WebhookRow> = {
    ...(input.url !== undefined ? { url: input.url } : {}),
    ...(input.events !== undefined ? { events: toJsonColumn([...new Set(input.events)]) ?? "[]" } : {}),
    ...(input.active === false ? { active: 0 } : {}),
    // `active: true` always starts the counter afresh, also on a webhook still active.
    ...(input.active === true ? { active: 1, consecutive_failures: 0, disabled_reason: null } : {}),
  };
  const updated = await inOrgTransaction(ctx, (trx) =>
    webhooks.change(
      trx,
      ctx.deps,
      ownedBy(ctx),
      id,
      () => ({ ...changes, updated_at: ctx.deps.clock.now().toISOString() }),
      // As it is now: of concurrent resumes only the first finds the webhook disabled.
      (current) =>
        recordAudit(trx, ctx, {
          orgId: ctx.org.id,
          action: input.active === true && !current.active ? "webhook.resumed" : "webhook.updated",
          target: { type: "webhook", id },
          data: { ...input },
        }),
    ),
  );
  return { webhook: toWebhook(updated) };
}

/** Deletes the webhook; deliveries already queued for it become no-ops (`skipped`). */
export async function deleteWebhook({ ctx, id }: { ctx: OrgCtx; id: string }): Promise<void> {
  authorize(ctx, "webhooks:manage");
  await inOrgTransaction(ctx, (trx) =>
    webhooks.change(
      trx,
      ctx.deps,
      ownedBy(ctx),
      id,
      () => ({ deleted_at: ctx.deps.clock.now().toISOString(), active: 0 }),
      (current) =>
        recordAudit(trx, ctx, {
          orgId: ctx.org.id,
          action: "webhook.deleted",
          target: { type: "webhook", id },
          data: { url: current.url },
        }),
    ),
  );
}

export async function listWebhookDeliveries({
  ctx,
  id,
  query,
}: {
  ctx: OrgCtx;
  id: string;
  query: z.infer<typeof DeliveriesQuery>;
}) {
  authorize(ctx, "webhooks:read");
  await webhooks.find(ctx.deps, ownedBy(ctx), id);
  return { deliveries: await listDeliveries(ctx.deps.db, id, query) };
}

/**
 * Sends a sample `webhook.test` delivery now, whatever the webhook's event list and even when it
 * is disabled (to check a receiver before resuming), and returns it after that one attempt. Like
 * every attempt, it moves the breaker of an active webhook.
 */
export async function testWebhook({ ctx, id }: { ctx: Ctx; id: string }) {
  const hook = await ctx.deps.db
    .selectFrom("webhooks")
    .innerJoin("orgs", "orgs.id", "webhooks.org_id")
    .select(["webhooks.id", "webhooks.url", "orgs.slug as org_slug"])
    .where("webhooks.id", "=", id)
    .where("webhooks.project_id", "is", null)
    .where("webhooks.deleted_at", "is", null)
    .executeTakeFirst();
  if (!hook) throw new NotFoundError("webhook not found");
  const access = await resolveOrgAccess(ctx.deps, ctx.principal, hook.org_slug).catch(() => {
    throw new NotFoundError("webhook not found");
  });
  authorize({ ...ctx, ...access }, "webhooks:manage");
  const timestamp = Math.floor(ctx.deps.clock.now().getTime() / 1000);
  const body = JSON.stringify({
    event: "webhook.test",
    payload: { webhookId: hook.id, org: hook.org_slug, message: "This is a test delivery from Plinth." },
    timestamp,
  });
  const delivery = await sendTestDelivery(
    ctx.deps,
    access.org.id,
    { targetType: "webhook", targetId: hook.id, url: hook.url, body },
    {
      includeInactive: true,
      audit: (trx, deliveryId) =>
        recordAudit(trx, ctx, {
          orgId: access.org.id,
          action: "webhook.tested",
          target: { type: "webhook", id: hook.id },
          data: { deliveryId },
        }),
    },
  );
  return { delivery };
}
