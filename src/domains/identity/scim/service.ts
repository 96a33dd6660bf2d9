import type { Db } from "../../../db/database.ts";
import { isUniqueViolation } from "../../../db/database.ts";
import type { Deps } from "../../../deps.ts";
import { isIdOf, newId } from "../../../lib/ids.ts";
import { type AuditActor, recordAuditAs } from "../../audit/service.ts";
import { writeInvitation } from "../../members/service.ts";
import type { OrgRow } from "../../orgs/records.ts";
import { createIdentityAccount, rememberIdentity } from "../accounts.ts";
import { type Filter, InvalidFilterError, matchesFilter, parseFilter } from "./filter.ts";
import { GROUP_SCHEMA, listResponse, ScimError, USER_SCHEMA } from "./resources.ts";
import { scimBaseUrl } from "./tokens.ts";

/** The roles a SCIM group may stand for (owners are managed in Plinth only). */
const GROUP_ROLES = ["admin", "developer", "viewer"] as const;
/** The role of a provisioned member outside every group. */
const DEFAULT_ROLE = "viewer";
const MAX_COUNT = 200;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** A SCIM request's context: the org its token belongs to, and who the audit log names. */
export interface ScimCtx {
  deps: Deps;
  org: OrgRow;
  ip: string | null;
}

const actorOf = (ctx: ScimCtx): AuditActor => ({ type: "scim", id: ctx.org.id, email: null });

type Json = Record<string, unknown>;

/**
 * A SCIM User: a membership, or an invitation SCIM made for someone outside the org's proven
 * domain, who has not accepted it yet. Its id is the membership's (the invitation carries the
 * id its membership will have), so the identity provider's handle survives the acceptance.
 */
interface PersonRow {
  id: string;
  /** Set while the person is invited. */
  invitation_id: string | null;
  role: string;
  /** `active` or `suspended`. */
  status: string;
  scim_external_id: string | null;
  /** The identity provider's name for the person here. */
  display_name: string | null;
  /** The account's own name (members only). */
  account_name: string | null;
  email: string;
  created_at: string;
  updated_at: string;
}

/** The org's SCIM Users (optionally the one of `id`, or those holding `role`), oldest first. */
async function people(db: Db, orgId: string, only: { id?: string; role?: string } = {}): Promise<PersonRow[]> {
  let members = db
    .selectFrom("memberships")
    .innerJoin("users", "users.id", "memberships.account_id")
    .select([
      "memberships.id",
      "memberships.role",
      "memberships.status",
      "memberships.scim_external_id",
      "memberships.display_name",
      "memberships.created_at",
      "memberships.updated_at",
      "users.email",
      "users.name as account_name",
    ])
    .where("memberships.org_id", "=", orgId);
  let invited = db
    .selectFrom("invitations")
    .select([
      "id as invitation_id",
      "scim_member_id",
      "role",
      "member_status",
      "scim_external_id",
      "display_name",
      "created_at",
      "updated_at",
      "email",
    ])
    .where("org_id", "=", orgId)
    .where("status", "=", "pending")
    .where("scim_member_id", "is not", null);
  if (only.id !== undefined) {
    members = members.where("memberships.id", "=", only.id);
    invited = invited.where("scim_member_id", "=", only.id);
  }
  if (only.role !== undefined) {
    members = members.where("memberships.role", "=", only.role);
    invited = invited.where("role", "=", only.role);
  }
  const rows: PersonRow[] = [
    ...(await members.execute()).map((row) => ({
      ...row,
      invitation_id: null,
      account_name: row.account_name || null,
    })),
    ...(await invited.execute()).map((row) => ({
      id: row.scim_member_id as string,
      invitation_id: row.invitation_id,
      role: row.role,
      status: row.member_status ?? "active",
      scim_external_id: row.scim_external_id,
      display_name: row.display_name,
      account_name: null,
      email: row.email,
      created_at: row.created_at,
      updated_at: row.updated_at,
    })),
  ];
  return rows.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
}

