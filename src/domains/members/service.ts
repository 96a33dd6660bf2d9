import type { z } from "@hono/zod-openapi";
import { DAY_MS } from "../../clock.ts";
import { type Db, isUniqueViolation } from "../../db/database.ts";
import type { Deps } from "../../deps.ts";
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from "../../errors.ts";
import type { AccountPrincipal } from "../../http/principal.ts";
import { newId } from "../../lib/ids.ts";
import { randomToken, sha256Hex } from "../../lib/tokens.ts";
import { recordAudit } from "../audit/service.ts";
import type { Ctx, OrgCtx } from "../context.ts";
import { authorize, inOrgTransaction, orgNotFound, type Role } from "../orgs/access.ts";
import { emitOrgEvent } from "../webhooks/events.ts";
import type { InviteInput, MemberSchema } from "./schemas.ts";

type Member = z.infer<typeof MemberSchema>;

function isInvitationId(id: string): boolean {
  return id.startsWith("inv_");
}

function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** Members first (oldest first), then invitations that have not been accepted or revoked. */
export async function listMembers({ ctx }: { ctx: OrgCtx }): Promise<{ members: Member[] }> {
  authorize(ctx, "members:read");
  const { db, clock } = ctx.deps;
  const [memberships, invitations] = await Promise.all([
    db
      .selectFrom("memberships")
      .innerJoin("users", "users.id", "memberships.account_id")
      .select([
        "memberships.id",
        "memberships.account_id",
        "memberships.role",
        "memberships.status",
        "memberships.created_at",
        "users.email",
        "users.name",
      ])
      .where("memberships.org_id", "=", ctx.org.id)
      .orderBy("memberships.created_at")
      .orderBy("memberships.id")
      .execute(),
    db
      .selectFrom("invitations")
      .selectAll()
      .where("org_id", "=", ctx.org.id)
      .where("status", "=", "pending")
      .orderBy("created_at")
      .orderBy("id")
      .execute(),
  ]);
  const now = clock.now().toISOString();
  return {
    members: [
      ...memberships.map((m) => ({
        id: m.id,
        accountId: m.account_id,
        email: m.email,
        name: m.name || null,
        role: m.role as Role,
        status: m.status === "suspended" ? ("suspended" as const) : ("active" as const),
        joinedAt: m.created_at,
        invitedAt: null,
        expiresAt: null,
      })),
      ...invitations.map((i) => ({
        id: i.id,
        accountId: null,
        email: i.email,
        name: null,
        role: i.role as Role,
        status: i.expires_at > now ? ("invited" as const) : ("expired" as const),
        joinedAt: null,
        invitedAt: i.created_at,
        expiresAt: i.expires_at,
      })),
    ],
  };
}

/** Granting or taking away `owner`, or touching an owner, is for a signed-in owner only. */
function requireOwner(ctx: OrgCtx): void {
  if (ctx.principal.type !== "account" || ctx.role !== "owner") {
    throw new ForbiddenError("only a signed-in owner can grant, change or remove the owner role");
  }
}

/**
 * Re-reads the caller's role inside a transaction that holds the org's row lock (an exclusive
 * `inOrgTransaction`; SQLite runs one write transaction at a time). Membership changes run one
 * after another per org, so two owners demoting each other cannot both pass the last-owner check.
 */
async function withCurrentRole(trx: Db, ctx: OrgCtx): Promise<OrgCtx> {
  if (ctx.principal.type !== "account") return ctx;
  const current = await trx
    .selectFrom("memberships")
    .select("role")
    .where("org_id", "=", ctx.org.id)
    .where("account_id", "=", ctx.principal.accountId)
    .executeTakeFirst();
  if (!current) throw orgNotFound();
  return { ...ctx, role: current.role as Role };
}

