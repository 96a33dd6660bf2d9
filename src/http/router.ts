import { OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "./context.ts";
import { ErrorEnvelopeSchema, type FieldIssue, ValidationError } from "./errors.ts";

/** Turns zod issues into the `details` list of a 422: one `{path, message}` per failing field. */
export function toFieldIssues(error: z.ZodError, target: string): FieldIssue[] {
  return error.issues.map((issue) => ({
    path: issue.path.length > 0 ? issue.path.map(String).join(".") : target === "json" ? "body" : target,
    message: issue.message,
  }));
}

const NUL_MESSAGE = "must not contain the NUL character (U+0000)";
const SURROGATE_MESSAGE = "must be well-formed Unicode: an unpaired surrogate (U+D800–U+DFFF) cannot be stored";
const NUMBER_RANGE_MESSAGE = "must be a number within the range of a double (±1.8e308): it would be stored as null";
/** A UTF-16 surrogate without its pair: UTF-8, which both databases store, has no encoding for it. */
const LONE_SURROGATE = /\p{Cs}/u;

/** What is wrong with a string or key as stored text, if anything. */
export function textIssue(text: string): string | undefined {
  if (text.includes("\0")) return NUL_MESSAGE;
  if (LONE_SURROGATE.test(text)) return SURROGATE_MESSAGE;
  return undefined;
}
/** Deepest nesting of arrays and objects a request may send (items' data included). */
const MAX_JSON_DEPTH = 64;

/**
 * Where `value` holds text neither database stores as given, in a string or a key: U+0000
 * (PostgreSQL's text cannot hold it, so neither database takes it: the same input must not
 * succeed on one and fail on the other) or an unpaired surrogate (it would come back as U+FFFD);
 * a number too large for a double (it would come back as null); and where it nests deeper than MAX_JSON_DEPTH (which would overflow the stack of whatever walks
 * it next).
 */
function inputIssues(value: unknown, path: readonly string[], target: string, issues: FieldIssue[]): void {
  const at = (keys: readonly string[]) => (keys.length > 0 ? keys.join(".") : target === "json" ? "body" : target);
  if (typeof value === "number") {
    // JSON.parse reads a number beyond double range (1e400) as Infinity, which JSON writes as null.
    if (!Number.isFinite(value)) issues.push({ path: at(path), message: NUMBER_RANGE_MESSAGE });
    return;
  }
  if (typeof value === "string") {
    const issue = textIssue(value);
    if (issue) issues.push({ path: at(path), message: issue });
    return;
  }
  if (typeof value !== "object" || value === null) return;
  if (path.length >= MAX_JSON_DEPTH) {
    issues.push({ path: at(path), message: `must not nest arrays and objects deeper than ${MAX_JSON_DEPTH} levels` });
    return;
  }
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) inputIssues(item, [...path, String(i)], target, issues);
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    const issue = textIssue(key);
    if (issue) issues.push({ path: at([...path, key]), message: issue });
    else inputIssues(item, [...path, key], target, issues);
  }
}

const PERCENT_MESSAGE = "must be percent-encoded UTF-8: it holds escapes that decode to no text";
/** A `%` that starts no escape is taken as itself, as the parser (and WHATWG URL) take it. */
const STRAY_PERCENT = /%(?![0-9A-Fa-f]{2})/g;

/** `text` as a query component decodes to, or undefined when its escapes are no UTF-8. */
function decodedQueryText(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replaceAll("+", " ").replace(STRAY_PERCENT, "%25"));
  } catch {
    return undefined;
  }
}

/**
 * Query parameters whose percent-escapes are no UTF-8 (`%FF`, an encoded surrogate `%ED%A0%80`):
 * the parser keeps such a value undecoded, escapes and all, which is not what was meant.
 */
function badlyEncoded(url: string): FieldIssue[] {
  const query = url.indexOf("?");
  if (query < 0 || url.indexOf("%", query) < 0) return [];
  const issues: FieldIssue[] = [];
  for (const pair of url.slice(query + 1).split("&")) {
    if (!pair.includes("%")) continue;
    const equals = pair.indexOf("=");
    const key = equals < 0 ? pair : pair.slice(0, equals);
    const name = decodedQueryText(key);
    if (name === undefined || (equals >= 0 && decodedQueryText(pair.slice(equals + 1)) === undefined)) {
      issues.push({ path: name ?? key, message: PERCENT_MESSAGE });
    }
  }
  return issues;
}

