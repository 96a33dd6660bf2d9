import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { planOf } from "../plans/service.ts";
import type { WorkspaceStore } from "../workspace/store.ts";

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

export function historyJobs(deps: Deps, store: WorkspaceStore): JobHandlers {
  return { "workspace.history": { handle: () => maintainHistory(deps, store) } };
}

export const historySchedule: RecurringJob[] = [
  { name: "workspace.history", everyMs: DAY_MS, kind: "workspace.history" },
];