async function findPerson(ctx: ScimCtx, id: string, db: Db = ctx.deps.db): Promise<PersonRow> {
  const row = isIdOf("mem", id) ? (await people(db, ctx.org.id, { id }))[0] : undefined;
  if (!row) throw new ScimError(404, `no user ${id}`);
  return row;
}

/** The name SCIM shows: the identity provider's for this membership, else the account's, else the address's. */
function nameOf(row: PersonRow): string {
  return row.display_name ?? row.account_name ?? (row.email.split("@")[0] as string);
}

function splitName(name: string): { givenName: string; familyName: string } {
  const [givenName = "", ...rest] = name.trim().split(/\s+/);
  return { givenName, familyName: rest.join(" ") };
}

function toUser(ctx: ScimCtx, row: PersonRow, groups: Map<string, string>) {
  const name = nameOf(row);
  const { givenName, familyName } = splitName(name);
  const groupId = groups.get(row.role);
  return {
    schemas: [USER_SCHEMA],
    id: row.id,
    ...(row.scim_external_id ? { externalId: row.scim_external_id } : {}),
    userName: row.email,
    name: { formatted: name, givenName, familyName },
    displayName: name,
    emails: [{ value: row.email, type: "work", primary: true }],
    active: row.status === "active",
    groups: groupId
      ? [{ value: groupId, display: row.role, $ref: `${scimBaseUrl(ctx.deps, ctx.org.slug)}/Groups/${groupId}` }]
      : [],
    roles: [{ value: row.role, primary: true }],
    meta: {
      resourceType: "User",
      created: row.created_at,
      lastModified: row.updated_at,
      location: `${scimBaseUrl(ctx.deps, ctx.org.slug)}/Users/${row.id}`,
    },
  };
}

async function groupIdsByRole(db: Db, orgId: string): Promise<Map<string, string>> {
  const rows = await db.selectFrom("scim_groups").select(["id", "display_name"]).where("org_id", "=", orgId).execute();
  return new Map(rows.map((row) => [row.display_name, row.id]));
}

function userValues(row: PersonRow, path: string): (string | boolean | null)[] {
  switch (path) {
    case "username":
    case "emails":
    case "emails.value":
      return [row.email];
    case "externalid":
      return [row.scim_external_id];
    case "id":
      return [row.id];
    case "active":
      return [row.status === "active"];
    case "displayname":
    case "name.formatted":
      return [nameOf(row)];
    case "name.givenname":
      return [splitName(nameOf(row)).givenName];
    case "name.familyname":
      return [splitName(nameOf(row)).familyName];
    default:
      return [];
  }
}

function parseListQuery(query: { filter?: string; startIndex?: string; count?: string }) {
  let filter: Filter | undefined;
  if (query.filter !== undefined && query.filter.trim() !== "") {
    try {
      filter = parseFilter(query.filter);
    } catch (error) {
      if (error instanceof InvalidFilterError)
        throw new ScimError(400, `invalid filter: ${error.message}`, "invalidFilter");
      throw error;
    }
  }
  // RFC 7644 §3.4.2.4: a startIndex below 1 is 1, a negative count is 0.
  const startIndex = Math.max(1, Number.parseInt(query.startIndex ?? "1", 10) || 1);
  const count = Math.min(MAX_COUNT, Math.max(0, Number.parseInt(query.count ?? String(MAX_COUNT), 10) || 0));
  return { filter, startIndex, count: query.count === undefined ? MAX_COUNT : count };
}

export async function listUsers(ctx: ScimCtx, query: { filter?: string; startIndex?: string; count?: string }) {
  const { filter, startIndex, count } = parseListQuery(query);
  const rows = await people(ctx.deps.db, ctx.org.id);
  const matching = filter ? rows.filter((row) => matchesFilter(filter, (path) => userValues(row, path))) : rows;
  const groups = await groupIdsByRole(ctx.deps.db, ctx.org.id);
  const page = matching.slice(startIndex - 1, startIndex - 1 + count);
  return listResponse(
    page.map((row) => toUser(ctx, row, groups)),
    matching.length,
    startIndex,
  );
}