async function ownerCount(db: Db, orgId: string): Promise<number> {
  const row = await db
    .selectFrom("memberships")
    .select((eb) => eb.fn.countAll<number | string>().as("n"))
    .where("org_id", "=", orgId)
    .where("role", "=", "owner")
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

async function findMembership(db: Db, orgId: string, id: string) {
  return db.selectFrom("memberships").selectAll().where("org_id", "=", orgId).where("id", "=", id).executeTakeFirst();
}

async function findPendingInvitation(db: Db, orgId: string, id: string) {
  return db
    .selectFrom("invitations")
    .selectAll()
    .where("org_id", "=", orgId)
    .where("id", "=", id)
    .where("status", "=", "pending")
    .executeTakeFirst();
}

export async function changeMemberRole({ ctx, id, role }: { ctx: OrgCtx; id: string; role: Role }): Promise<void> {
  authorize(ctx, "members:manage");
  const at = ctx.deps.clock.now().toISOString();
  await inOrgTransaction(
    ctx,
    async (trx) => {
      ctx = await withCurrentRole(trx, ctx);
      authorize(ctx, "members:manage");
      if (isInvitationId(id)) {
        const invitation = await findPendingInvitation(trx, ctx.org.id, id);
        if (!invitation) throw new NotFoundError("member not found");
        if (role === "owner") {
          throw new ValidationError([{ path: "role", message: "invitations can assign admin, developer or viewer" }]);
        }
        await trx.updateTable("invitations").set({ role, updated_at: at }).where("id", "=", id).execute();
        await recordAudit(trx, ctx, {
          orgId: ctx.org.id,
          action: "invitation.role_changed",
          target: { type: "invitation", id },
          data: { email: invitation.email, from: invitation.role, to: role },
        });
        return;
      }
      const member = await findMembership(trx, ctx.org.id, id);
      if (!member) throw new NotFoundError("member not found");
      if (role === "owner" || member.role === "owner") requireOwner(ctx);
      if (member.role === role) return;
      if (member.role === "owner" && (await ownerCount(trx, ctx.org.id)) <= 1) {
        throw new ConflictError("the last owner cannot be demoted; make another member owner first");
      }
      await trx.updateTable("memberships").set({ role, updated_at: at }).where("id", "=", id).execute();
      await recordAudit(trx, ctx, {
        orgId: ctx.org.id,
        action: "member.role_changed",
        target: { type: "member", id },
        data: { accountId: member.account_id, from: member.role, to: role },
      });
    },
    { exclusive: true },
  );
}

/** Removes a member (anyone may remove themselves) or revokes a pending invitation. */
export async function removeMember({ ctx, id }: { ctx: OrgCtx; id: string }): Promise<void> {
  const at = ctx.deps.clock.now().toISOString();
  await inOrgTransaction(
    ctx,
    async (trx) => {
      ctx = await withCurrentRole(trx, ctx);
      if (isInvitationId(id)) {
        authorize(ctx, "members:manage");
        const invitation = await findPendingInvitation(trx, ctx.org.id, id);
        if (!invitation) throw new NotFoundError("member not found");
        await trx.updateTable("invitations").set({ status: "revoked", updated_at: at }).where("id", "=", id).execute();
        await recordAudit(trx, ctx, {
          orgId: ctx.org.id,
          action: "invitation.revoked",
          target: { type: "invitation", id },
          data: { email: invitation.email },
        });
        return;
      }
      const member = await findMembership(trx, ctx.org.id, id);
      const leaving = ctx.principal.type === "account" && member?.account_id === ctx.principal.accountId;
      if (!leaving) authorize(ctx, "members:manage");
      if (!member) throw new NotFoundError("member not found");
      if (member.role === "owner") {
        if (!leaving) requireOwner(ctx);
        if ((await ownerCount(trx, ctx.org.id)) <= 1) {
          throw new ConflictError("the last owner cannot leave or be removed; make another member owner first");
        }
      }
      await trx.deleteFrom("memberships").where("id", "=", id).execute();
      await recordAudit(trx, ctx, {
        orgId: ctx.org.id,
        action: leaving ? "member.left" : "member.removed",
        target: { type: "member", id },
        data: { accountId: member.account_id, role: member.role },
      });
    },
    { exclusive: true },
  );
}

/** A token hash nobody holds a token for: an invitation's link is minted only when its mail goes out. */
function unusableTokenHash(): string {
  return sha256Hex(randomToken("", 32));
}

/** Queues the invitation mail in the caller's transaction (see `invitationJobs` in jobs.ts). */
async function queueInvitationMail(trx: Db, deps: Deps, invitationId: string, inviter: string | null): Promise<void> {
  await deps.jobs.enqueue(trx, { kind: "invitation.send", payload: { invitationId, inviter }, maxAttempts: 8 });
}

/** What an invitation SCIM made carries: the SCIM User it stands for until it is accepted. */
export interface ScimInvitation {
  memberId: string;
  externalId: string | null;
  displayName: string | null;
  /** `suspended` when the identity provider deactivated the user meanwhile. */
  memberStatus: "active" | "suspended";
}

/**
 * Writes a pending invitation with its mail (a job) and its `member.invited` event, in the
 * caller's transaction; the caller has checked the address is free and audits. Returns when it
 * expires.
 */
export async function writeInvitation(
  trx: Db,
  deps: Deps,
  invitation: {
    id: string;
    orgId: string;
    email: string;
    role: string;
    invitedBy: string | null;
    /** Who the mail says invited them. */
    inviter: string | null;
    scim?: ScimInvitation;
  },
): Promise<{ expiresAt: string }> {
  const now = deps.clock.now();
  const at = now.toISOString();
  const expiresAt = new Date(now.getTime() + deps.config.invitationTtlDays * DAY_MS).toISOString();
  await trx
    .insertInto("invitations")
    .values({
      id: invitation.id,
      org_id: invitation.orgId,
      email: invitation.email,
      role: invitation.role,
      token_hash: unusableTokenHash(),
      status: "pending",
      invited_by: invitation.invitedBy,
      expires_at: expiresAt,
      created_at: at,
      updated_at: at,
      accepted_at: null,
      ...(invitation.scim
        ? {
            scim_member_id: invitation.scim.memberId,
            scim_external_id: invitation.scim.externalId,
            display_name: invitation.scim.displayName,
            member_status: invitation.scim.memberStatus,
          }
        : {}),
    })
    .execute();
  await queueInvitationMail(trx, deps, invitation.id, invitation.inviter);
  await emitOrgEvent(trx, deps, {
    orgId: invitation.orgId,
    kind: "member.invited",
    payload: { invitationId: invitation.id, email: invitation.email, role: invitation.role },
  });
  return { expiresAt };
}

export async function inviteMember({ ctx, input }: { ctx: OrgCtx; input: z.infer<typeof InviteInput> }) {
  authorize(ctx, "members:manage");
  const email = normalizeEmail(input.email);
  const now = ctx.deps.clock.now();
  const at = now.toISOString();
  const id = newId("inv", now);
  let expiresAt = at;
  try {
    await inOrgTransaction(ctx, async (trx) => {
      const existingMember = await trx
        .selectFrom("memberships")
        .innerJoin("users", "users.id", "memberships.account_id")
        .select("memberships.id")
        .where("memberships.org_id", "=", ctx.org.id)
        .where((eb) => eb(eb.fn("lower", ["users.email"]), "=", email))
        .executeTakeFirst();
      if (existingMember) throw new ConflictError(`${email} is already a member of this organization`);
      // An expired invitation for the same address is replaced; a live one must be resent instead.
      const pending = await trx
        .selectFrom("invitations")
        .select(["id", "expires_at"])
        .where("org_id", "=", ctx.org.id)
        .where("email", "=", email)
        .where("status", "=", "pending")
        .executeTakeFirst();
      if (pending && pending.expires_at > at) {
        throw new ConflictError(`${email} already has a pending invitation; resend it instead`);
      }
      if (pending) {
        await trx
          .updateTable("invitations")
          .set({ status: "expired", updated_at: at })
          .where("id", "=", pending.id)
          .execute();
      }
      ({ expiresAt } = await writeInvitation(trx, ctx.deps, {
        id,
        orgId: ctx.org.id,
        email,
        role: input.role,
        invitedBy: ctx.principal.type === "account" ? ctx.principal.accountId : ctx.principal.keyId,
        inviter: ctx.principal.type === "account" ? ctx.principal.email : null,
      }));
      await recordAudit(trx, ctx, {
        orgId: ctx.org.id,
        action: "member.invited",
        target: { type: "invitation", id },
        data: { email, role: input.role },
      });
    });
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new ConflictError(`${email} already has a pending invitation; resend it instead`);
    }
    throw error;
  }
  return { invite: { id, email, role: input.role, status: "invited", expiresAt } };
}

