import { type Selectable, sql } from "kysely";
import { DAY_MS } from "../../clock.ts";
import type { Db } from "../../db/database.ts";
import type { BackupsTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import { ConflictError, NotFoundError, PlanLimitError, publicErrorMessage, ValidationError } from "../../errors.ts";
import { newId } from "../../lib/ids.ts";
import { recordAudit } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { notifyOrgAdmins } from "../notifications/service.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { findProjectRecord } from "../owned-records.ts";
import { planOf } from "../plans/service.ts";
import {
  assertWorkspaceSettled,
  findProject,
  insertDeploy,
  type ProjectRow,
  projectEventPayload,
} from "../projects/service.ts";
import { compareVersions } from "../projects/templates.ts";
import { workspaceFile, workspaceSchema } from "../projects/workspace-db.ts";
import { emitOrgEvent } from "../webhooks/events.ts";
import type { WorkspaceRuntime } from "../workspace/access.ts";
import { outboxRows } from "../workspace/dispatch.ts";
import { holdingWrites } from "../workspace/write-gate.ts";
import { HISTORY_TABLES, historyInstant, restoreToInstant } from "./history.ts";
import { rewindOnThread } from "./rewind-thread.ts";
import {
  dropSnapshot,
  migrateSnapshot,
  restoreFromSnapshot,
  returnFileBytes,
  snapshotFiles,
  snapshotPath,
  takeSnapshot,
} from "./snapshot.ts";

/**
 * The project a restore names. A deleted one is 409 rather than 404 (issue 21): it is there, in
 * its purge period, but cannot be restored; a live project that took its slug since wins.
 */
async function findRestoreTarget(ctx: OrgCtx, projectSlug: string): Promise<ProjectRow> {
  try {
    return await findProject(ctx, projectSlug);
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
    const deleted = await ctx.deps.db
      .selectFrom("projects")
      .select("id")
      .where("org_id", "=", ctx.org.id)
      .where("slug", "=", projectSlug)
      .where("deleted_at", "is not", null)
      .executeTakeFirst();
    if (deleted) throw new ConflictError("project is deleted; only an active or paused project can be restored");
    throw error;
  }
}

/**
 * The instants a point-in-time restore can reach: from the latest of (now − the plan's restore
 * window, the start of the project's history, its last template upgrade) to now. None before the
 * workspace records its history.
 */
export async function windowOf(ctx: OrgCtx, project: ProjectRow): Promise<{ earliest: Date; latest: Date }> {
  const now = ctx.deps.clock.now();
  const days = planOf(ctx.deps.config, ctx.org.plan_id).limits.restoreWindowDays;
  const upgraded = await ctx.deps.db
    .selectFrom("deploys")
    .select((eb) => eb.fn.max("finished_at").as("at"))
    .where("project_id", "=", project.id)
    .where("kind", "=", "upgrade")
    .where("status", "=", "succeeded")
    .executeTakeFirst();
  const starts = [now.getTime() - days * DAY_MS, Date.parse(project.history_since ?? now.toISOString())];
  if (upgraded?.at) starts.push(Date.parse(upgraded.at as string));
  return { earliest: new Date(Math.min(Math.max(...starts), now.getTime())), latest: now };
}

export async function getRestoreWindow({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }) {
  authorize(ctx, "projects:read");
  const project = await findProject(ctx, projectSlug);
  const { earliest, latest } = await windowOf(ctx, project);
  return { earliest: earliest.toISOString(), latest: latest.toISOString() };
}

/** Unix ms, or seconds when below 10^11 (a date in 1973 as ms). */
export function instantOf(timestamp: number): number {
  return timestamp < 1e11 ? timestamp * 1000 : timestamp;
}

/**
 * Brings the project's workspace back to what was committed at or before `timestamp`: every row
 * of its data as it was then, nothing after. One transaction, so readers see the workspace before
 * or after, never between; it is recorded in the history like any change, so restoring to an
 * instant just before it undoes it. Webhooks and their deliveries are configuration, not data:
 * left alone. One `workspace:restored` event, no per-item events.
 */
export async function restoreToTimestamp({
  ctx,
  runtime,
  projectSlug,
  input,
}: {
  ctx: OrgCtx;
  runtime: WorkspaceRuntime;
  projectSlug: string;
  input: { timestamp: number };
}) {
  authorize(ctx, "projects:lifecycle");
  const project = await findRestoreTarget(ctx, projectSlug);
  assertWorkspaceSettled(project, "restored");
  const { earliest, latest } = await windowOf(ctx, project);
  const at = instantOf(input.timestamp);
  if (at < earliest.getTime() || at > latest.getTime()) {
    throw new ValidationError([
      {
        path: "timestamp",
        message: `must be within the restore window, ${earliest.toISOString()} to ${latest.toISOString()}`,
      },
    ]);
  }
  const restoredTo = historyInstant(at);
  await rewindWorkspace(runtime, project.id, { restoredTo, source: "pitr" }, { instant: restoredTo });
  await recordRestore(ctx, project, { source: "pitr", restoredTo });
  return { restoredTo };
}

/** What a restore brings the workspace back to: an instant of its history, or a backup's snapshot. */
type Rewind = { instant: string } | { backupId: string };

/**
 * Brings the workspace's data back (`rewind`) and raises `workspace:restored`, in one workspace
 * transaction that readers do not see until it commits and that this process's writes wait for
 * (the write gate: they wait for it without blocking anything, and it waits for those under way).
 *
 * On SQLite the transaction runs on a thread and a connection of its own (`rewindOnThread`), so
 * that the process goes on serving reads meanwhile, from the workspace as it was; other
 * processes' writers wait for its write lock. On PostgreSQL the data tables are locked against
 * writes only, so reads go on throughout. A crash in the middle rolls it back, either way.
 */
async function rewindWorkspace(
  runtime: WorkspaceRuntime,
  projectId: string,
  data: { restoredTo: string; source: "pitr" | "backup" },
  rewind: Rewind,
): Promise<void> {
  const { deps } = runtime;
  const event = outboxRows(deps, [{ channel: "workspace", event: "restored", data }]);
  // The bytes of the snapshot's files first, outside the transaction (they are copies in the
  // blob store, which no transaction covers): by its commit, every row it restores has them.
  if ("backupId" in rewind) {
    await returnFileBytes(deps, projectId, rewind.backupId, await snapshotFiles(deps, projectId, rewind.backupId));
  }
  // The dispatcher must know of the event before it is committed (see writes.ts).
  await runtime.dispatcher.markPending(projectId);
  await holdingWrites(projectId, async () => {
    if (deps.dialect === "sqlite") {
      await rewindOnThread({
        file: workspaceFile(deps, projectId),
        events: event as unknown as Record<string, unknown>[],
        ...("instant" in rewind
          ? { instant: rewind.instant }
          : { snapshot: snapshotPath(deps, projectId, rewind.backupId) }),
      });
      return;
    }
    await deps.db.transaction().execute(async (trx) => {
      await sql`set local search_path to ${sql.id(workspaceSchema(projectId))}`.execute(trx);
      const tables = Object.keys(HISTORY_TABLES).map((table) => sql.id(table));
      await sql`lock table ${sql.join(tables)} in exclusive mode`.execute(trx);
      if ("instant" in rewind) {
        await restoreToInstant(trx, "postgres", rewind.instant);
      } else {
        await restoreFromSnapshot(trx, "postgres", rewind.backupId);
      }
      await sql`insert into events (id, channel, event, data, created_at) values (${event[0]?.id}, ${event[0]?.channel}, ${event[0]?.event}, ${event[0]?.data}, ${event[0]?.created_at})`.execute(
        trx,
      );
    });
  });
  runtime.dispatcher.schedule(projectId);
}

/** The audit row, deploy record and `project.restored` event of a restore, in one control transaction. */
async function recordRestore(
  ctx: OrgCtx,
  project: ProjectRow,
  detail: { source: "pitr" | "backup"; restoredTo: string; backupId?: string },
  also?: (trx: Db) => Promise<void>,
): Promise<void> {
  await inOrgTransaction(ctx, async (trx) => {
    await insertDeploy(trx, ctx.deps, project.id, {
      kind: "restore",
      status: "succeeded",
      from: project.template_version,
      to: project.template_version,
    });
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "project.restored",
      target: { type: "project", id: project.id },
      data: detail,
    });
    await emitOrgEvent(trx, ctx.deps, {
      orgId: ctx.org.id,
      kind: "project.restored",
      payload: projectEventPayload(project, detail),
    });
    await also?.(trx);
  });
}