export async function getUser(ctx: ScimCtx, id: string) {
  const row = await findPerson(ctx, id);
  return toUser(ctx, row, await groupIdsByRole(ctx.deps.db, ctx.org.id));
}

/** `"False"`, `"true"` (as Entra ID sends them) or a boolean; anything else is refused. */
function booleanOf(value: unknown, field: string): boolean {
  if (typeof value === "boolean") return value;
  if (typeof value === "string" && /^(true|false)$/i.test(value)) return value.toLowerCase() === "true";
  throw new ScimError(400, `${field} must be a boolean`, "invalidValue");
}

function stringOf(value: unknown, field: string): string {
  if (typeof value !== "string") throw new ScimError(400, `${field} must be a string`, "invalidValue");
  if (value.length > 254) throw new ScimError(400, `${field} is too long`, "invalidValue");
  return value;
}

/** What a User resource sets: the e-mail (from userName or the primary e-mail), name, active, externalId. */
interface UserChanges {
  email?: string;
  name?: string;
  givenName?: string;
  familyName?: string;
  active?: boolean;
  externalId?: string | null;
}

function changesOfResource(body: Json): UserChanges {
  const changes: UserChanges = {};
  const userName = body.userName === undefined ? undefined : stringOf(body.userName, "userName").trim();
  const emails = Array.isArray(body.emails) ? (body.emails as Json[]) : [];
  const primary = emails.find((email) => email?.primary === true) ?? emails[0];
  const email =
    userName && EMAIL.test(userName) ? userName : typeof primary?.value === "string" ? primary.value : userName;
  if (email !== undefined) changes.email = email.toLowerCase();
  if (typeof body.name === "object" && body.name !== null) {
    const name = body.name as Json;
    if (typeof name.formatted === "string") changes.name = name.formatted;
    if (typeof name.givenName === "string") changes.givenName = name.givenName;
    if (typeof name.familyName === "string") changes.familyName = name.familyName;
  }
  if (typeof body.displayName === "string" && changes.name === undefined) changes.name = body.displayName;
  if (body.active !== undefined) changes.active = booleanOf(body.active, "active");
  if (body.externalId !== undefined)
    changes.externalId = body.externalId === null ? null : stringOf(body.externalId, "externalId");
  return changes;
}

function nameFrom(changes: UserChanges, current: string): string {
  if (changes.givenName !== undefined || changes.familyName !== undefined) {
    const parts = splitName(current);
    return [changes.givenName ?? parts.givenName, changes.familyName ?? parts.familyName].filter(Boolean).join(" ");
  }
  return changes.name ?? current;
}

/** Whether the org has proven the e-mail's domain (DESIGN §12: its SSO's `emailDomain`, verified by DNS). */
async function inProvenDomain(db: Db, orgId: string, email: string): Promise<boolean> {
  const proven = await db
    .selectFrom("sso_configs")
    .select("org_id")
    .where("org_id", "=", orgId)
    .where("email_domain", "=", email.slice(email.lastIndexOf("@") + 1))
    .where("domain_verified_at", "is not", null)
    .executeTakeFirst();
  return proven !== undefined;
}

/** Who the invitation mail says invited a person SCIM provisioned. */
const SCIM_INVITER = "Your organization's identity provider";

/**
 * Provisions a User, as a viewer (suspended when `active` is false). For an address of the
 * org's proven domain, the account of that e-mail (made, without a password, when there is none)
 * joins the org at once. For any other address the org has no say over the account: the person
 * is invited, by mail, and joins when they accept (as for `POST …/invitations`); meanwhile the
 * invitation is the User (listed, changed and deleted like one). A pending invitation of that
 * address is taken over; a member, or a User already provisioned, is 409 `uniqueness`.
 */
