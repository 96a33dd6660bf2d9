import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import { errorMessage } from "../../errors.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { recordSystemAudit } from "../audit/service.ts";
import { dropProjectSnapshots } from "../backups/snapshot.ts";
import { emitOrgEvent } from "../webhooks/events.ts";
import { projectEventPayload } from "./service.ts";
import { dropWorkspace, migrateWorkspace } from "./workspace-db.ts";

const PURGE_BATCH = 100;

/**
 * Why a project cannot be provisioned here, before anything is created: a region this
 * deployment does not serve (SERVED_REGIONS) is the documented way for provisioning to fail.
 */
function refusal(deps: Deps, region: string): string | null {
  return deps.config.servedRegions.includes(region)
    ? null
    : `region '${region}' is not served by this deployment (SERVED_REGIONS=${deps.config.servedRegions.join(",")})`;
}

export function projectJobs(deps: Deps): JobHandlers {
  return {
    /**
     * Creates the workspace database from the project's template and settles the project as
     * `active` or `failed`. A failure is an outcome, not a reason to retry: the project says
     * why, and `provision-retry` migrates again. A failed migration changed nothing, so nothing
     * is dropped after it: another run of this job (a lease that lapsed, a run the deadline gave
     * up on) may be migrating the same workspace, or have settled the project active on it.
     */
    "project.provision": {
      async handle(payload) {
        const projectId = String(payload.projectId);
        const deployId = String(payload.deployId);
        const project = await deps.db.selectFrom("projects").selectAll().where("id", "=", projectId).executeTakeFirst();
        if (project?.status !== "provisioning") return;

        let failure = refusal(deps, project.region);
        if (!failure) {
          try {
            await migrateWorkspace(deps, project.id, project.template, project.template_version);
          } catch (error) {
            failure = `template ${project.template}@${project.template_version} failed to apply: ${errorMessage(
              error,
            )}`;
          }
        }

        const at = deps.clock.now().toISOString();
        await deps.db.transaction().execute(async (trx) => {
          const settled = await trx
            .updateTable("projects")
            .set({
              status: failure ? "failed" : "active",
              failure_reason: failure,
              updated_at: at,
              // The template migration installed its history (a retry's too).
              ...(failure ? {} : { history_since: at }),
            })
            .where("id", "=", project.id)
            .where("status", "=", "provisioning")
            .returningAll()
            .executeTakeFirst();
          if (!settled) return;
          await trx
            .updateTable("deploys")
            .set({ status: failure ? "failed" : "succeeded", error: failure, finished_at: at })
            .where("id", "=", deployId)
            .execute();
          const kind = failure ? "project.failed" : "project.provisioned";
          await recordSystemAudit(trx, deps, {
            orgId: settled.org_id,
            action: kind,
            target: { type: "project", id: settled.id },
            data: { slug: settled.slug, ...(failure ? { reason: failure } : {}) },
          });
          await emitOrgEvent(trx, deps, {
            orgId: settled.org_id,
            kind,
            payload: projectEventPayload(settled, failure ? { reason: failure } : {}),
          });
        });
      },
    },
    /** Drops the workspaces (and branches) of projects deleted more than PROJECT_PURGE_DAYS ago; their rows stay. */
    "projects.purge": {
      async handle() {
        for (;;) {
          const due = await deps.db
            .selectFrom("projects")
            .select("id")
            .where("deleted_at", "is not", null)
            .where("purged_at", "is", null)
            .where("purge_after", "<=", deps.clock.now().toISOString())
            .limit(PURGE_BATCH)
            .execute();
          for (const { id } of due) {
            const branches = await deps.db.selectFrom("branches").select("id").where("project_id", "=", id).execute();
            const ids = [id, ...branches.map((branch) => branch.id)];
            for (const workspaceId of ids) await dropWorkspace(deps, workspaceId);
            const backups = await deps.db.selectFrom("backups").select("id").where("project_id", "=", id).execute();
            await dropProjectSnapshots(
              deps,
              id,
              backups.map((backup) => backup.id),
            );
            await deps.db.transaction().execute(async (trx) => {
              await trx
                .updateTable("projects")
                .set({ purged_at: deps.clock.now().toISOString() })
                .where("id", "=", id)
                .execute();
              await trx.deleteFrom("branches").where("project_id", "=", id).execute();
              await trx.deleteFrom("backups").where("project_id", "=", id).execute();
              await trx.deleteFrom("tenant_errors").where("project_id", "=", id).execute();
              await trx.deleteFrom("domains").where("project_id", "=", id).execute();
              // Their outboxes went with them: nothing is left for the sweep to dispatch.
              await trx.deleteFrom("workspace_outbox_hints").where("project_id", "in", ids).execute();
            });
          }
          if (due.length < PURGE_BATCH) return;
        }
      },
    },
  };
}

export const projectSchedule: RecurringJob[] = [{ name: "projects.purge", everyMs: DAY_MS, kind: "projects.purge" }];