/** Query parameters as sent: one value as itself, a repeated parameter as its list. */
function queryAsSent(queries: Record<string, string[]>): Record<string, string | string[]> {
  return Object.fromEntries(
    Object.entries(queries).map(([key, values]) => [key, values.length === 1 ? (values[0] as string) : values]),
  );
}

/**
 * A router whose request validation failures become 422 VALIDATION envelopes, as do text with a
 * NUL character or an unpaired surrogate anywhere in a body, query or path parameter, and a body
 * nested too deep.
 */
export function createRouter<E extends AppEnv = AppEnv>() {
  return new OpenAPIHono<E>({
    defaultHook: async (result, c) => {
      if (!result.success) throw new ValidationError(toFieldIssues(result.error, result.target));
      if (result.target === "header" || result.target === "cookie") return;
      // The input as sent, not as parsed: a NUL or deep nesting in a key the schema drops is
      // refused too ("anywhere in a body, query or path parameter"). Hono keeps the parsed body.
      const sent =
        result.target === "json"
          ? await jsonAsSent(c, result.data)
          : result.target === "query"
            ? queryAsSent(c.req.queries())
            : result.data;
      const issues: FieldIssue[] = result.target === "query" ? badlyEncoded(c.req.url) : [];
      inputIssues(sent, [], result.target, issues);
      if (issues.length > 0) throw new ValidationError(issues);
    },
  });
}

/** Hono's validator parses a body of these media types; any other body is validated as `{}`. */
const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json$/i;

/** Whether the request's body is of a JSON media type, the ones Hono's validator parses. */
export function hasJsonBody(c: Context): boolean {
  const mediaType = (c.req.header("content-type") ?? "").split(";")[0]?.trim() ?? "";
  return JSON_MEDIA_TYPE.test(mediaType);
}

/** The JSON body as sent (Hono keeps its parse); a body Hono did not parse is what was validated. */
async function jsonAsSent(c: Context, validated: unknown): Promise<unknown> {
  return hasJsonBody(c) ? c.req.json() : validated;
}

const errorContent = { "application/json": { schema: ErrorEnvelopeSchema } };

const errorDescriptions = {
  400: "Malformed request (invalid JSON or wrong content type)",
  401: "Authentication required",
  403: "Authenticated but not allowed",
  404: "Not found",
  409: "Conflict with the current state",
  413: "Request body too large",
  422: "Request validation failed",
  429: "Rate limited (with Retry-After)",
  500: "Internal error (never with internals)",
} as const;

type ErrorStatus = keyof typeof errorDescriptions;

/** The error responses an operation can give, for its OpenAPI entry. */
export function errorResponses(...statuses: ErrorStatus[]) {
  const listed: ErrorStatus[] = statuses.length > 0 ? statuses : [400, 401, 403, 404, 409, 413, 422, 429];
  const all: ErrorStatus[] = [...listed, 500];
  return Object.fromEntries(
    all.map((status) => [status, { description: errorDescriptions[status], content: errorContent }]),
  ) as Record<ErrorStatus, { description: string; content: typeof errorContent }>;
}

/** Standard error set for authenticated operations. */
export const authedErrors = errorResponses(400, 401, 403, 404, 409, 413, 422, 429);

export function jsonContent<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { "application/json": { schema } } };
}

export function jsonBody<T extends z.ZodType>(schema: T) {
  return { required: true, content: { "application/json": { schema } } };
}

/**
 * Any JSON object, taken as it was parsed, for data a caller stores as given (item data,
 * preferences): `z.record` copies the keys by assignment, which drops a `__proto__` key (it sets
 * the copy's prototype instead).
 */
export function jsonObject() {
  return z
    .custom<Record<string, unknown>>(
      (value) => typeof value === "object" && value !== null && !Array.isArray(value),
      "expected a JSON object",
    )
    .openapi({ type: "object", additionalProperties: true });
}

