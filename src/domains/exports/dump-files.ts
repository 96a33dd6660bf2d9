import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import { randomHex } from "../../lib/tokens.ts";

/**
 * `<project slug>-<UTC time to the second>-<32 hex digits>.sql`: it says what it holds and when,
 * cannot be guessed, and holds no path separator, dot-dot or character that needs quoting.
 */
const DUMP_NAME = /^[a-z0-9][a-z0-9-]{0,62}-(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z-[0-9a-f]{32}\.sql$/;

export function dumpName(projectSlug: string, at: Date): string {
  const stamp = at
    .toISOString()
    .replace(/\.\d{3}Z$/, "Z")
    .replace(/[-:]/g, "");
  return `${projectSlug}-${stamp}-${randomHex(16)}.sql`;
}

/** When the dump named `name` was taken; null when `name` is not a dump's name. */
export function dumpTakenAt(name: string): Date | null {
  const parts = DUMP_NAME.exec(name);
  if (!parts) return null;
  const [year, month, day, hour, minute, second] = parts.slice(1).map(Number) as number[];
  return new Date(Date.UTC(year as number, (month as number) - 1, day, hour, minute, second));
}

/** Whether a dump taken at `takenAt` is past EXPORT_RETENTION_DAYS (0 keeps every dump). */
export function isExpired(deps: Deps, takenAt: Date): boolean {
  const days = deps.config.exportRetentionDays;
  return days > 0 && takenAt.getTime() <= deps.clock.now().getTime() - days * DAY_MS;
}
