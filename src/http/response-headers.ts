import type { Context } from "hono";
import type { AppEnv } from "./context.ts";

/**
 * Sets a header that every response to this request carries, error responses included.
 *
 * On Node the header goes straight onto the outgoing `ServerResponse`, which merges it at
 * `writeHead`. Setting it through Hono's `c.header` would build a WHATWG `Headers` object for
 * every response and push it off @hono/node-server's fast path; these headers are on every
 * request, so that cost is worth avoiding. Elsewhere (no Node response) it falls back to Hono.
 */
export function setResponseHeader<E extends AppEnv>(c: Context<E>, name: string, value: string): void {
  const outgoing = c.env?.outgoing;
  if (outgoing && !outgoing.headersSent) outgoing.setHeader(name, value);
  else c.header(name, value);
}