/** Control characters but NUL, which every input refuses with a message of its own (`textIssue`). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const CONTROL_CHARACTER = /[\u0001-\u001f\u007f-\u009f]/;

/**
 * A name shown on one line (an org's, a project's, a key's): trimmed, `min` to `max` characters,
 * and no control characters, so a line break or an escape sequence cannot reshape a listing, a
 * log line or a mail it appears in.
 */
export function nameText(min: number, max: number) {
  return oneLine(z.string().trim().min(min).max(max))
    .refine((value) => !BIDI_CONTROL.test(value), "must not contain bidirectional control characters")
    .refine((value) => VISIBLE.test(value), "must contain a visible character");
}

/**
 * Embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069): they reorder the text
 * around them, so a name holding one can read as another in a listing.
 */
const BIDI_CONTROL = /[\u202a-\u202e\u2066-\u2069]/;
/**
 * Anything but separators, format characters (zero-width ones among them), marks on nothing,
 * white space, characters that render as nothing (Hangul fillers among them) and the blank
 * Braille cell.
 */
const VISIBLE = /[^\p{Z}\p{Cf}\p{M}\s\p{Default_Ignorable_Code_Point}\u2800]/u;

/** An http(s) URL a webhook or an integration posts to. */
export const httpUrl = z.url({ protocol: /^https?$/, message: "must be an http(s) URL" }).max(2048);

/** Whether `text` holds a control character other than NUL. */
export function hasControlCharacter(text: string): boolean {
  return CONTROL_CHARACTER.test(text);
}

/** `text` refusing control characters (line breaks, tabs, escapes), as names do. */
export function oneLine(text: z.ZodString) {
  return text.refine((value) => !hasControlCharacter(value), "must not contain control characters (line breaks, tabs)");
}

/**
 * A count in a query parameter: decimal digits only (blanks around them aside), so `0x10`, `1e2`
 * and an empty value are refused rather than read as some other number.
 */
function countQuery(min: number, max: number, message: string) {
  return z
    .string()
    .trim()
    .regex(/^\d+$/, message)
    .transform(Number)
    .pipe(z.number().min(min, message).max(max, message))
    .optional();
}

/** `limit` and `offset` query parameters of a list, newest or oldest first as the list says. */
export function pageQuery(defaultLimit: number, maxLimit: number) {
  return {
    limit: countQuery(1, maxLimit, `must be an integer from 1 to ${maxLimit}`).openapi({
      type: "integer",
      minimum: 1,
      maximum: maxLimit,
      description: `1..${maxLimit}, default ${defaultLimit}`,
    }),
    offset: countQuery(0, Number.MAX_SAFE_INTEGER, "must be a non-negative integer").openapi({
      type: "integer",
      minimum: 0,
      description: "Rows to skip, default 0",
    }),
  };
}

export const OkSchema = z.object({ ok: z.boolean() }).openapi("Ok");

/** Both security schemes: every authenticated operation accepts either. */
export const sessionOrKey: Record<string, string[]>[] = [{ sessionCookie: [] }, { apiKey: [] }];
export const sessionOnly: Record<string, string[]>[] = [{ sessionCookie: [] }];

/**
 * Gives every operation of an OpenAPI document that has none an `operationId`, derived from its
 * method and path (`GET /org/{slug}/projects` → `getOrgBySlugProjects`): unique, stable, and what
 * SDK generators name their methods after.
 */
export function withOperationIds<D extends { paths?: object }>(document: D): D {
  const word = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);
  for (const [path, item] of Object.entries((document.paths ?? {}) as Record<string, Record<string, unknown>>)) {
    const name = path
      .split("/")
      .filter(Boolean)
      .map((segment) => {
        const param = /^\{(.+)\}$/.exec(segment)?.[1];
        return param
          ? `By${word(param)}`
          : segment
              .split(/[^A-Za-z0-9]+/)
              .filter(Boolean)
              .map(word)
              .join("");
      })
      .join("");
    for (const [method, operation] of Object.entries(item)) {
      if (typeof operation !== "object" || operation === null || "operationId" in operation) continue;
      (operation as { operationId?: string }).operationId = `${method}${name}`;
    }
  }
  return document;
}
