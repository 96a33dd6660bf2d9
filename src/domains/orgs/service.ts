import type { z } from "@hono/zod-openapi";
import { type Selectable, sql } from "kysely";
import type { Db, Dialect } from "../../db/database.ts";
import type { OrgsTable } from "../../db/schema.ts";
import { NotFoundError } from "../../errors.ts";
import type { AccountPrincipal } from "../../http/principal.ts";
import { newId } from "../../lib/ids.ts";
import { toJsonColumn } from "../../lib/json.ts";
import { firstFreeSlug, slugify } from "../../lib/slug.ts";
import { recordAudit } from "../audit/service.ts";
import type { Ctx, OrgCtx } from "../context.ts";
import { withFreshSlug } from "../fresh-slug.ts";
import { countProjects, deleteOrgProjects, projectSummaries } from "../projects/service.ts";
import { assertDeliverableUrl } from "../webhooks/service.ts";
import { newSigningSecret } from "../webhooks/signing.ts";
import { authorize, inOrgTransaction, type Role } from "./access.ts";
import { DEFAULT_REGION_BY_RESIDENCY, ORG_COLUMNS, type Org, toOrg } from "./records.ts";
import type { CreateOrgInput, UpdateOrgInput } from "./schemas.ts";

/** Live slugs equal to `base` or of the form `base-N`. */
async function takenSlugs(db: Db, base: string): Promise<Set<string>> {
  const rows = await db
    .selectFrom("orgs")
    .select("slug")
    .where("deleted_at", "is", null)
    .where((eb) => eb.or([eb("slug", "=", base), eb("slug", "like", `${base}-%`)]))
    .execute();
  return new Set(rows.map((row) => row.slug));
}

/**
 * Serialises slug choice for one base name until the transaction ends (SQLite already runs one
 * write transaction at a time). Without it, simultaneous creations of "Acme" all pick `acme`.
 */
async function lockSlugBase(trx: Db, dialect: Dialect, base: string): Promise<void> {
  if (dialect === "postgres") await sql`select pg_advisory_xact_lock(hashtext(${`org-slug:${base}`}))`.execute(trx);
}

/** Creates an org with the caller as its owner. */
export async function createOrg({
  ctx,
  account,
  input,
}: {
  ctx: Ctx;
  account: AccountPrincipal;
  input: z.infer<typeof CreateOrgInput>;
}): Promise<Org> {
  const { db, clock, dialect } = ctx.deps;
  const base = slugify(input.name, "org");
  const residency = input.residency ?? "global";
  const row = await withFreshSlug("org", () =>
    db.transaction().execute(async (trx) => {
      await lockSlugBase(trx, dialect, base);
      const now = clock.now();
      const at = now.toISOString();
      const org: Selectable<OrgsTable> = {
        id: newId("org", now),
        slug: firstFreeSlug(base, await takenSlugs(trx, base)),
        name: input.name,
        plan_id: ctx.deps.config.defaultPlan,
        residency,
        default_region: input.defaultRegion ?? DEFAULT_REGION_BY_RESIDENCY[residency],
        ip_allowlist: "[]",
        webhook_url: null,
        webhook_secret: null,
        status: "active",
        purpose: input.purpose ?? null,
        team_size: input.teamSize ?? null,
        created_at: at,
        updated_at: at,
        deleted_at: null,
      };
      await trx.insertInto("orgs").values(org).execute();
      await trx
        .insertInto("memberships")
        .values({
          id: newId("mem", now),
          org_id: org.id,
          account_id: account.accountId,
          role: "owner",
          created_at: at,
          updated_at: at,
        })
        .execute();
      await recordAudit(trx, ctx, {
        orgId: org.id,
        action: "org.created",
        target: { type: "org", id: org.id },
        data: { name: org.name, slug: org.slug, residency: org.residency, defaultRegion: org.default_region },
      });
      return org;
    }),
  );
  return toOrg(row);
}

export type OrgMembership = Org & { role: Role };

/** The caller's orgs with the caller's role in each. An API key sees its own org, as admin. */
export async function listOrgs({ ctx }: { ctx: Ctx }): Promise<OrgMembership[]> {
  const { principal } = ctx;
  if (principal.type === "api_key") return [{ ...toOrg(principal.org), role: "admin" }];
  const rows = await ctx.deps.db
    .selectFrom("orgs")
    .innerJoin("memberships", "memberships.org_id", "orgs.id")
    .select(ORG_COLUMNS.map((column) => `orgs.${column}` as const))
    .select("memberships.role as member_role")
    .where("memberships.account_id", "=", principal.accountId)
    .where("memberships.status", "=", "active")
    .where("orgs.deleted_at", "is", null)
    .orderBy("orgs.created_at")
    .orderBy("orgs.id")
    .execute();
  return rows.map(({ member_role, ...org }) => ({ ...toOrg(org), role: member_role as Role }));
}

