import { z } from "@hono/zod-openapi";
import type { FieldIssue } from "../errors.ts";

// Field types that inputs share, whatever the transport (REST routes, MCP tools) and services
// that check values themselves: one definition of a name, a URL or a page.

/** Turns zod issues into the `details` list of a 422: one `{path, message}` per failing field. */
export function toFieldIssues(error: z.ZodError, target: string): FieldIssue[] {
  return error.issues.map((issue) => ({
    path: issue.path.length > 0 ? issue.path.map(String).join(".") : target === "json" ? "body" : target,
    message: issue.message,
  }));
}

const NUL_MESSAGE = "must not contain the NUL character (U+0000)";
const SURROGATE_MESSAGE = "must be well-formed Unicode: an unpaired surrogate (U+D800–U+DFFF) cannot be stored";
/** A UTF-16 surrogate without its pair: UTF-8, which both databases store, has no encoding for it. */
const LONE_SURROGATE = /\p{Cs}/u;

/** What is wrong with a string or key as stored text, if anything. */
export function textIssue(text: string): string | undefined {
  if (text.includes("\0")) return NUL_MESSAGE;
  if (LONE_SURROGATE.test(text)) return SURROGATE_MESSAGE;
  return undefined;
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
