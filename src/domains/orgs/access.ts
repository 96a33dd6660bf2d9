import { sql } from "kysely";
import { preparedRead } from "../../db/compiled.ts";
import type { Db } from "../../db/database.ts";
import type { Deps } from "../../deps.ts";
import { ForbiddenError, NotFoundError } from "../../errors.ts";
import type { KeyScope, Principal } from "../../http/principal.ts";
import type { OrgCtx } from "../context.ts";
import { ORG_COLUMNS, type OrgRow } from "./records.ts";

export const ROLES = ["owner", "admin", "developer", "viewer"] as const;
export type Role = (typeof ROLES)[number];

const RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2, owner: 3 };

export function hasRole(role: Role, atLeast: Role): boolean {
  return RANK[role] >= RANK[atLeast];
}

/**
 * What an operation touches, which decides the API key scopes that may perform it:
 * `read` any scope; `lifecycle` deploy and full (project lifecycle, backups, branches, deploys);
 * `admin` full only; `owner` no key at all (owner-only actions need a signed-in owner).
 */
type Access = "read" | "lifecycle" | "admin" | "owner";

const SCOPE_ALLOWS: Record<KeyScope, ReadonlySet<Access>> = {
  "read-only": new Set(["read"]),
  deploy: new Set(["read", "lifecycle"]),
  full: new Set(["read", "lifecycle", "admin"]),
};

interface Permission {
  role: Role;
  access: Access;
}

/** The role matrix (DESIGN §4). Every org-scoped operation names one of these. */
const PERMISSIONS = {
  "org:read": { role: "viewer", access: "read" },
  "org:update": { role: "admin", access: "admin" },
  "org:delete": { role: "owner", access: "owner" },
  "org:export": { role: "admin", access: "admin" },
  "members:read": { role: "viewer", access: "read" },
  "members:manage": { role: "admin", access: "admin" },
  "api_keys:read": { role: "viewer", access: "read" },
  "api_keys:manage": { role: "admin", access: "admin" },
  "audit:read": { role: "admin", access: "read" },
  "projects:read": { role: "viewer", access: "read" },
  "projects:lifecycle": { role: "developer", access: "lifecycle" },
  "projects:delete": { role: "admin", access: "admin" },
  "projects:credentials": { role: "admin", access: "admin" },
  // Developers, and full keys: not in a deploy key's scope (DESIGN §4).
  "domains:manage": { role: "developer", access: "admin" },
  "alarms:manage": { role: "developer", access: "admin" },
  "webhooks:read": { role: "viewer", access: "read" },
  "webhooks:manage": { role: "admin", access: "admin" },
  "integrations:read": { role: "viewer", access: "read" },
  "integrations:manage": { role: "admin", access: "admin" },
  // Admins only (DESIGN §11); any key may read, as the audit log.
  "billing:read": { role: "admin", access: "read" },
  "billing:manage": { role: "admin", access: "admin" },
  "scim:manage": { role: "admin", access: "admin" },
  "sso:manage": { role: "admin", access: "admin" },
} as const satisfies Record<string, Permission>;

export type PermissionName = keyof typeof PERMISSIONS;

/** A caller's standing in one org: the org, the caller's role there, and who the caller is. */
export interface OrgAccess {
  org: OrgRow;
  role: Role;
  principal: Principal;
}

/** API keys act as role admin, narrowed by their scope. */
const KEY_ROLE: Role = "admin";

/**
 * The org by slug with the account's role in it, on the path of every account request on an
 * org. Read afresh each time: a role change or a removal counts from the next request.
 */
const findMembership = preparedRead<OrgRow & { member_role: string }>("plinth_org_membership", (db) =>
  db
    .selectFrom("orgs")
    .innerJoin("memberships", "memberships.org_id", "orgs.id")
    .select(ORG_COLUMNS.map((column) => `orgs.${column}` as const))
    .select("memberships.role as member_role")
    .where("orgs.slug", "=", "?")
    .where("orgs.deleted_at", "is", null)
    .where("memberships.account_id", "=", "?")
    // A suspended member (SCIM) is no member until reactivated.
    .where("memberships.status", "=", sql.lit("active")),
);

/**
 * Finds the org by slug as the caller sees it. An org the caller does not belong to, a deleted
 * org, and an org other than an API key's own all answer 404, so existence never leaks.
 */
export async function resolveOrgAccess(deps: Deps, principal: Principal, slug: string): Promise<OrgAccess> {
  if (principal.type === "api_key") {
    if (principal.org.slug !== slug || principal.org.deleted_at !== null) throw orgNotFound();
    return { org: principal.org, role: KEY_ROLE, principal };
  }
  const row = await findMembership(deps, slug, principal.accountId);
  if (!row) throw orgNotFound();
  const { member_role, ...org } = row;
  return { org, role: member_role as Role, principal };
}

export function orgNotFound(): NotFoundError {
  return new NotFoundError("organization not found");
}

/** Whether an API key of `scope` may perform an operation needing `permission` (keys act as admin). */
export function scopeAllows(scope: KeyScope, permission: PermissionName): boolean {
  const rule: Permission = PERMISSIONS[permission];
  return SCOPE_ALLOWS[scope].has(rule.access) && hasRole(KEY_ROLE, rule.role);
}

/** Throws 403 unless the caller's role and (for keys) scope allow the operation. */
export function authorize(access: OrgAccess, permission: PermissionName): void {
  const rule: Permission = PERMISSIONS[permission];
  if (access.principal.type === "api_key") {
    if (!SCOPE_ALLOWS[access.principal.scope].has(rule.access)) {
      throw new ForbiddenError(
        rule.access === "owner"
          ? "this operation needs a signed-in owner; API keys cannot perform it"
          : `API key scope '${access.principal.scope}' does not allow this operation`,
      );
    }
  }
  if (!hasRole(access.role, rule.role)) {
    throw new ForbiddenError(`this operation needs the ${rule.role} role or higher`);
  }
}

/**
 * Runs a change to an org's data in a transaction that first makes sure the org still exists: it
 * was read when the request began, and a delete may have committed since (404 then). On
 * PostgreSQL the org row is share-locked before anything else, so a change and a delete of its
 * org always take their locks in one order (org first) and run one after the other: the delete
 * sees what the change wrote (a new project, say) and removes it with the org. SQLite runs one
 * transaction at a time, and the read sees any delete that came first.
 */
export function inOrgTransaction<T>(
  ctx: OrgCtx,
  work: (trx: Db) => Promise<T>,
  options: { exclusive?: boolean } = {},
): Promise<T> {
  return ctx.deps.db.transaction().execute(async (trx) => {
    let live = trx.selectFrom("orgs").select("id").where("id", "=", ctx.org.id).where("deleted_at", "is", null);
    // `exclusive`: changes that run one at a time per org (membership changes, choosing a
    // project's slug) or update the org row take the row lock at once: two of them holding a
    // share lock and each waiting to upgrade it would deadlock.
    if (ctx.deps.dialect === "postgres") live = options.exclusive ? live.forUpdate() : live.forShare();
    if (!(await live.executeTakeFirst())) throw orgNotFound();
    return work(trx);
  });
}
