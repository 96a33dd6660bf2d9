import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ERROR_CODES, type ErrorCode } from "../errors.ts";

/** The one place an error code becomes an HTTP status. */
const STATUS_OF: Record<ErrorCode, ContentfulStatusCode> = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  PLAN_LIMIT: 409,
  PAYLOAD_TOO_LARGE: 413,
  VALIDATION: 422,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  UNAVAILABLE: 503,
};

/** The code of each status (the first listed where two codes share one: 409 is CONFLICT). */
const CODE_OF = new Map<number, ErrorCode>();
for (const [code, status] of Object.entries(STATUS_OF))
  if (!CODE_OF.has(status)) CODE_OF.set(status, code as ErrorCode);

export function statusOf(code: ErrorCode): ContentfulStatusCode {
  return STATUS_OF[code];
}

/** The code of a status another component answered with (better-auth, Hono): BAD_REQUEST or INTERNAL when none fits. */
export function codeOf(status: number): ErrorCode {
  return CODE_OF.get(status) ?? (status >= 500 ? "INTERNAL" : "BAD_REQUEST");
}

/** `{error: {code, message, details?, requestId?}}`. */
export function errorBody(code: ErrorCode, message: string, details?: unknown, requestId?: string) {
  return {
    error: {
      code,
      message,
      ...(details === undefined ? {} : { details }),
      ...(requestId === undefined ? {} : { requestId }),
    },
  };
}

/** Answers an error in the envelope, with the status of its code and the request's id. */
export function errorResponse(c: Context, code: ErrorCode, message: string, details?: unknown): Response {
  // Unavailable for a moment (every workspace slot busy, a shutdown): worth a retry soon.
  if (code === "UNAVAILABLE") c.header("Retry-After", "1");
  // RFC 9110 §15.5.2: a 401 names the scheme that would be accepted (MCP clients read it).
  if (code === "UNAUTHORIZED") c.header("WWW-Authenticate", 'Bearer realm="plinth"');
  // For the tenant errors of a workspace request (see TenantErrorRecorder).
  c.set("answeredError", { code, message });
  return c.json(errorBody(code, message, details, c.get("requestId") as string | undefined), statusOf(code));
}

export const ErrorEnvelopeSchema = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES).openapi({ example: "NOT_FOUND" }),
      message: z.string(),
      details: z
        .any()
        .nullable()
        .optional()
        .openapi({
          description: "For VALIDATION (422): the failing fields, `[{path, message}]`",
          example: [{ path: "name", message: "Too small: expected string to have >=2 characters" }],
        }),
      requestId: z.string().optional().openapi({
        description: "The request's id, as in the `X-Request-Id` header: quote it when reporting a problem",
      }),
    }),
  })
  .openapi("Error");
