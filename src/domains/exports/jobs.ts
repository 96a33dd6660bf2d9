import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { baseName, EXPORTS_PREFIX } from "../../storage/keys.ts";
import { dumpTakenAt, isExpired } from "./dump-files.ts";

/** A dump still being written is never this old: an upload older than this is a crash's leftover. */
const LEFTOVER_AGE_MS = DAY_MS;

/**
 * Removes dumps past EXPORT_RETENTION_DAYS (by the time in their names), and what exports cut
 * short by a crash left once a day old. Objects not named like dumps are left alone.
 */
export async function removeExpiredDumps(deps: Deps): Promise<void> {
  const now = deps.clock.now().getTime();
  await deps.storage.removeIncomplete(EXPORTS_PREFIX, new Date(now - LEFTOVER_AGE_MS));
  const expired: string[] = [];
  for await (const object of deps.storage.list(EXPORTS_PREFIX)) {
    const takenAt = dumpTakenAt(baseName(object.key));
    if (takenAt && isExpired(deps, takenAt)) expired.push(object.key);
  }
  await deps.storage.delete(expired);
}

export function exportJobs(deps: Deps): JobHandlers {
  return { "exports.expire": { handle: () => removeExpiredDumps(deps) } };
}

export const exportSchedule: RecurringJob[] = [{ name: "exports.expire", everyMs: DAY_MS, kind: "exports.expire" }];
