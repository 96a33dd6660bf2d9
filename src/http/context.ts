import type { HttpBindings } from "@hono/node-server";
import type { OrgAccess } from "../domains/orgs/access.ts";
import type { AppError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { IN_PROCESS, InProcessCall } from "./in-process.ts";
import type { Principal } from "./principal.ts";

export interface AppEnv {
  /** The Node request and response, from @hono/node-server (absent under other runtimes). */
  Bindings: Partial<HttpBindings> & { [IN_PROCESS]?: InProcessCall };
  Variables: {
    requestId: string;
    log: Logger;
    clientIp: string | null;
    /** What the client's address counts under in rate limits: an IPv6 client's /64 (`rateKeyOf`). */
    clientRateKey: string;
    /** Who is calling; null when no credentials were presented. */
    principal: Principal | null;
    /** Why presented credentials were refused (401 or 403), raised when an operation needs a caller. */
    authError?: AppError;
    /** The caller's standing in the route's org, once a `requires` guard has checked it. */
    orgAccess?: OrgAccess;
    /** What an error answer said (`errorResponse`), for the tenant errors of a workspace request. */
    answeredError?: { code: string; message: string };
  };
}
