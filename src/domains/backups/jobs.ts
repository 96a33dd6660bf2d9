import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { planOf } from "../plans/service.ts";
import type { WorkspaceStore } from "../workspace/store.ts";
import { startBackup, takeBackup } from "./service.ts";
import { dropSnapshot } from "./snapshot.ts";

const PAGE = 500;

/**
 * Keeps each workspace's history: installs it in workspaces made before it existed (their
 * restore window starts then), and deletes records past the plan's restore window, a page of
 * projects at a time. The bytes of files only those records held go with the next upload
 * leftovers sweep.
 */
export async function maintainHistory(deps: Deps, store: WorkspaceStore): Promise<void> {
  let after = "";
  for (;;) {
    const projects = await deps.db
      .selectFrom("projects")
      .innerJoin("orgs", "orgs.id", "projects.org_id")
      .select(["projects.id", "projects.history_since", "orgs.plan_id"])
      .where("projects.status", "in", ["active", "paused"])
      .where("projects.deleted_at", "is", null)
      .where("projects.id", ">", after)
      .orderBy("projects.id")
      .limit(PAGE)
      .execute();
    for (const project of projects) {
      try {
        if (project.history_since === null) {
          if (await store.installHistory(project.id)) {
            await deps.db
              .updateTable("projects")
              .set({ history_since: deps.clock.now().toISOString() })
              .where("id", "=", project.id)
              .execute();
          }
          continue;
        }
        const days = planOf(deps.config, project.plan_id).limits.restoreWindowDays;
        await store.pruneHistory(project.id, new Date(deps.clock.now().getTime() - days * DAY_MS).toISOString());
      } catch (error) {
        deps.log.error({ err: error, projectId: project.id }, "keeping a workspace's history failed");
      }
    }
    if (projects.length < PAGE) return;
    after = projects[projects.length - 1]?.id as string;
  }
}

/** A backup still pending this long after it was asked for is not being taken: its job died. */
const STALE_PENDING_MS = DAY_MS;

/**
 * The daily round of backups: an automatic backup of every active project (one per project per
 * UTC day, whichever process runs the round), automatic backups past their expiry deleted with
 * their snapshots, and backups whose job died marked failed.
 */
export async function dailyBackups(deps: Deps): Promise<void> {
  const now = deps.clock.now();
  const day = now.toISOString().slice(0, 10);
  let after = "";
  for (;;) {
    const projects = await deps.db
      .selectFrom("projects")
      .select(["id", "template_version"])
      .where("status", "=", "active")
      .where("deleted_at", "is", null)
      .where("id", ">", after)
      .orderBy("id")
      .limit(PAGE)
      .execute();
    for (const project of projects) {
      await deps.jobs.transaction(deps.db, async (trx) => {
        const taken = await trx
          .selectFrom("backups")
          .select("id")
          .where("project_id", "=", project.id)
          .where("kind", "=", "auto")
          .where("created_at", ">=", `${day}T00:00:00.000Z`)
          .executeTakeFirst();
        if (!taken) await startBackup(trx, deps, project, "auto");
      });
    }
    if (projects.length < PAGE) break;
    after = projects[projects.length - 1]?.id as string;
  }
  for (;;) {
    const expired = await deps.db
      .selectFrom("backups")
      .select(["id", "project_id"])
      .where("kind", "=", "auto")
      .where("expires_at", "<=", now.toISOString())
      .limit(PAGE)
      .execute();
    for (const backup of expired) {
      await deps.db.deleteFrom("backups").where("id", "=", backup.id).execute();
      await dropSnapshot(deps, backup.project_id, backup.id);
    }
    if (expired.length < PAGE) break;
  }
  const stale = await deps.db
    .updateTable("backups")
    .set({ status: "failed", error: "the backup was interrupted", completed_at: now.toISOString() })
    .where("status", "=", "pending")
    .where("created_at", "<", new Date(now.getTime() - STALE_PENDING_MS).toISOString())
    .returning(["id", "project_id"])
    .execute();
  // Whatever its job had written (a `.part`, some links) goes.
  for (const backup of stale) await dropSnapshot(deps, backup.project_id, backup.id);
}

export function historyJobs(deps: Deps, store: WorkspaceStore): JobHandlers {
  return {
    "workspace.history": { handle: () => maintainHistory(deps, store) },
    "backup.take": { handle: (payload) => takeBackup(deps, String(payload.backupId)) },
    "backups.daily": { handle: () => dailyBackups(deps) },
  };
}

export const historySchedule: RecurringJob[] = [
  { name: "workspace.history", everyMs: DAY_MS, kind: "workspace.history" },
  { name: "backups.daily", everyMs: DAY_MS, kind: "backups.daily" },
];
