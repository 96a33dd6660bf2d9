import { randomUUID } from "node:crypto";
import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context, MiddlewareHandler } from "hono";
import { clientAddressFinder, type TrustProxy } from "../lib/client-address.ts";
import { normalizeIp, rateKeyOf } from "../lib/ip.ts";
import type { Logger } from "../logger.ts";
import type { AppEnv } from "./context.ts";
import { inProcessCall } from "./in-process.ts";
import { setResponseHeader } from "./response-headers.ts";

const REQUEST_ID = /^[\w.:-]{1,128}$/;

function peerOf(c: Context<AppEnv>): string | null {
  try {
    const address = getConnInfo(c).remote.address;
    return address ? normalizeIp(address) : null;
  } catch {
    return null;
  }
}

/**
 * Gives every request an id (the caller's `X-Request-Id` when it is sane), its client address
 * (and the key its address's rate limits count under), and one log line when it ends.
 */
export function requestContext(log: Logger, trustProxy: TrustProxy): MiddlewareHandler<AppEnv> {
  const clientAddress = clientAddressFinder(trustProxy);
  return async (c, next) => {
    const started = performance.now();
    const incoming = c.req.header("x-request-id");
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    const call = inProcessCall(c);
    const clientIp = call ? call.clientIp : clientAddress(peerOf(c), c.req.header("x-forwarded-for"));
    c.set("requestId", requestId);
    c.set("clientIp", clientIp);
    c.set("clientRateKey", rateKeyOf(clientIp));
    c.set("principal", null);
    c.set("log", log);
    setResponseHeader(c, "X-Request-Id", requestId);
    await next();
    const status = c.res.status;
    const level = status >= 500 ? "error" : "info";
    if (!log.isLevelEnabled(level)) return;
    const principal = c.get("principal");
    log[level]({
      requestId,
      method: c.req.method,
      path: c.req.path,
      status,
      ms: Math.round((performance.now() - started) * 100) / 100,
      ip: clientIp,
      ...(principal ? { principal: principal.type === "account" ? principal.accountId : principal.keyId } : {}),
    });
  };
}
