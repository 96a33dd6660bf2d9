import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { AppError } from "./errors.ts";

/** Largest request body, except workspace file uploads (MAX_FILE_BYTES). */
export const MAX_BODY_BYTES = 1024 * 1024;

const BODYLESS_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
const FILE_UPLOAD = /^\/w\/[^/]+\/api\/files$/;

function tooLarge(c: Context): never {
  // The rest of the body is left unread, so this connection cannot carry another request.
  c.header("Connection", "close");
  throw new AppError(413, "PAYLOAD_TOO_LARGE", `request body exceeds ${MAX_BODY_BYTES} bytes`);
}

const limitBody = bodyLimit({ maxSize: MAX_BODY_BYTES, onError: tooLarge });

/**
 * Refuses a request body over MAX_BODY_BYTES with 413. Called by the API's and the workspace
 * API's middleware after rate limiting, so a 413 is counted and carries the RateLimit headers.
 *
 * Reads carry no body; skipping them keeps the request from being materialised for nothing. A
 * body framed by Content-Length cannot outgrow it (Node's parser enforces the framing), so the
 * header decides; only chunked bodies are counted as they stream. Workspace file uploads stream
 * to disk under their own limit.
 */
export function limitRequestBody<C extends Context>(c: C, next: () => Promise<void>) {
  if (BODYLESS_METHODS.has(c.req.method) || FILE_UPLOAD.test(c.req.path)) return next();
  const length = c.req.header("content-length");
  if (length !== undefined && c.req.header("transfer-encoding") === undefined) {
    return Number(length) > MAX_BODY_BYTES ? tooLarge(c) : next();
  }
  return limitBody(c, next);
}
