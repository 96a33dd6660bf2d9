/** A command used wrongly (exit 2): nothing was asked of the API, nothing changed. */
export class UsageError extends Error {}

/** The API answered with an error envelope, or could not be reached (exit 1). */
export class ApiError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly requestId?: string,
  ) {
    super(message);
  }

  /** `error CODE: message (request <id>)`, as stderr shows it. */
  describe(): string {
    return `error ${this.code}: ${this.message}${this.requestId ? ` (request ${this.requestId})` : ""}`;
  }
}
