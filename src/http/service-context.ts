import type { Context } from "hono";
import type { Deps } from "../deps.ts";
import type { Ctx, OrgCtx } from "../domains/context.ts";
import { resolveOrgAccess } from "../domains/orgs/access.ts";
import type { AppEnv } from "./context.ts";
import { requirePrincipal } from "./principal.ts";

/** The service context of an authenticated request (401 without credentials). */
export function callerCtx(c: Context<AppEnv>, deps: Deps): Ctx {
  return { deps, principal: requirePrincipal(c), ip: c.get("clientIp") };
}

/** The service context of an authenticated request on org `slug` (404 unless the caller sees it). */
export async function orgCtx(c: Context<AppEnv>, deps: Deps, slug: string): Promise<OrgCtx> {
  const ctx = callerCtx(c, deps);
  return { ...ctx, ...(await resolveOrgAccess(deps, ctx.principal, slug)) };
}
