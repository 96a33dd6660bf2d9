import type { Deps } from "../../../deps.ts";
import { ConflictError } from "../../../errors.ts";
import { randomToken, sha256Hex } from "../../../lib/tokens.ts";
import { recordAudit } from "../../audit/service.ts";
import type { OrgCtx } from "../../context.ts";
import { authorize, inOrgTransaction } from "../../orgs/access.ts";
import type { OrgRow } from "../../orgs/records.ts";
import { ORG_COLUMNS } from "../../orgs/records.ts";
import { ScimError } from "./resources.ts";

const TOKEN_PREFIX = "scim_";
const TOKEN = /^scim_[A-Za-z0-9_-]{43}$/;

/** Where an org's identity provider provisions it: `{PUBLIC_URL}/api/scim/v2/{orgSlug}`. */
export function scimBaseUrl(deps: Pick<Deps, "config">, slug: string): string {
  return `${deps.config.publicUrl}/api/scim/v2/${encodeURIComponent(slug)}`;
}

export async function getScimSettings({ ctx }: { ctx: OrgCtx }) {
  authorize(ctx, "scim:manage");
  const token = await ctx.deps.db
    .selectFrom("scim_tokens")
    .select("created_at")
    .where("org_id", "=", ctx.org.id)
    .executeTakeFirst();
  return {
    scimBaseUrl: scimBaseUrl(ctx.deps, ctx.org.slug),
    enabled: token !== undefined,
    tokenCreatedAt: token?.created_at ?? null,
  };
}

/** Mints the org's SCIM token, shown once; it replaces the previous one at once. */
export async function mintScimToken({ ctx }: { ctx: OrgCtx }): Promise<{ token: string }> {
  authorize(ctx, "scim:manage");
  const token = randomToken(TOKEN_PREFIX);
  const now = ctx.deps.clock.now().toISOString();
  const createdBy = ctx.principal.type === "account" ? ctx.principal.accountId : ctx.principal.keyId;
  await inOrgTransaction(ctx, async (trx) => {
    const row = { token_hash: sha256Hex(token), created_by: createdBy, created_at: now };
    await trx
      .insertInto("scim_tokens")
      .values({ org_id: ctx.org.id, ...row })
      .onConflict((oc) => oc.column("org_id").doUpdateSet(row))
      .execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "scim.token_created",
      target: { type: "org", id: ctx.org.id },
    });
  });
  return { token };
}

/** Revokes SCIM provisioning: the token stops working at once. */
export async function revokeScim({ ctx }: { ctx: OrgCtx }): Promise<{ ok: true }> {
  authorize(ctx, "scim:manage");
  await inOrgTransaction(ctx, async (trx) => {
    const removed = await trx.deleteFrom("scim_tokens").where("org_id", "=", ctx.org.id).executeTakeFirst();
    if (Number(removed.numDeletedRows) === 0) throw new ConflictError("SCIM provisioning is not enabled");
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "scim.token_revoked",
      target: { type: "org", id: ctx.org.id },
    });
  });
  return { ok: true };
}

/**
 * The org a SCIM request acts on: its bearer token must be the current token of the org named
 * in the path (another org's token, a revoked one or none is 401). Read afresh on every request.
 */
export async function authenticateScim(deps: Deps, slug: string, authorization: string | undefined): Promise<OrgRow> {
  const token = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "")?.[1];
  if (!token || !TOKEN.test(token)) throw new ScimError(401, "a SCIM bearer token (scim_…) is required");
  const org = await deps.db
    .selectFrom("scim_tokens")
    .innerJoin("orgs", "orgs.id", "scim_tokens.org_id")
    .select(ORG_COLUMNS.map((column) => `orgs.${column}` as const))
    .where("scim_tokens.token_hash", "=", sha256Hex(token))
    .where("orgs.deleted_at", "is", null)
    .executeTakeFirst();
  if (!org || org.slug !== slug) throw new ScimError(401, "invalid SCIM token for this organization");
  return org as OrgRow;
}
