import { OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { textIssue, toFieldIssues } from "../domains/fields.ts";
import { type FieldIssue, ValidationError } from "../errors.ts";
import type { AppEnv } from "./context.ts";
import { ErrorEnvelopeSchema } from "./envelope.ts";
import type { Security } from "./operations.ts";

const NUMBER_RANGE_MESSAGE = "must be a number within the range of a double (±1.8e308): it would be stored as null";
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

/**
 * Fields of a JSON body its schema does not know, at any depth: what the schema's parse dropped.
 * A body is strict, so that a misspelt or unsupported field is refused by name rather than
 * ignored (`{"kind":"auto"}` once passed as if it meant something); free-form data (a record, an
 * item's data) keeps every key through the parse and is never refused here.
 */
function unknownFields(sent: unknown, parsed: unknown, path: readonly string[], issues: FieldIssue[]): void {
  // Deeper than that, `inputIssues` refuses the body already.
  if (path.length >= MAX_JSON_DEPTH) return;
  if (Array.isArray(sent) && Array.isArray(parsed)) {
    for (const [i, item] of sent.entries()) unknownFields(item, parsed[i], [...path, String(i)], issues);
    return;
  }
  if (!isPlainObject(sent) || !isPlainObject(parsed)) return;
  for (const [key, value] of Object.entries(sent)) {
    const at = [...path, key].join(".");
    if (Object.hasOwn(parsed, key)) unknownFields(value, parsed[key], [...path, key], issues);
    // A field already refused for what it holds is named once.
    else if (!issues.some((issue) => issue.path === at || issue.path.startsWith(`${at}.`))) {
      issues.push({ path: at, message: "is not a field of this request" });
    }
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
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
      if (result.target === "json") unknownFields(sent, result.data, [], issues);
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
  409: "Conflict with the current state (CONFLICT), or a limit of the org's plan reached (PLAN_LIMIT, details `{limit, used, planId}`)",
  413: "Request body too large",
  422: "Request validation failed",
  429: "Rate limited (with Retry-After)",
  500: "Internal error (never with internals)",
  503: "Unavailable for now; retry later",
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

export const OkSchema = z.object({ ok: z.boolean() }).openapi("Ok");

/**
 * A public operation's `security`: no credentials. `isPublic` admits an operation that declares none
 * alike, but the document must say so (DESIGN §14: Redocly's `security-defined`).
 */
export const anyone: Security = [];
/** Both security schemes: every authenticated operation accepts either. */
export const sessionOrKey: Security = [{ sessionCookie: [] }, { apiKey: [] }];
export const sessionOnly: Security = [{ sessionCookie: [] }];

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

/**
 * For a route whose JSON body is optional: a request that says its body is JSON but sends none
 * (a client that sets the header on every request) is taken as one without a body, not as
 * malformed JSON. Put it before the route's other middleware.
 */
export const emptyBodyIsNone: MiddlewareHandler = async (c, next) => {
  const type = c.req.header("content-type");
  if (type !== undefined && (await c.req.text()) === "") {
    const headers = new Headers(c.req.raw.headers);
    headers.delete("content-type");
    c.req.raw = new Request(c.req.raw.url, { method: c.req.raw.method, headers });
  }
  await next();
};
