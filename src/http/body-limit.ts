import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { PayloadTooLargeError } from "../errors.ts";
import { hasJsonBody } from "./router.ts";

/** Largest request body, except workspace file uploads (MAX_FILE_BYTES). */
export const MAX_BODY_BYTES = 1024 * 1024;

const BODYLESS_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
const FILE_UPLOAD = /^\/w\/[^/]+\/api\/files$/;

function tooLarge(c: Context): never {
  // The rest of the body is left unread, so this connection cannot carry another request.
  c.header("Connection", "close");
  throw new PayloadTooLargeError(`request body exceeds ${MAX_BODY_BYTES} bytes`);
}

const limitBody = bodyLimit({ maxSize: MAX_BODY_BYTES, onError: tooLarge });

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
/** Requests whose JSON body turned out not to be UTF-8, so that their 400 can say so. */
const notUtf8 = new WeakSet<object>();

/** Whether the request's JSON body was refused for not being UTF-8. */
export function bodyWasNotUtf8(c: Context): boolean {
  return notUtf8.has(c.req);
}

/**
 * A JSON body must be UTF-8 (RFC 8259): decoding it leniently would turn each invalid byte into
 * U+FFFD and store something other than what was sent. A `charset` parameter changes nothing
 * (RFC 8259 §11: it "has no effect on compliant recipients"). The text Hono parses JSON from (its body
 * cache) is decoded strictly instead, so such a body is malformed JSON, a 400 raised where the
 * body is read: after the guards that refuse a caller whatever the body holds.
 */
function decodeJsonStrictly(c: Context): void {
  if (!hasJsonBody(c)) return;
  const text = c.req.raw.arrayBuffer().then((bytes) => {
    try {
      return strictUtf8.decode(bytes);
    } catch (error) {
      notUtf8.add(c.req);
      throw error;
    }
  });
  // Refused when read; a body nobody reads (a caller refused first) refuses nothing.
  text.catch(() => {});
  // Hono types its body cache as the values, but keeps (and awaits) the promises.
  (c.req.bodyCache as { text?: Promise<string> }).text = text;
}

/**
 * Refuses a request body over MAX_BODY_BYTES with 413, and has a JSON body decoded strictly.
 * Called by the API's and the workspace API's middleware after rate limiting, so a 413 is
 * counted and carries the RateLimit headers.
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
    if (Number(length) > MAX_BODY_BYTES) tooLarge(c);
    decodeJsonStrictly(c);
    return next();
  }
  return limitBody(c, () => {
    decodeJsonStrictly(c);
    return next();
  });
}
