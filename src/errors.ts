/**
 * What services throw when a request cannot be done: a code from one list, a message for the
 * caller and, for some codes, details. Nothing here knows HTTP; `http/envelope.ts` maps each code
 * to its status, once, for every transport (the REST API, and later the MCP server).
 */
export const ERROR_CODES = [
  "BAD_REQUEST",
  "UNAUTHORIZED",
  "FORBIDDEN",
  "NOT_FOUND",
  "METHOD_NOT_ALLOWED",
  "CONFLICT",
  "PLAN_LIMIT",
  "PAYLOAD_TOO_LARGE",
  "VALIDATION",
  "RATE_LIMITED",
  "INTERNAL",
  "UNAVAILABLE",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export interface FieldIssue {
  path: string;
  message: string;
}

export class AppError extends Error {
  constructor(
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
    super("BAD_REQUEST", message);
  }
}

export class UnauthorizedError extends AppError {
  constructor(message = "authentication required") {
    super("UNAUTHORIZED", message);
  }
}

export class ForbiddenError extends AppError {
  constructor(message = "insufficient permissions") {
    super("FORBIDDEN", message);
  }
}

export class NotFoundError extends AppError {
  constructor(message = "not found") {
    super("NOT_FOUND", message);
  }
}

export class ConflictError extends AppError {
  constructor(message: string) {
    super("CONFLICT", message);
  }
}

/** A request that would take the org past a hard limit of its plan (DESIGN §8). */
export class PlanLimitError extends AppError {
  constructor(message: string, details: { limit: number; used: number; planId: string }) {
    super("PLAN_LIMIT", message, details);
  }
}

export class PayloadTooLargeError extends AppError {
  constructor(message: string) {
    super("PAYLOAD_TOO_LARGE", message);
  }
}

export class ValidationError extends AppError {
  constructor(issues: FieldIssue[]) {
    const first = issues[0];
    const summary = first ? `${first.path || "body"}: ${first.message}` : "invalid input";
    super("VALIDATION", `validation failed: ${summary}`, issues);
  }
}

/** Too many requests in the caller's budget; `retryAfterSeconds` until the window ends. */
export class RateLimitedError extends AppError {
  constructor(readonly retryAfterSeconds: number) {
    super("RATE_LIMITED", `rate limit exceeded; retry in ${retryAfterSeconds}s`);
  }
}

/** The service cannot take the request now (shutting down, or out of some resource); worth retrying. */
export class UnavailableError extends AppError {
  constructor(message: string) {
    super("UNAVAILABLE", message);
  }
}
/** What was thrown, as an Error (anything may be thrown in JavaScript). */
export function asError(thrown: unknown): Error {
  return thrown instanceof Error ? thrown : new Error(String(thrown));
}

/** The message of whatever was thrown. */
export function errorMessage(thrown: unknown): string {
  return asError(thrown).message;
}

/**
 * What a failure may say to API callers (a failed backup's or branch's `error`): a file system
 * error's code, since its message names paths under DATA_DIR, which are the server's business;
 * else its message (SQLite's and Plinth's own name no paths).
 */
export function publicErrorMessage(error: unknown): string {
  const failure = error as NodeJS.ErrnoException | undefined;
  if (failure?.path !== undefined || failure?.syscall !== undefined) {
    return `a file operation failed (${failure.code ?? "unknown error"})`;
  }
  return errorMessage(error);
}