/** Projects the overview lists at most; `projectCount` counts them all. */
export const OVERVIEW_PROJECTS = 100;

export async function getOverview({ ctx }: { ctx: OrgCtx }) {
  authorize(ctx, "org:read");
  const projects = await projectSummaries(ctx.deps, ctx.org.id, OVERVIEW_PROJECTS);
  // Counted only when the list may have been cut short.
  const projectCount =
    projects.length < OVERVIEW_PROJECTS ? projects.length : await countProjects(ctx.deps.db, ctx.org.id);
  return { org: toOrg(ctx.org), role: ctx.role, projectCount, projects };
}

export async function updateOrg({
  ctx,
  input,
}: {
  ctx: OrgCtx;
  input: z.infer<typeof UpdateOrgInput>;
}): Promise<{ org: Org; webhookSecret?: string }> {
  authorize(ctx, "org:update");
  const { org } = ctx;
  if (input.webhookUrl) await assertDeliverableUrl(ctx.deps, input.webhookUrl, "webhookUrl");
  const changes: Partial<Selectable<OrgsTable>> = {};
  const changed: Record<string, unknown> = {};
  if (input.name !== undefined && input.name !== org.name) {
    changes.name = input.name;
    changed.name = input.name;
  }
  if (input.defaultRegion !== undefined && input.defaultRegion !== org.default_region) {
    changes.default_region = input.defaultRegion;
    changed.defaultRegion = input.defaultRegion;
  }
  if (input.ipAllowlist !== undefined) {
    const entries = input.ipAllowlist.map((entry) => entry.trim());
    changes.ip_allowlist = toJsonColumn(entries) ?? "[]";
    changed.ipAllowlist = entries;
  }
  // A new webhook URL gets a new signing secret, returned once in this response.
  let webhookSecret: string | undefined;
  if (input.webhookUrl !== undefined && input.webhookUrl !== org.webhook_url) {
    webhookSecret = input.webhookUrl === null ? undefined : newSigningSecret();
    changes.webhook_url = input.webhookUrl;
    changes.webhook_secret = webhookSecret ?? null;
    changed.webhookUrl = input.webhookUrl;
  }
  if (Object.keys(changes).length === 0) return { org: toOrg(org) };

  const updatedAt = ctx.deps.clock.now().toISOString();
  const updated = await inOrgTransaction(
    ctx,
    async (trx) => {
      const row = await trx
        .updateTable("orgs")
        .set({ ...changes, updated_at: updatedAt })
        .where("id", "=", org.id)
        .where("deleted_at", "is", null)
        .returning(ORG_COLUMNS)
        .executeTakeFirstOrThrow();
      await recordAudit(trx, ctx, {
        orgId: org.id,
        action: "org.updated",
        target: { type: "org", id: org.id },
        data: changed,
      });
      return row;
    },
    { exclusive: true },
  );
  return { org: toOrg(updated), ...(webhookSecret ? { webhookSecret } : {}) };
}

/** Soft-deletes the org: it vanishes from every read, its keys stop working, pending invitations lapse. */
export async function deleteOrg({ ctx }: { ctx: OrgCtx }): Promise<void> {
  authorize(ctx, "org:delete");
  const at = ctx.deps.clock.now().toISOString();
  await ctx.deps.db.transaction().execute(async (trx) => {
    const deleted = await trx
      .updateTable("orgs")
      .set({ status: "deleted", deleted_at: at, updated_at: at })
      .where("id", "=", ctx.org.id)
      .where("deleted_at", "is", null)
      .executeTakeFirst();
    // Deleted by a request that overlapped this one: gone, as for any later request.
    if (Number(deleted.numUpdatedRows) === 0) throw new NotFoundError("organization not found");
    await trx
      .updateTable("invitations")
      .set({ status: "revoked", updated_at: at })
      .where("org_id", "=", ctx.org.id)
      .where("status", "=", "pending")
      .execute();
    await deleteOrgProjects(trx, ctx.deps, ctx.org.id);
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "org.deleted",
      target: { type: "org", id: ctx.org.id },
      data: { slug: ctx.org.slug },
    });
  });
}
