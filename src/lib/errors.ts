/** What was thrown, as an Error (anything may be thrown in JavaScript). */
export function asError(thrown: unknown): Error {
  return thrown instanceof Error ? thrown : new Error(String(thrown));
}

/** The message of whatever was thrown. */
export function errorMessage(thrown: unknown): string {
  return asError(thrown).message;
}
