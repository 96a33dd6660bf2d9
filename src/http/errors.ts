import { z } from "@hono/zod-openapi";
import type { ContentfulStatusCode } from "hono/utils/http-status";

export type ErrorCode =
  | "BAD_REQUEST"
  | "UNAUTHORIZED"
  | "FORBIDDEN"
  | "NOT_FOUND"
  | "METHOD_NOT_ALLOWED"
  | "CONFLICT"
  | "PAYLOAD_TOO_LARGE"
  | "VALIDATION"
  | "RATE_LIMITED"
  | "INTERNAL";

export interface FieldIssue {
  path: string;
  message: string;
}

/** An error with a place in the envelope. Services throw these; one handler renders them. */
export class AppError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class BadRequestError extends AppError {
  constructor(message = "malformed request") {
    super(400, "BAD_REQUEST", message);
  }
}

export class UnauthorizedError extends AppError {
  constructor(message = "authentication required") {
    super(401, "UNAUTHORIZED", message);
  }
}

export class ForbiddenError extends AppError {
  constructor(message = "insufficient permissions") {
    super(403, "FORBIDDEN", message);
  }
}

export class NotFoundError extends AppError {
  constructor(message = "not found") {
    super(404, "NOT_FOUND", message);
  }
}

export class ConflictError extends AppError {
  constructor(message: string) {
    super(409, "CONFLICT", message);
  }
}

export class ValidationError extends AppError {
  constructor(issues: FieldIssue[]) {
    const first = issues[0];
    const summary = first ? `${first.path || "body"}: ${first.message}` : "invalid input";
    super(422, "VALIDATION", `validation failed: ${summary}`, issues);
  }
}

export function errorBody(code: ErrorCode, message: string, details?: unknown) {
  return { error: { code, message, ...(details === undefined ? {} : { details }) } };
}

export const ErrorEnvelopeSchema = z
  .object({
    error: z.object({
      code: z.string().openapi({
        example: "NOT_FOUND",
        description:
          "BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND, METHOD_NOT_ALLOWED, CONFLICT, PAYLOAD_TOO_LARGE, VALIDATION, RATE_LIMITED or INTERNAL",
      }),
      message: z.string(),
      details: z
        .any()
        .nullable()
        .optional()
        .openapi({
          description: "For VALIDATION (422): the failing fields, `[{path, message}]`",
          example: [{ path: "name", message: "Too small: expected string to have >=2 characters" }],
        }),
    }),
  })
  .openapi("Error");