// ---------------------------------------------------------------------------------------------
// Backups

/** How long an automatic backup is kept: the plan's restore window, at least a day. */
function autoBackupDays(deps: Deps, planId: string): number {
  return Math.max(1, planOf(deps.config, planId).limits.restoreWindowDays);
}

export function toBackup(row: BackupRow) {
  return {
    id: row.id,
    projectId: row.project_id,
    kind: row.kind as "auto" | "manual",
    status: row.status as "pending" | "completed" | "failed",
    sizeBytes: row.size_bytes === null ? null : Number(row.size_bytes),
    templateVersion: row.template_version,
    createdAt: row.created_at,
    completedAt: row.completed_at,
    expiresAt: row.expires_at,
    restoredAt: row.restored_at,
    error: row.error,
  };
}

export type BackupRow = Selectable<BackupsTable>;

/** A new backup's row and the job that takes it, in the caller's transaction. */
export async function startBackup(
  trx: Db,
  deps: Deps,
  project: Pick<ProjectRow, "id" | "template_version">,
  kind: "auto" | "manual",
): Promise<BackupRow> {
  const now = deps.clock.now();
  const row: BackupRow = {
    id: newId("bkp", now),
    project_id: project.id,
    kind,
    status: "pending",
    size_bytes: null,
    template_version: project.template_version,
    error: null,
    created_at: now.toISOString(),
    completed_at: null,
    expires_at: null,
    restored_at: null,
  };
  await trx.insertInto("backups").values(row).execute();
  await deps.jobs.enqueue(trx, {
    kind: "backup.take",
    payload: { backupId: row.id },
    maxAttempts: 3,
    timeoutMs: 30 * 60_000,
  });
  return row;
}

