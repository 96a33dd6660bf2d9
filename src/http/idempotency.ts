import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { DAY_MS } from "../clock.ts";
import type { Deps } from "../deps.ts";
import { ConflictError, ValidationError } from "../errors.ts";
import { sha256Hex } from "../lib/tokens.ts";
import { hasJsonBody } from "./router.ts";

/** How long a key is remembered: a retry within this window gets the first answer. */
const IDEMPOTENCY_WINDOW_MS = DAY_MS;
/**
 * How long a request may hold its key before another may take it over (its process died): far
 * longer than any request runs (a webhook test send waits WEBHOOK_TIMEOUT_MS at most). A holder
 * taken over records nothing: only the holder of the claim writes the answer.
 */
const LEASE_MS = 10 * 60_000;
/** Printable ASCII, as IETF's Idempotency-Key draft and Stripe take it (a UUID fits). */
const KEY_FORM = /^[\x21-\x7e]{1,255}$/;
const HEADER = "Idempotency-Key";
/** File uploads stream (their bodies are not kept); sign-in and sign-up answer with cookies. */
const NOT_KEPT = /^\/w\/[^/]+\/api\/files$|^(\/w\/[^/]+)?\/api\/auth\//;
const JSON_TYPE = /^application\/json\b/i;
/** Statuses whose answers have no body. */
const BODYLESS = new Set([204, 205, 304]);

interface Stored {
  status: number;
  contentType: string | null;
  body: string;
}

/**
 * The stored response is sealed under a key derived from the caller's credential and the
 * Idempotency-Key, neither of which the database holds (it keeps their hashes): what a create
 * answered once (an admin token, a key's plaintext) is readable again only by whoever could send
 * that request again.
 */
function sealingKey(credential: string, key: string): Buffer {
  return createHash("sha256").update(`plinth idempotency\0${credential}\0${key}`).digest();
}

function seal(stored: Stored, secret: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", secret, iv);
  const sealed = Buffer.concat([cipher.update(JSON.stringify(stored), "utf8"), cipher.final()]);
  return [iv, cipher.getAuthTag(), sealed].map((part) => part.toString("base64")).join(".");
}

function unseal(text: string, secret: Buffer): Stored | null {
  try {
    const [iv, tag, sealed] = text.split(".").map((part) => Buffer.from(part, "base64"));
    const decipher = createDecipheriv("aes-256-gcm", secret, iv as Buffer);
    decipher.setAuthTag(tag as Buffer);
    return JSON.parse(Buffer.concat([decipher.update(sealed as Buffer), decipher.final()]).toString("utf8")) as Stored;
  } catch {
    return null;
  }
}

/**
 * Only a success with a JSON body (or none) is kept. A failure normally changed nothing (a change
 * and its audit row commit together or not at all), so a retry with the same key runs again:
 * after fixing the body of a 422, after a 409 or a 5xx, or once a 403's role has been granted.
 */
function keeps(response: Response): boolean {
  const type = response.headers.get("content-type");
  return response.status >= 200 && response.status < 300 && (type === null || JSON_TYPE.test(type));
}

/**
 * Whether a request takes part in `Idempotency-Key` handling: checked before `idempotent` is
 * entered, so that no other request pays for it.
 */
export function wantsIdempotency(c: Context): boolean {
  return c.req.method === "POST" && c.req.header(HEADER) !== undefined;
}

/**
 * `Idempotency-Key` on POST (IETF draft, as Stripe does it): the first request with a key runs;
 * a retry with the same key, from the same caller (the same bearer token or session), within
 * 24 hours, gets the first one's answer again, status and body, marked `Idempotent-Replayed:
 * true`, and changes nothing. The same key with a different request (method, path, query or
 * body) is a 422; while the first is still running, a 409. Only a 2xx answer is kept: after a
 * failure, which changed nothing, a retry with the key runs again.
 *
 * Only POSTs with a JSON body or none take part (not file uploads, which stream, nor sign-in and
 * sign-up), and only from a caller with a credential: an anonymous request has no one to replay
 * to. The header is ignored by the rest, whatever it holds.
 */
export async function idempotent(
  c: Context,
  deps: Deps,
  sessionCookie: string,
  next: () => Promise<void>,
): Promise<void> {
  // A POST with the header (`wantsIdempotency`, checked by the caller).
  const key = c.req.header(HEADER) as string;
  if (NOT_KEPT.test(c.req.path)) return next();
  const authorization = c.req.header("authorization");
  const cookie = authorization ? undefined : getCookie(c, sessionCookie);
  const credential = authorization ?? (cookie ? `cookie:${cookie}` : undefined);
  if (credential === undefined) return next();
  if (!KEY_FORM.test(key)) {
    throw new ValidationError([
      { path: `header.${HEADER}`, message: "must be 1 to 255 printable ASCII characters (a UUID, say)" },
    ]);
  }
  let body = "";
  if (hasJsonBody(c)) {
    try {
      body = await c.req.text();
    } catch {
      // Not UTF-8: the handler refuses it with its 400, which there is no need to keep.
      return next();
    }
  }
  const url = c.req.url;
  const query = url.indexOf("?");
  const claim: Claim = {
    scope: sha256Hex(credential),
    key: sha256Hex(key),
    fingerprint: sha256Hex(`POST ${c.req.path}${query < 0 ? "" : url.slice(query)}\n${body}`),
    holder: randomBytes(12).toString("hex"),
  };
  const secret = sealingKey(credential, key);

  const sealed = await take(deps, claim);
  if (sealed !== null) {
    const stored = unseal(sealed, secret);
    if (!stored) throw new ConflictError(`${HEADER} was used for a request whose answer cannot be read back`);
    c.res = new Response(BODYLESS.has(stored.status) ? null : stored.body, {
      status: stored.status,
      headers: { ...(stored.contentType ? { "content-type": stored.contentType } : {}), "idempotent-replayed": "true" },
    });
    return;
  }
  let kept: Stored | null = null;
  try {
    await next();
    if (keeps(c.res)) {
      kept = { status: c.res.status, contentType: c.res.headers.get("content-type"), body: await c.res.clone().text() };
    }
  } finally {
    // The answer goes out whatever happens to its record: a record that cannot be written leaves
    // the key held until its lease lapses, and a retry after that runs again.
    await record(deps, claim, kept && seal(kept, secret)).catch((error: unknown) =>
      deps.log.error({ err: error }, "recording an idempotent request's answer failed"),
    );
  }
}

