import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { planOf } from "../plans/service.ts";
import type { WorkspaceStore } from "../workspace/store.ts";

const PAGE = 500;

/**
 * Keeps each branch's history within its org's restore window, as `workspace.history` does for
 * projects: a branch records its changes like any workspace, and nothing else would prune them.
 */
export async function pruneBranchHistory(deps: Deps, store: WorkspaceStore): Promise<void> {
  let after = "";
  for (;;) {
    const branches = await deps.db
      .selectFrom("branches")
      .innerJoin("projects", "projects.id", "branches.project_id")
      .innerJoin("orgs", "orgs.id", "projects.org_id")
      .select(["branches.id", "orgs.plan_id"])
      .where("branches.status", "=", "active")
      .where("projects.deleted_at", "is", null)
      .where("branches.id", ">", after)
      .orderBy("branches.id")
      .limit(PAGE)
      .execute();
    for (const branch of branches) {
      const days = planOf(deps.config, branch.plan_id).limits.restoreWindowDays;
      const before = new Date(deps.clock.now().getTime() - days * DAY_MS).toISOString();
      await store
        .pruneHistory(branch.id, before)
        .catch((error: unknown) =>
          deps.log.error({ err: error, branchId: branch.id }, "pruning a branch's history failed"),
        );
    }
    if (branches.length < PAGE) return;
    after = branches[branches.length - 1]?.id as string;
  }
}

export function branchJobs(deps: Deps, store: WorkspaceStore): JobHandlers {
  return { "branches.history": { handle: () => pruneBranchHistory(deps, store) } };
}

export const branchSchedule: RecurringJob[] = [{ name: "branches.history", everyMs: DAY_MS, kind: "branches.history" }];