/** A manual backup: the only kind callers make (BackupInput refuses `auto`; the daily job takes those). */
export async function createBackup({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }) {
  authorize(ctx, "projects:lifecycle");
  const project = await findProject(ctx, projectSlug);
  assertWorkspaceSettled(project, "backed up");
  const row = await inOrgTransaction(ctx, async (trx) => {
    // Counted under the project's row lock on PostgreSQL (SQLite's writers take turns): two
    // requests at once cannot both take the last place.
    if (ctx.deps.dialect === "postgres") {
      await trx.selectFrom("projects").select("id").where("id", "=", project.id).forUpdate().execute();
    }
    const limit = planOf(ctx.deps.config, ctx.org.plan_id).limits.manualBackups;
    const used = await trx
      .selectFrom("backups")
      .select((eb) => eb.fn.countAll<number | string>().as("n"))
      .where("project_id", "=", project.id)
      .where("kind", "=", "manual")
      .where("status", "!=", "failed")
      .executeTakeFirstOrThrow();
    if (Number(used.n) >= limit) {
      throw new PlanLimitError(`the ${ctx.org.plan_id} plan keeps at most ${limit} manual backups per project`, {
        limit,
        used: Number(used.n),
        planId: ctx.org.plan_id,
      });
    }
    const backup = await startBackup(trx, ctx.deps, project, "manual");
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "backup.created",
      target: { type: "backup", id: backup.id },
      data: { projectId: project.id, kind: "manual" },
    });
    return backup;
  });
  return { backup: toBackup(row) };
}

export async function listBackups({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }) {
  authorize(ctx, "projects:read");
  const project = await findProject(ctx, projectSlug);
  const rows = await ctx.deps.db
    .selectFrom("backups")
    .selectAll()
    .where("project_id", "=", project.id)
    .orderBy("id", "desc")
    .execute();
  return { backups: rows.map(toBackup) };
}

function findBackup(ctx: OrgCtx, project: ProjectRow, id: string): Promise<BackupRow> {
  return findProjectRecord(ctx.deps.db, "backups", "bkp", project.id, id, "backup");
}

export async function getBackup({ ctx, projectSlug, id }: { ctx: OrgCtx; projectSlug: string; id: string }) {
  authorize(ctx, "projects:read");
  const project = await findProject(ctx, projectSlug);
  return { backup: toBackup(await findBackup(ctx, project, id)) };
}

export async function deleteBackup({ ctx, projectSlug, id }: { ctx: OrgCtx; projectSlug: string; id: string }) {
  authorize(ctx, "projects:lifecycle");
  const project = await findProject(ctx, projectSlug);
  const backup = await findBackup(ctx, project, id);
  await inOrgTransaction(ctx, async (trx) => {
    await trx.deleteFrom("backups").where("id", "=", backup.id).execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "backup.deleted",
      target: { type: "backup", id: backup.id },
      data: { projectId: project.id, kind: backup.kind },
    });
  });
  // After the row: a job still taking it finds the row gone and drops what it made.
  await dropSnapshot(ctx.deps, project.id, backup.id);
}

/**
 * Makes the project's workspace hold exactly the backup's snapshot (see `rewindWorkspace`). A
 * snapshot of an older template version is migrated forward first, so the workspace keeps its
 * schema. Bytes of files the snapshot lists and the workspace no longer has are put back.
 */