/** Sends a pending (or expired) invitation again with a new token; the old token stops working at once. */
export async function resendInvitation({ ctx, id }: { ctx: OrgCtx; id: string }): Promise<void> {
  authorize(ctx, "members:manage");
  const { db, clock, config } = ctx.deps;
  if (!isInvitationId(id)) {
    const member = await findMembership(db, ctx.org.id, id);
    if (member) throw new ConflictError("this member has already joined; there is no invitation to resend");
    throw new NotFoundError("member not found");
  }
  const now = clock.now();
  const at = now.toISOString();
  const expiresAt = new Date(now.getTime() + config.invitationTtlDays * DAY_MS).toISOString();
  await inOrgTransaction(ctx, async (trx) => {
    const found = await findPendingInvitation(trx, ctx.org.id, id);
    if (!found) throw new NotFoundError("member not found");
    await trx
      .updateTable("invitations")
      .set({ token_hash: unusableTokenHash(), expires_at: expiresAt, updated_at: at })
      .where("id", "=", id)
      .execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "invitation.resent",
      target: { type: "invitation", id },
      data: { email: found.email },
    });
    await queueInvitationMail(trx, ctx.deps, id, ctx.principal.type === "account" ? ctx.principal.email : null);
  });
}

/** Joins the org of the invitation; the signed-in account's e-mail must be the invited one. */
export async function acceptInvitation({
  ctx,
  account,
  token,
}: {
  ctx: Ctx;
  account: AccountPrincipal;
  token: string;
}): Promise<{ orgSlug: string }> {
  const { db, clock } = ctx.deps;
  const now = clock.now();
  const at = now.toISOString();
  return db.transaction().execute(async (trx) => {
    const invitation = await trx
      .selectFrom("invitations")
      .innerJoin("orgs", "orgs.id", "invitations.org_id")
      .selectAll("invitations")
      .select("orgs.slug as org_slug")
      .where("invitations.token_hash", "=", sha256Hex(token))
      .where("invitations.status", "=", "pending")
      .where("orgs.deleted_at", "is", null)
      .executeTakeFirst();
    if (!invitation) throw new NotFoundError("invitation not found; it may have been revoked or already used");
    if (invitation.expires_at <= at) throw new ConflictError("invitation has expired; ask for it to be resent");
    if (normalizeEmail(account.email) !== invitation.email) {
      throw new ForbiddenError("this invitation was sent to a different e-mail address");
    }
    const already = await trx
      .selectFrom("memberships")
      .select("id")
      .where("org_id", "=", invitation.org_id)
      .where("account_id", "=", account.accountId)
      .executeTakeFirst();
    if (already) throw new ConflictError("you are already a member of this organization");
    // Claim the invitation first: of simultaneous accepts of one token, exactly one proceeds.
    const claimed = await trx
      .updateTable("invitations")
      .set({ status: "accepted", accepted_at: at, updated_at: at })
      .where("id", "=", invitation.id)
      .where("status", "=", "pending")
      .executeTakeFirst();
    if (Number(claimed.numUpdatedRows) === 0) {
      throw new NotFoundError("invitation not found; it may have been revoked or already used");
    }
    // An invitation SCIM made becomes the membership its SCIM User id already names.
    const memberId = invitation.scim_member_id ?? newId("mem", now);
    await trx
      .insertInto("memberships")
      .values({
        id: memberId,
        org_id: invitation.org_id,
        account_id: account.accountId,
        role: invitation.role,
        status: invitation.member_status ?? "active",
        scim_external_id: invitation.scim_external_id,
        display_name: invitation.display_name,
        created_at: at,
        updated_at: at,
      })
      .execute();
    await recordAudit(trx, ctx, {
      orgId: invitation.org_id,
      action: "member.joined",
      target: { type: "member", id: memberId },
      data: { accountId: account.accountId, email: invitation.email, role: invitation.role },
    });
    return { orgSlug: invitation.org_slug };
  });
}
