import type { Context } from "hono";
import type { OrgRow } from "../domains/orgs/records.ts";
import { ForbiddenError, UnauthorizedError } from "../errors.ts";
import type { AppEnv } from "./context.ts";

export type KeyScope = "full" | "deploy" | "read-only";

export interface AccountPrincipal {
  type: "account";
  accountId: string;
  email: string;
  name: string | null;
}

export interface ApiKeyPrincipal {
  type: "api_key";
  keyId: string;
  scope: KeyScope;
  mcpTools: string[] | null;
  /** The key's org, read in the same query that authenticated the key. */
  org: OrgRow;
}

export type Principal = AccountPrincipal | ApiKeyPrincipal;

/** The caller, or 401 when the request carried no usable credentials. */
export function requirePrincipal(c: Context<AppEnv>): Principal {
  const principal = c.get("principal");
  if (!principal) throw c.get("authError") ?? new UnauthorizedError();
  return principal;
}

/** The signed-in account; API keys are refused with 403 on account-level operations. */
export function requireAccount(c: Context<AppEnv>): AccountPrincipal {
  const principal = requirePrincipal(c);
  if (principal.type !== "account") {
    throw new ForbiddenError("this operation needs a signed-in account; API keys cannot perform it");
  }
  return principal;
}

export function actorOf(principal: Principal): { type: string; id: string; email: string | null } {
  return principal.type === "account"
    ? { type: "account", id: principal.accountId, email: principal.email }
    : { type: "api_key", id: principal.keyId, email: null };
}
