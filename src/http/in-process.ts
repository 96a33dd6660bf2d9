import type { Context } from "hono";
import type { AppEnv } from "./context.ts";
import type { ApiKeyPrincipal } from "./principal.ts";

/**
 * A request the service makes to its own routes on behalf of a caller it has already
 * authenticated and rate-limited: the MCP server runs each tool call through the tool's REST
 * route this way, so that the call meets the route's checks, validation and audit exactly. Carried
 * in the request's bindings under a symbol, which no request from the network can set.
 */
export interface InProcessCall {
  principal: ApiKeyPrincipal;
  clientIp: string | null;
}

export const IN_PROCESS = Symbol("plinth.in-process-call");

export function inProcessCall<E extends AppEnv>(c: Context<E>): InProcessCall | undefined {
  return c.env?.[IN_PROCESS];
}
