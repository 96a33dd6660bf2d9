import type { Context, MiddlewareHandler } from "hono";
import type { Deps } from "../deps.ts";
import type { Ctx, OrgCtx } from "../domains/context.ts";
import { authorize, type OrgAccess, type PermissionName, resolveOrgAccess } from "../domains/orgs/access.ts";
import type { AppEnv } from "./context.ts";
import { requirePrincipal } from "./principal.ts";

/** The service context of an authenticated request (401 without credentials). */
export function callerCtx(c: Context<AppEnv>, deps: Deps): Ctx {
  return { deps, principal: requirePrincipal(c), ip: c.get("clientIp") };
}

/** The service context of an authenticated request on org `slug` (404 unless the caller sees it). */
export async function orgCtx(c: Context<AppEnv>, deps: Deps, slug: string): Promise<OrgCtx> {
  const ctx = callerCtx(c, deps);
  const checked = c.get("orgAccess");
  return { ...ctx, ...(checked?.org.slug === slug ? checked : await resolveOrgAccess(deps, ctx.principal, slug)) };
}

/**
 * Route middleware for an operation on org `{slug}` that takes a body or query, or is a POST: the
 * caller must see the org (404) and hold `permission` there (403) before the input is validated
 * and before `Idempotency-Key` is looked at, so a viewer learns that the operation is not theirs,
 * not what its body lacks. The access found is kept for `orgCtx`, which then does not look it up
 * again; the service still authorizes, and checks what depends on the input (granting the owner
 * role, say).
 */
export function requires(
  deps: Deps,
  permission: PermissionName,
): MiddlewareHandler<AppEnv> & { permission: PermissionName } {
  const middleware: MiddlewareHandler<AppEnv> = async (c, next) => {
    const slug = c.req.param("slug") ?? "";
    // Found already when the request carries an Idempotency-Key (checked before the key is looked at).
    const checked = c.get("orgAccess");
    const access: OrgAccess =
      checked?.org.slug === slug ? checked : await resolveOrgAccess(deps, requirePrincipal(c), slug);
    authorize(access, permission);
    c.set("orgAccess", access);
    await next();
  };
  // Named on the middleware, so that what runs before it (Idempotency-Key) can check it first.
  return Object.assign(middleware, { permission });
}
