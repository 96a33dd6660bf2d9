import type { Context } from "hono";
import type { ConsoleSessions } from "../auth/console-sessions.ts";
import type { Deps } from "../deps.ts";
import { authenticateApiKey } from "../domains/api-keys/service.ts";
import { AppError, UnauthorizedError } from "../errors.ts";
import type { AppEnv } from "./context.ts";
import { inProcessCall } from "./in-process.ts";

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Works out who is calling: a `pak_` bearer key or a better-auth session cookie, and sets
 * `principal`. A bad credential is remembered (`authError`) rather than thrown, so the request is
 * still rate-limited (by address) and the error surfaces only on operations that need a caller.
 * Returns nothing when it knows the caller at once (no credentials, or a session read moments
 * ago), so that path costs no await.
 */
export function identifyCaller(deps: Deps, sessions: ConsoleSessions, c: Context<AppEnv>): Promise<void> | undefined {
  const call = inProcessCall(c);
  if (call) {
    c.set("principal", call.principal);
    return undefined;
  }
  const authorization = c.req.header("authorization");
  if (authorization) {
    const token = BEARER.exec(authorization)?.[1];
    if (!token) {
      c.set("authError", new UnauthorizedError("the Authorization header must be 'Bearer <token>'"));
      return undefined;
    }
    return remember(
      c,
      authenticateApiKey(deps, token, c.get("clientIp")).then((p) => c.set("principal", p)),
    );
  }
  const account = sessions.accountOf(c);
  if (account instanceof Promise) {
    return remember(
      c,
      account.then((principal) => {
        if (principal) c.set("principal", principal);
      }),
    );
  }
  if (account) c.set("principal", account);
  return undefined;
}

function remember(c: Context<AppEnv>, identifying: Promise<void>): Promise<void> {
  return identifying.catch((error: unknown) => {
    if (!(error instanceof AppError)) throw error;
    c.set("authError", error);
  });
}