interface Claim {
  scope: string;
  /** SHA-256 of the Idempotency-Key. */
  key: string;
  fingerprint: string;
  /** This request's own mark on the row: only the request holding it records the answer. */
  holder: string;
}

/** Keeps the (sealed) answer under the claim, or gives the key up (null), if still its holder. */
async function record(deps: Deps, claim: Claim, sealed: string | null): Promise<void> {
  if (sealed === null) {
    await deps.db
      .deleteFrom("idempotency_keys")
      .where("scope", "=", claim.scope)
      .where("key", "=", claim.key)
      .where("holder", "=", claim.holder)
      .execute();
    return;
  }
  await deps.db
    .updateTable("idempotency_keys")
    .set({ response: sealed })
    .where("scope", "=", claim.scope)
    .where("key", "=", claim.key)
    .where("holder", "=", claim.holder)
    .execute();
}

const RUNNING = `a request with this ${HEADER} is still running; retry once it has answered`;

/**
 * Takes the key for this request (null), or returns the sealed answer of the request that had
 * it. Refuses a different request under the key (422) and one whose twin is still running (409).
 * A key older than the window is forgotten first; one whose holder's lease lapsed is taken over.
 */
async function take(deps: Deps, claim: Claim): Promise<string | null> {
  const { scope, key, fingerprint, holder } = claim;
  const now = deps.clock.now().getTime();
  const createdAt = new Date(now).toISOString();
  const lockedUntil = new Date(now + LEASE_MS).toISOString();
  for (let round = 0; round < 2; round++) {
    const inserted = await deps.db
      .insertInto("idempotency_keys")
      .values({
        scope,
        key,
        fingerprint,
        holder,
        response: null,
        locked_until: lockedUntil,
        created_at: createdAt,
      })
      .onConflict((oc) => oc.columns(["scope", "key"]).doNothing())
      .executeTakeFirst();
    if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0) return null;
    const row = await deps.db
      .selectFrom("idempotency_keys")
      .selectAll()
      .where("scope", "=", scope)
      .where("key", "=", key)
      .executeTakeFirst();
    if (!row) continue;
    if (Date.parse(row.created_at) <= now - IDEMPOTENCY_WINDOW_MS) {
      await deps.db
        .deleteFrom("idempotency_keys")
        .where("scope", "=", scope)
        .where("key", "=", key)
        .where("created_at", "=", row.created_at)
        .execute();
      continue;
    }
    if (row.fingerprint !== fingerprint) {
      throw new ValidationError([
        { path: `header.${HEADER}`, message: "was already used for a different request (method, path, query or body)" },
      ]);
    }
    if (row.response !== null) return row.response;
    if (Date.parse(row.locked_until) > now) throw new ConflictError(RUNNING);
    const taken = await deps.db
      .updateTable("idempotency_keys")
      .set({ holder, locked_until: lockedUntil })
      .where("scope", "=", scope)
      .where("key", "=", key)
      .where("holder", "=", row.holder)
      .where("response", "is", null)
      .executeTakeFirst();
    if (Number(taken.numUpdatedRows) > 0) return null;
    throw new ConflictError(RUNNING);
  }
  throw new ConflictError(RUNNING);
}

/** Forgets keys older than the window, oldest first, in batches (the daily maintenance job). */
export async function pruneIdempotencyKeys(deps: Deps, batch: number): Promise<void> {
  const cutoff = new Date(deps.clock.now().getTime() - IDEMPOTENCY_WINDOW_MS).toISOString();
  for (;;) {
    // The batch's newest creation time bounds a plain delete, which both databases run alike.
    const last = await deps.db
      .selectFrom("idempotency_keys")
      .select("created_at")
      .where("created_at", "<", cutoff)
      .orderBy("created_at")
      .offset(batch - 1)
      .limit(1)
      .executeTakeFirst();
    await deps.db
      .deleteFrom("idempotency_keys")
      .where("created_at", last ? "<=" : "<", last ? last.created_at : cutoff)
      .execute();
    if (!last) return;
  }
}

/** Paths of an API's OpenAPI document (relative to its `/api`) whose POSTs ignore the header. */
const DOCUMENT_NOT_KEPT = /^\/auth\/|^\/files$/;

/** Declares the optional `Idempotency-Key` header on each POST of an OpenAPI document that takes it. */
export function withIdempotencyKeyHeader<D extends { paths?: object }>(document: D): D {
  for (const [path, item] of Object.entries((document.paths ?? {}) as Record<string, Record<string, unknown>>)) {
    const post = item.post as { parameters?: unknown[] } | undefined;
    if (!post || DOCUMENT_NOT_KEPT.test(path)) continue;
    post.parameters = [
      ...(post.parameters ?? []),
      {
        name: HEADER,
        in: "header",
        required: false,
        description:
          "Makes a retry safe: the same key from the same caller within 24 hours answers the first request's response again (`Idempotent-Replayed: true`)",
        schema: { type: "string", minLength: 1, maxLength: 255 },
      },
    ];
  }
  return document;
}
