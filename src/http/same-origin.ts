import type { Context } from "hono";
import { ForbiddenError } from "../errors.ts";
import type { AppEnv } from "./context.ts";

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * Cross-site request forgery guard for cookie-authenticated writes. Browsers send `Origin` on
 * cross-origin writes, so a write that carries the session cookie and an `Origin` (or, lacking
 * it, a `Referer`) of another site is refused, and so is one a browser marks as sent from
 * another site (`Sec-Fetch-Site`), with or without an Origin. Requests with none of these come
 * from non-browser clients (curl, CI), which a forged cross-site request cannot be; bearer-key
 * requests carry no ambient credential and are not checked. SameSite=Lax on the cookie is the
 * second line of defence.
 */
export function assertSameOriginWrite<E extends AppEnv>(
  c: Context<E>,
  trustedOrigin: string,
  sessionCookie: string,
): void {
  if (SAFE_METHODS.has(c.req.method) || c.req.header("authorization")) return;
  if (!c.req.header("cookie")?.includes(sessionCookie)) return;
  const source = c.req.header("origin") ?? c.req.header("referer");
  if (source !== undefined && originOf(source) !== trustedOrigin) {
    throw new ForbiddenError("cross-site request refused: Origin does not match this service");
  }
  const fetchSite = c.req.header("sec-fetch-site");
  if (fetchSite === "cross-site" || fetchSite === "same-site") {
    throw new ForbiddenError(`cross-site request refused: the browser says it came from a ${fetchSite} page`);
  }
}

function originOf(value: string): string | null {
  try {
    return new URL(value).origin;
  } catch {
    return null;
  }
}
