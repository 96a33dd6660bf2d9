import type { z } from "@hono/zod-openapi";
import { NotFoundError } from "../../errors.ts";
import type { AccountPrincipal } from "../../http/principal.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { recordAudit } from "../audit/service.ts";
import type { Ctx } from "../context.ts";
import type { AccountSchema, UpdateAccountInput } from "./schemas.ts";

type Account = z.infer<typeof AccountSchema>;

export async function getAccount({ ctx, account }: { ctx: Ctx; account: AccountPrincipal }): Promise<Account> {
  const row = await ctx.deps.db
    .selectFrom("users")
    .select(["id", "email", "name", "email_verified", "title", "timezone", "preferences"])
    .where("id", "=", account.accountId)
    .executeTakeFirst();
  if (!row) throw new NotFoundError("account not found");
  return {
    id: row.id,
    email: row.email,
    name: row.name || null,
    emailVerified: Boolean(row.email_verified),
    title: row.title,
    timezone: row.timezone,
    preferences: fromJsonColumn<Record<string, unknown> | null>(row.preferences, null),
  };
}

/** Updates the caller's profile; `preferences` replaces the stored object as given. */
export async function updateAccount({
  ctx,
  account,
  input,
}: {
  ctx: Ctx;
  account: AccountPrincipal;
  input: z.infer<typeof UpdateAccountInput>;
}): Promise<void> {
  const changes = {
    // better-auth's name column is not nullable: an empty name reads as null.
    ...(input.name !== undefined ? { name: input.name ?? "" } : {}),
    ...(input.title !== undefined ? { title: input.title } : {}),
    ...(input.timezone !== undefined ? { timezone: input.timezone } : {}),
    ...(input.preferences !== undefined ? { preferences: toJsonColumn(input.preferences) } : {}),
  };
  if (Object.keys(changes).length === 0) return;
  const now = ctx.deps.clock.now();
  await ctx.deps.db.transaction().execute(async (trx) => {
    await trx
      .updateTable("users")
      .set({ ...changes, updated_at: ctx.deps.dialect === "postgres" ? now : now.toISOString() })
      .where("id", "=", account.accountId)
      .execute();
    await recordAudit(trx, ctx, {
      orgId: null,
      action: "account.updated",
      target: { type: "account", id: account.accountId },
      data: { fields: Object.keys(changes) },
    });
  });
}
