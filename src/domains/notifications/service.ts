import type { Db } from "../../db/database.ts";
import type { Deps } from "../../deps.ts";
import { ForbiddenError, NotFoundError } from "../../errors.ts";
import { newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import type { OrgCtx } from "../context.ts";

export interface NotificationInput {
  orgId: string;
  kind: string;
  title: string;
  body: string;
  data?: Record<string, unknown>;
}

/** Notifies every admin and owner of the org, in the caller's transaction. */
export async function notifyOrgAdmins(trx: Db, deps: Deps, input: NotificationInput): Promise<void> {
  const recipients = await trx
    .selectFrom("memberships")
    .select("account_id")
    .where("org_id", "=", input.orgId)
    .where("role", "in", ["owner", "admin"])
    .where("status", "=", "active")
    .execute();
  if (recipients.length === 0) return;
  const now = deps.clock.now();
  await trx
    .insertInto("notifications")
    .values(
      recipients.map(({ account_id }) => ({
        id: newId("ntf", now),
        org_id: input.orgId,
        account_id,
        kind: input.kind,
        title: input.title,
        body: input.body,
        data: toJsonColumn(input.data ?? {}),
        read_at: null,
        created_at: now.toISOString(),
      })),
    )
    .execute();
}

function recipientOf(ctx: OrgCtx): string {
  if (ctx.principal.type !== "account") {
    throw new ForbiddenError("notifications belong to signed-in accounts; API keys have none");
  }
  return ctx.principal.accountId;
}

/** Notifications a list shows by default, and at most. */
export const NOTIFICATIONS_LIMIT = 100;
export const NOTIFICATIONS_MAX_LIMIT = 500;

/** The caller's notifications in this org, newest first, a page at a time (`limit`, `offset`). */
export async function listNotifications({
  ctx,
  unreadOnly,
  limit = NOTIFICATIONS_LIMIT,
  offset = 0,
}: {
  ctx: OrgCtx;
  unreadOnly: boolean;
  limit?: number;
  offset?: number;
}) {
  const accountId = recipientOf(ctx);
  let query = ctx.deps.db
    .selectFrom("notifications")
    .selectAll()
    .where("org_id", "=", ctx.org.id)
    .where("account_id", "=", accountId);
  if (unreadOnly) query = query.where("read_at", "is", null);
  const rows = await query.orderBy("created_at", "desc").orderBy("id", "desc").limit(limit).offset(offset).execute();
  return {
    notifications: rows.map((row) => ({
      id: row.id,
      kind: row.kind,
      title: row.title,
      body: row.body,
      data: fromJsonColumn<Record<string, unknown>>(row.data, {}),
      read: row.read_at !== null,
      readAt: row.read_at,
      createdAt: row.created_at,
    })),
  };
}

export async function markNotificationRead({ ctx, id }: { ctx: OrgCtx; id: string }): Promise<void> {
  const accountId = recipientOf(ctx);
  const found = await ctx.deps.db
    .selectFrom("notifications")
    .select(["id", "read_at"])
    .where("id", "=", id)
    .where("org_id", "=", ctx.org.id)
    .where("account_id", "=", accountId)
    .executeTakeFirst();
  if (!found) throw new NotFoundError("notification not found");
  if (found.read_at !== null) return;
  await ctx.deps.db
    .updateTable("notifications")
    .set({ read_at: ctx.deps.clock.now().toISOString() })
    .where("id", "=", id)
    .execute();
}

export async function markAllNotificationsRead({ ctx }: { ctx: OrgCtx }): Promise<void> {
  const accountId = recipientOf(ctx);
  await ctx.deps.db
    .updateTable("notifications")
    .set({ read_at: ctx.deps.clock.now().toISOString() })
    .where("org_id", "=", ctx.org.id)
    .where("account_id", "=", accountId)
    .where("read_at", "is", null)
    .execute();
}