export async function restoreBackup({
  ctx,
  runtime,
  projectSlug,
  id,
}: {
  ctx: OrgCtx;
  runtime: WorkspaceRuntime;
  projectSlug: string;
  id: string;
}) {
  authorize(ctx, "projects:lifecycle");
  const project = await findRestoreTarget(ctx, projectSlug);
  const backup = await findBackup(ctx, project, id);
  if (backup.status !== "completed") {
    throw new ConflictError(`backup is ${backup.status}; only a completed backup can be restored`);
  }
  assertWorkspaceSettled(project, "restored");
  const { deps } = ctx;
  if (compareVersions(backup.template_version, project.template_version) < 0) {
    try {
      await migrateSnapshot(
        deps,
        project.id,
        backup.id,
        project.template,
        backup.template_version,
        project.template_version,
      );
    } catch (error) {
      deps.log.warn({ err: error, backupId: backup.id }, "a backup could not be migrated forward");
      // The snapshot holds data the newer template refuses (say, two e-mails differing in case
      // only): it stays as it was, and so does the workspace.
      throw new ConflictError(
        `the backup (template version ${backup.template_version}) cannot be brought up to ${project.template_version}: ${publicErrorMessage(error)}`,
      );
    }
    await deps.db
      .updateTable("backups")
      .set({ template_version: project.template_version })
      .where("id", "=", backup.id)
      .execute();
  }
  const restoredTo = backup.completed_at ?? backup.created_at;
  await rewindWorkspace(runtime, project.id, { restoredTo, source: "backup" }, { backupId: backup.id });
  const restoredAt = deps.clock.now().toISOString();
  await recordRestore(ctx, project, { source: "backup", restoredTo, backupId: backup.id }, async (trx) => {
    await trx.updateTable("backups").set({ restored_at: restoredAt }).where("id", "=", backup.id).execute();
  });
  return {
    backup: toBackup({
      ...backup,
      template_version: project.template_version,
      restored_at: restoredAt,
    }),
  };
}

/**
 * The `backup.take` job: snapshots the workspace and marks the backup completed, or failed with
 * its error and a notification to the org's admins. A backup deleted meanwhile leaves nothing.
 */
export async function takeBackup(deps: Deps, backupId: string): Promise<void> {
  const backup = await deps.db.selectFrom("backups").selectAll().where("id", "=", backupId).executeTakeFirst();
  if (backup?.status !== "pending") return;
  const project = await deps.db
    .selectFrom("projects")
    .innerJoin("orgs", "orgs.id", "projects.org_id")
    .select([
      "projects.id",
      "projects.slug",
      "projects.status",
      "projects.deleted_at",
      "orgs.id as org_id",
      "orgs.plan_id",
    ])
    .where("projects.id", "=", backup.project_id)
    .executeTakeFirst();
  let failure: string | null = null;
  let taken: { sizeBytes: number; templateVersion: string | null } | null = null;
  if (!project || project.deleted_at !== null || (project.status !== "active" && project.status !== "paused")) {
    failure = `project is ${project?.deleted_at ? "deleted" : (project?.status ?? "gone")}`;
  } else {
    try {
      taken = await takeSnapshot(deps, backup.project_id, backup.id);
    } catch (error) {
      deps.log.error({ err: error, backupId, projectId: backup.project_id }, "taking a backup failed");
      failure = `the snapshot failed: ${publicErrorMessage(error)}`;
    }
  }
  const now = deps.clock.now();
  const settled = await deps.db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable("backups")
      .set(
        failure === null
          ? {
              status: "completed",
              size_bytes: taken?.sizeBytes ?? 0,
              template_version: taken?.templateVersion ?? backup.template_version,
              completed_at: now.toISOString(),
              expires_at:
                backup.kind === "auto"
                  ? new Date(now.getTime() + autoBackupDays(deps, project?.plan_id ?? "") * DAY_MS).toISOString()
                  : null,
            }
          : { status: "failed", error: failure, completed_at: now.toISOString() },
      )
      .where("id", "=", backup.id)
      .where("status", "=", "pending")
      .returningAll()
      .executeTakeFirst();
    if (row && failure !== null && project) {
      await notifyOrgAdmins(trx, deps, {
        orgId: project.org_id,
        kind: "backup.failed",
        title: `A backup of project ${project.slug} failed`,
        body: failure,
        data: { projectId: project.id, backupId: backup.id },
      });
    }
    return row;
  });
  // Deleted while it was taken: nothing of it stays.
  if (!settled && taken) await dropSnapshot(deps, backup.project_id, backup.id);
}