export async function createUser(ctx: ScimCtx, body: Json) {
  const changes = changesOfResource(body);
  if (!changes.email) throw new ScimError(400, "userName is required", "invalidValue");
  if (!EMAIL.test(changes.email))
    throw new ScimError(400, "userName (or a primary e-mail) must be an e-mail address", "invalidValue");
  const email = changes.email;
  const { deps } = ctx;
  const now = deps.clock.now();
  const id = newId("mem", now);
  const displayName = nameFrom(changes, "") || null;
  const status = changes.active === false ? "suspended" : "active";
  const externalId = changes.externalId ?? null;
  const conflict = () => new ScimError(409, `a user with userName ${email} exists`, "uniqueness");
  try {
    await deps.db.transaction().execute(async (trx) => {
      const member = await trx
        .selectFrom("memberships")
        .innerJoin("users", "users.id", "memberships.account_id")
        .select("memberships.id")
        .where("memberships.org_id", "=", ctx.org.id)
        .where("users.email", "=", email)
        .executeTakeFirst();
      if (member) throw conflict();
      const pending = await trx
        .selectFrom("invitations")
        .select(["id", "scim_member_id"])
        .where("org_id", "=", ctx.org.id)
        .where("email", "=", email)
        .where("status", "=", "pending")
        .executeTakeFirst();
      if (pending?.scim_member_id) throw conflict();
      const audit = (action: string, target: { type: string; id: string }) =>
        recordAuditAs(trx, deps, actorOf(ctx), ctx.ip, {
          orgId: ctx.org.id,
          action,
          target,
          data: { email, role: DEFAULT_ROLE, active: status === "active" },
        });
      if (pending) {
        await trx
          .updateTable("invitations")
          .set({
            scim_member_id: id,
            scim_external_id: externalId,
            display_name: displayName,
            member_status: status,
            updated_at: now.toISOString(),
          })
          .where("id", "=", pending.id)
          .execute();
        await audit("invitation.provisioned", { type: "invitation", id: pending.id });
        return;
      }
      if (!(await inProvenDomain(trx, ctx.org.id, email))) {
        const invitationId = newId("inv", now);
        await writeInvitation(trx, deps, {
          id: invitationId,
          orgId: ctx.org.id,
          email,
          role: DEFAULT_ROLE,
          invitedBy: null,
          inviter: SCIM_INVITER,
          scim: { memberId: id, externalId, displayName, memberStatus: status },
        });
        await audit("member.invited", { type: "invitation", id: invitationId });
        return;
      }
      const account = await trx.selectFrom("users").select("id").where("email", "=", email).executeTakeFirst();
      let accountId = account?.id;
      if (accountId === undefined) {
        accountId = await createIdentityAccount(trx, deps, ctx.org.id, {
          email,
          name: displayName ?? (email.split("@")[0] as string),
          emailVerified: false,
        });
      } else {
        await rememberIdentity(trx, deps, ctx.org.id, accountId);
      }
      await trx
        .insertInto("memberships")
        .values({
          id,
          org_id: ctx.org.id,
          account_id: accountId,
          role: DEFAULT_ROLE,
          status,
          scim_external_id: externalId,
          display_name: displayName,
          created_at: now.toISOString(),
          updated_at: now.toISOString(),
        })
        .execute();
      await audit("member.provisioned", { type: "member", id });
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict();
    throw error;
  }
  return getUser(ctx, id);
}

/** Refuses changes to an owner's membership: owners are managed in Plinth (the break-glass). */
function assertNotOwner(row: PersonRow): void {
  if (row.role === "owner")
    throw new ScimError(400, "an owner's membership is managed in Plinth, not through SCIM", "mutability");
}

/**
 * Applies a User's changes: its status, externalId and the name the identity provider gives the
 * person here (the membership's display name: an account's own name is its holder's to change).
 */
async function applyUserChanges(ctx: ScimCtx, row: PersonRow, changes: UserChanges) {
  const { deps } = ctx;
  if (changes.email !== undefined && changes.email !== row.email.toLowerCase()) {
    throw new ScimError(400, "userName cannot change: it is the member's account e-mail", "mutability");
  }
  const status = changes.active === undefined ? row.status : changes.active ? "active" : "suspended";
  if (status !== row.status) assertNotOwner(row);
  const name = nameFrom(changes, nameOf(row));
  const displayName = name === nameOf(row) ? row.display_name : name || null;
  const externalId = changes.externalId === undefined ? row.scim_external_id : changes.externalId;
  const now = deps.clock.now().toISOString();
  await deps.db.transaction().execute(async (trx) => {
    if (row.invitation_id) {
      await trx
        .updateTable("invitations")
        .set({ member_status: status, scim_external_id: externalId, display_name: displayName, updated_at: now })
        .where("id", "=", row.invitation_id)
        .execute();
    } else {
      await trx
        .updateTable("memberships")
        .set({ status, scim_external_id: externalId, display_name: displayName, updated_at: now })
        .where("id", "=", row.id)
        .execute();
    }
    const action =
      status === row.status ? "member.updated" : status === "active" ? "member.reactivated" : "member.suspended";
    await recordAuditAs(trx, deps, actorOf(ctx), ctx.ip, {
      orgId: ctx.org.id,
      action,
      target: row.invitation_id ? { type: "invitation", id: row.invitation_id } : { type: "member", id: row.id },
      data: {
        email: row.email,
        ...(status !== row.status ? { status } : {}),
        ...(displayName !== row.display_name ? { displayName } : {}),
      },
    });
  });
  return getUser(ctx, row.id);
}

export async function replaceUser(ctx: ScimCtx, id: string, body: Json) {
  const row = await findPerson(ctx, id);
  const changes = changesOfResource(body);
  // A replacement without `active` leaves the member active (RFC 7644 §3.5.1: unset attributes are cleared to their default).
  return applyUserChanges(ctx, row, { ...changes, active: changes.active ?? true });
}

interface PatchOperation {
  op: string;
  path?: string;
  value?: unknown;
}

function patchOperations(body: Json): PatchOperation[] {
  const operations = body.Operations ?? body.operations;
  if (!Array.isArray(operations) || operations.length === 0) {
    throw new ScimError(400, "a PATCH needs Operations", "invalidSyntax");
  }
  return operations.map((operation: unknown) => {
    if (typeof operation !== "object" || operation === null)
      throw new ScimError(400, "an operation must be an object", "invalidSyntax");
    const { op, path, value } = operation as Json;
    if (typeof op !== "string" || !/^(add|replace|remove)$/i.test(op)) {
      throw new ScimError(400, `op must be add, replace or remove`, "invalidSyntax");
    }
    if (path !== undefined && typeof path !== "string")
      throw new ScimError(400, "path must be a string", "invalidPath");
    return { op: op.toLowerCase(), ...(path !== undefined ? { path } : {}), value };
  });
}

/** A path-less value (`{active: false}`, `{"name.givenName": "Ann"}`) as a User resource. */
function resourceOfValue(value: unknown): Json {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ScimError(400, "an operation without a path needs an object value", "invalidValue");
  }
  const resource: Json = {};
  for (const [key, item] of Object.entries(value as Json)) {
    const dotted = /^name\.(givenName|familyName|formatted)$/i.exec(key);
    if (dotted) {
      const field =
        (dotted[1] as string).toLowerCase() === "givenname"
          ? "givenName"
          : (dotted[1] as string).toLowerCase() === "familyname"
            ? "familyName"
            : "formatted";
      resource.name = { ...((resource.name as Json) ?? {}), [field]: item };
    } else {
      resource[key] = item;
    }
  }
  return resource;
}

/** One attribute path of a User set to `value`, as a partial resource; unknown attributes are ignored (RFC 7644 §3.5.2). */
function resourceOfPath(path: string, value: unknown): Json {
  const lower = path.toLowerCase();
  if (lower === "active") return { active: value };
  if (lower === "externalid") return { externalId: value };
  if (lower === "displayname") return { displayName: value };
  if (lower === "username") return { userName: value };
  if (lower === "name") return { name: value };
  if (lower === "name.givenname") return { name: { givenName: value } };
  if (lower === "name.familyname") return { name: { familyName: value } };
  if (lower === "name.formatted") return { name: { formatted: value } };
  return {};
}

export async function patchUser(ctx: ScimCtx, id: string, body: Json) {
  const row = await findPerson(ctx, id);
  const changes: UserChanges = {};
  for (const operation of patchOperations(body)) {
    if (operation.op === "remove") {
      if (operation.path?.toLowerCase() === "externalid") changes.externalId = null;
      continue;
    }
    const resource = operation.path
      ? resourceOfPath(operation.path, operation.value)
      : resourceOfValue(operation.value);
    Object.assign(changes, changesOfResource(resource));
  }
  return applyUserChanges(ctx, row, changes);
}

/** Deprovisions: the membership goes (the account stays: it may belong to other orgs), or the invitation is revoked. */
export async function deleteUser(ctx: ScimCtx, id: string): Promise<void> {
  const row = await findPerson(ctx, id);
  assertNotOwner(row);
  await ctx.deps.db.transaction().execute(async (trx) => {
    if (row.invitation_id) {
      await trx
        .updateTable("invitations")
        .set({ status: "revoked", updated_at: ctx.deps.clock.now().toISOString() })
        .where("id", "=", row.invitation_id)
        .execute();
    } else {
      await trx.deleteFrom("memberships").where("id", "=", row.id).execute();
    }
    await recordAuditAs(trx, ctx.deps, actorOf(ctx), ctx.ip, {
      orgId: ctx.org.id,
      action: row.invitation_id ? "invitation.revoked" : "member.deprovisioned",
      target: row.invitation_id ? { type: "invitation", id: row.invitation_id } : { type: "member", id: row.id },
      data: { email: row.email, role: row.role },
    });
  });
}

// --- Groups: a group is a role, its members the members who hold it ------------------------------

interface GroupRow {
  id: string;
  display_name: string;
  external_id: string | null;
  created_at: string;
  updated_at: string;
}

async function findGroup(ctx: ScimCtx, id: string, db: Db = ctx.deps.db): Promise<GroupRow> {
  const row = isIdOf("grp", id)
    ? await db
        .selectFrom("scim_groups")
        .selectAll()
        .where("org_id", "=", ctx.org.id)
        .where("id", "=", id)
        .executeTakeFirst()
    : undefined;
  if (!row) throw new ScimError(404, `no group ${id}`);
  return row;
}

async function toGroup(ctx: ScimCtx, row: GroupRow, withMembers = true) {
  const members = withMembers ? await people(ctx.deps.db, ctx.org.id, { role: row.display_name }) : [];
  const base = scimBaseUrl(ctx.deps, ctx.org.slug);
  return {
    schemas: [GROUP_SCHEMA],
    id: row.id,
    displayName: row.display_name,
    ...(row.external_id ? { externalId: row.external_id } : {}),
    ...(withMembers
      ? {
          members: members.map((member) => ({
            value: member.id,
            display: member.email,
            $ref: `${base}/Users/${member.id}`,
          })),
        }
      : {}),
    meta: {
      resourceType: "Group",
      created: row.created_at,
      lastModified: row.updated_at,
      location: `${base}/Groups/${row.id}`,
    },
  };
}

function roleOf(displayName: unknown): (typeof GROUP_ROLES)[number] {
  const name = typeof displayName === "string" ? displayName.trim().toLowerCase() : "";
  const role = GROUP_ROLES.find((candidate) => candidate === name);
  if (!role) throw new ScimError(400, `displayName must be a role: ${GROUP_ROLES.join(", ")}`, "invalidValue");
  return role;
}

function memberIdsOf(value: unknown): string[] {
  const list = Array.isArray(value) ? value : value === undefined || value === null ? [] : [value];
  return list.map((item) => {
    const id = typeof item === "object" && item !== null ? (item as Json).value : item;
    if (typeof id !== "string") throw new ScimError(400, "members must be objects with a value", "invalidValue");
    return id;
  });
}

/** Sets a User's role (an invited one's too), with its audit row; owners keep theirs. */
async function changeRole(trx: Db, ctx: ScimCtx, row: PersonRow, role: string): Promise<void> {
  if (row.role === "owner" || row.role === role) return;
  const updated_at = ctx.deps.clock.now().toISOString();
  if (row.invitation_id) {
    await trx.updateTable("invitations").set({ role, updated_at }).where("id", "=", row.invitation_id).execute();
  } else {
    await trx.updateTable("memberships").set({ role, updated_at }).where("id", "=", row.id).execute();
  }
  await recordAuditAs(trx, ctx.deps, actorOf(ctx), ctx.ip, {
    orgId: ctx.org.id,
    action: "member.role_changed",
    target: { type: "member", id: row.id },
    data: { email: row.email, from: row.role, to: role },
  });
}

/** The User of `id` in this org, or undefined. */
function personOrNone(trx: Db, ctx: ScimCtx, id: string): Promise<PersonRow | undefined> {
  return findPerson(ctx, id, trx).catch(() => undefined);
}

/** Gives `ids` the group's role (owners keep theirs); unknown ids are 400 `invalidValue`. */
async function setRole(trx: Db, ctx: ScimCtx, ids: string[], role: string): Promise<void> {
  for (const id of ids) {
    const row = await personOrNone(trx, ctx, id);
    if (!row) throw new ScimError(400, `no user ${id} to add to the group`, "invalidValue");
    await changeRole(trx, ctx, row, role);
  }
}

/** Takes the group's role away from `ids` (they become viewers); members without it are left as they are. */
async function dropRole(trx: Db, ctx: ScimCtx, ids: string[], role: string): Promise<void> {
  for (const id of ids) {
    const row = await personOrNone(trx, ctx, id);
    if (row?.role === role) await changeRole(trx, ctx, row, DEFAULT_ROLE);
  }
}

/** Makes `ids` exactly the group's members: the others holding its role lose it. */
async function replaceMembers(trx: Db, ctx: ScimCtx, group: GroupRow, ids: string[]): Promise<void> {
  const wanted = new Set(ids);
  const current = await people(trx, ctx.org.id, { role: group.display_name });
  const leaving = current.map((member) => member.id).filter((memberId) => !wanted.has(memberId));
  await dropRole(trx, ctx, leaving, group.display_name);
  await setRole(trx, ctx, ids, group.display_name);
}

export async function listGroups(
  ctx: ScimCtx,
  query: { filter?: string; startIndex?: string; count?: string; excludedAttributes?: string },
) {
  const { filter, startIndex, count } = parseListQuery(query);
  const rows = await ctx.deps.db
    .selectFrom("scim_groups")
    .selectAll()
    .where("org_id", "=", ctx.org.id)
    .orderBy("created_at")
    .orderBy("id")
    .execute();
  const valuesOf = (row: GroupRow, path: string) =>
    path === "displayname"
      ? [row.display_name]
      : path === "externalid"
        ? [row.external_id]
        : path === "id"
          ? [row.id]
          : [];
  const matching = filter ? rows.filter((row) => matchesFilter(filter, (path) => valuesOf(row, path))) : rows;
  const withMembers = !/(^|,)\s*members\s*(,|$)/i.test(query.excludedAttributes ?? "");
  const page = matching.slice(startIndex - 1, startIndex - 1 + count);
  return listResponse(
    await Promise.all(page.map((row) => toGroup(ctx, row, withMembers))),
    matching.length,
    startIndex,
  );
}

export async function getGroup(ctx: ScimCtx, id: string, excludedAttributes?: string) {
  return toGroup(ctx, await findGroup(ctx, id), !/(^|,)\s*members\s*(,|$)/i.test(excludedAttributes ?? ""));
}

export async function createGroup(ctx: ScimCtx, body: Json) {
  const role = roleOf(body.displayName);
  const members = memberIdsOf(body.members);
  const now = ctx.deps.clock.now().toISOString();
  const id = newId("grp", ctx.deps.clock.now());
  try {
    await ctx.deps.db.transaction().execute(async (trx) => {
      await trx
        .insertInto("scim_groups")
        .values({
          id,
          org_id: ctx.org.id,
          display_name: role,
          external_id: typeof body.externalId === "string" ? body.externalId : null,
          created_at: now,
          updated_at: now,
        })
        .execute();
      await recordAuditAs(trx, ctx.deps, actorOf(ctx), ctx.ip, {
        orgId: ctx.org.id,
        action: "scim_group.created",
        target: { type: "scim_group", id },
        data: { displayName: role },
      });
      await setRole(trx, ctx, members, role);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new ScimError(409, `a group named ${role} exists`, "uniqueness");
    throw error;
  }
  return getGroup(ctx, id);
}

export async function replaceGroup(ctx: ScimCtx, id: string, body: Json) {
  const group = await findGroup(ctx, id);
  if (body.displayName !== undefined && roleOf(body.displayName) !== group.display_name) {
    throw new ScimError(400, "a group's displayName (its role) cannot change", "mutability");
  }
  const members = memberIdsOf(body.members);
  await ctx.deps.db.transaction().execute(async (trx) => {
    await replaceMembers(trx, ctx, group, members);
    await touchGroup(trx, ctx, group, body.externalId);
  });
  return getGroup(ctx, id);
}

async function touchGroup(trx: Db, ctx: ScimCtx, group: GroupRow, externalId: unknown): Promise<void> {
  await trx
    .updateTable("scim_groups")
    .set({
      updated_at: ctx.deps.clock.now().toISOString(),
      ...(typeof externalId === "string" ? { external_id: externalId } : {}),
    })
    .where("id", "=", group.id)
    .execute();
}

/** `members[value eq "mem_…"]` → that id. */
function memberOfPath(path: string): string | null {
  return /^members\s*\[\s*value\s+eq\s+"([^"]+)"\s*\]$/i.exec(path.trim())?.[1] ?? null;
}

export async function patchGroup(ctx: ScimCtx, id: string, body: Json) {
  const group = await findGroup(ctx, id);
  const operations = patchOperations(body);
  await ctx.deps.db.transaction().execute(async (trx) => {
    for (const operation of operations) {
      const path = operation.path?.trim() ?? "";
      const lower = path.toLowerCase();
      if (lower === "members" || (path === "" && operation.op !== "remove" && typeof operation.value === "object")) {
        const value = lower === "members" ? operation.value : (operation.value as Json).members;
        if (path === "" && (operation.value as Json).displayName !== undefined) {
          if (roleOf((operation.value as Json).displayName) !== group.display_name) {
            throw new ScimError(400, "a group's displayName (its role) cannot change", "mutability");
          }
        }
        if (value === undefined) continue;
        const ids = memberIdsOf(value);
        if (operation.op === "remove") await dropRole(trx, ctx, ids, group.display_name);
        else if (operation.op === "add") await setRole(trx, ctx, ids, group.display_name);
        else await replaceMembers(trx, ctx, group, ids);
      } else if (memberOfPath(path)) {
        if (operation.op !== "remove")
          throw new ScimError(400, "only remove takes a member filter path", "invalidPath");
        await dropRole(trx, ctx, [memberOfPath(path) as string], group.display_name);
      } else if (lower === "displayname") {
        if (roleOf(operation.value) !== group.display_name) {
          throw new ScimError(400, "a group's displayName (its role) cannot change", "mutability");
        }
      } else if (lower === "externalid") {
        await touchGroup(trx, ctx, group, operation.value);
      } else if (operation.op === "remove" && lower === "") {
        throw new ScimError(400, "remove needs a path", "noTarget");
      }
    }
    await touchGroup(trx, ctx, group, undefined);
  });
  return getGroup(ctx, id);
}

/** Deletes the group; its members lose its role (they become viewers). */
export async function deleteGroup(ctx: ScimCtx, id: string): Promise<void> {
  const group = await findGroup(ctx, id);
  await ctx.deps.db.transaction().execute(async (trx) => {
    const members = await people(trx, ctx.org.id, { role: group.display_name });
    await dropRole(
      trx,
      ctx,
      members.map((member) => member.id),
      group.display_name,
    );
    await trx.deleteFrom("scim_groups").where("id", "=", group.id).execute();
    await recordAuditAs(trx, ctx.deps, actorOf(ctx), ctx.ip, {
      orgId: ctx.org.id,
      action: "scim_group.deleted",
      target: { type: "scim_group", id: group.id },
      data: { displayName: group.display_name },
    });
  });
}
