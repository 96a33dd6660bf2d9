import type { Context } from "hono";
import type { AppEnv } from "../../../http/context.ts";
import { isPublic, type Security } from "../../../http/operations.ts";
import { errorResponses } from "../../../http/router.ts";
import type { WorkspaceCtx } from "../access.ts";

// Who may call a workspace operation is what its OpenAPI `security` says: the workspace
// middleware (index.ts) reads it back for the operation a request was routed to.

/** The workspace admin: its admin token, or an org admin's API key or session. */
export const adminOnly: Security = [{ adminToken: [] }, { apiKey: [] }, { sessionCookie: [] }];
/** The admin, and signed-in workspace users. */
export const adminsAndUsers: Security = [{ adminToken: [] }, { userToken: [] }, { apiKey: [] }, { sessionCookie: [] }];
/** A signed-in workspace user only. */
export const usersOnly: Security = [{ userToken: [] }];

/** Who an operation admits; `caller`: any credentials (a path that is no operation, answered 404 or 405). */
export type Admits = "anyone" | "caller" | "user" | "member" | "admin";

export function admitsOf(security: Security | undefined): Admits {
  if (security === undefined) return "caller";
  if (isPublic(security)) return "anyone";
  const names = (scheme: string) => security.some((requirement) => scheme in requirement);
  if (!names("adminToken")) return "user";
  return names("userToken") ? "member" : "admin";
}

export type WorkspaceEnv = AppEnv & { Variables: { workspace: WorkspaceCtx } };

/** The workspace a request acts on, opened by the middleware once the caller was admitted. */
export const workspaceOf = (c: Context<WorkspaceEnv>): WorkspaceCtx => c.get("workspace");

export const tags = ["Workspace"];
export const errors = errorResponses(400, 401, 403, 404, 409, 413, 422, 429);
