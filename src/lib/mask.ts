/**
 * Secrets as reads show them: `••••` and the last four characters (integration credentials,
 * workspace webhooks' custom headers); a value sent back masked in a write means "unchanged".
 */
const MASK = "••••";

export function isMasked(value: unknown): boolean {
  return typeof value === "string" && value.startsWith(MASK);
}

/** A secret is shown only by the last four characters of a string (a value of another type not at all). */
export function maskSecret(value: unknown): string {
  return typeof value === "string" && value.length > 4 ? `${MASK}${value.slice(-4)}` : MASK;
}
