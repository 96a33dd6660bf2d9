import type { Deps } from "../../deps.ts";
import { ForbiddenError, NotFoundError } from "../../http/errors.ts";
import type { KeyScope, Principal } from "../../http/principal.ts";
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
export const PERMISSIONS = {
  "org:read": { role: "viewer", access: "read" },
  "org:update": { role: "admin", access: "admin" },
  "org:delete": { role: "owner", access: "owner" },
  "members:read": { role: "viewer", access: "read" },
  "members:manage": { role: "admin", access: "admin" },
  "api_keys:read": { role: "viewer", access: "read" },
  "api_keys:manage": { role: "admin", access: "admin" },
  "audit:read": { role: "admin", access: "read" },
  "projects:read": { role: "viewer", access: "read" },
  "projects:lifecycle": { role: "developer", access: "lifecycle" },
  "projects:delete": { role: "admin", access: "admin" },
  "projects:credentials": { role: "admin", access: "admin" },
  "webhooks:read": { role: "viewer", access: "read" },
  "webhooks:manage": { role: "admin", access: "admin" },
  "integrations:read": { role: "viewer", access: "read" },
  "integrations:manage": { role: "admin", access: "admin" },
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
 * Finds the org by slug as the caller sees it. An org the caller does not belong to, a deleted
 * org, and an org other than an API key's own all answer 404, so existence never leaks.
 */
export async function resolveOrgAccess(deps: Deps, principal: Principal, slug: string): Promise<OrgAccess> {
  if (principal.type === "api_key") {
    if (principal.org.slug !== slug || principal.org.deleted_at !== null) throw orgNotFound();
    return { org: principal.org, role: KEY_ROLE, principal };
  }
  const row = await deps.db
    .selectFrom("orgs")
    .innerJoin("memberships", "memberships.org_id", "orgs.id")
    .select(ORG_COLUMNS.map((column) => `orgs.${column}` as const))
    .select("memberships.role as member_role")
    .where("orgs.slug", "=", slug)
    .where("orgs.deleted_at", "is", null)
    .where("memberships.account_id", "=", principal.accountId)
    .executeTakeFirst();
  if (!row) throw orgNotFound();
  const { member_role, ...org } = row;
  return { org, role: member_role as Role, principal };
}

export function orgNotFound(): NotFoundError {
  return new NotFoundError("organization not found");
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
