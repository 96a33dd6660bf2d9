import type { MiddlewareHandler } from "hono";
import type { Auth } from "../auth/better-auth.ts";
import type { Deps } from "../deps.ts";
import { authenticateApiKey } from "../domains/api-keys/service.ts";
import type { AppEnv } from "./context.ts";
import { AppError, UnauthorizedError } from "./errors.ts";

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Works out who is calling: a `pak_` bearer key or a better-auth session cookie. A bad credential
 * is remembered rather than thrown, so the request is still rate-limited (by address) and the
 * error surfaces only on operations that need a caller.
 */
export function identify(deps: Deps, auth: Auth): MiddlewareHandler<AppEnv> {
  const sessionCookie = `${deps.config.cookiePrefix}.session_token`;
  return async (c, next) => {
    const authorization = c.req.header("authorization");
    try {
      if (authorization) {
        const token = BEARER.exec(authorization)?.[1];
        if (!token) throw new UnauthorizedError("the Authorization header must be 'Bearer <token>'");
        c.set("principal", await authenticateApiKey(deps, token, c.get("clientIp")));
      } else if (c.req.header("cookie")?.includes(sessionCookie)) {
        const session = await auth.api.getSession({ headers: c.req.raw.headers });
        if (session) {
          c.set("principal", {
            type: "account",
            accountId: session.user.id,
            email: session.user.email,
            name: session.user.name || null,
          });
        }
      }
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      c.set("authError", error);
    }
    await next();
  };
}
