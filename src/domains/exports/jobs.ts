import { readdir, rm } from "node:fs/promises";
import path from "node:path";
import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { dumpTakenAt, exportsDir, isExpired } from "./dump-files.ts";

/** A dump still being written is never this old: a `.part` older than this is a crash's leftover. */
const LEFTOVER_AGE_MS = DAY_MS;

/**
 * Removes dumps past EXPORT_RETENTION_DAYS (by the time in their names), and the `.part` files of
 * exports cut short by a crash once they are a day old. Files not named like dumps are left alone.
 */
export async function removeExpiredDumps(deps: Deps): Promise<void> {
  const root = exportsDir(deps);
  const now = deps.clock.now().getTime();
  for (const org of await readdir(root, { withFileTypes: true }).catch(() => [])) {
    if (!org.isDirectory()) continue;
    const dir = path.join(root, org.name);
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      const partial = name.endsWith(".part");
      const takenAt = dumpTakenAt(partial ? name.slice(0, -".part".length) : name);
      if (!takenAt) continue;
      const due = partial ? takenAt.getTime() <= now - LEFTOVER_AGE_MS : isExpired(deps, takenAt);
      if (due) await rm(path.join(dir, name), { force: true });
    }
  }
}

export function exportJobs(deps: Deps): JobHandlers {
  return { "exports.expire": { handle: () => removeExpiredDumps(deps) } };
}

export const exportSchedule: RecurringJob[] = [{ name: "exports.expire", everyMs: DAY_MS, kind: "exports.expire" }];
