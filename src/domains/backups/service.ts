import { sql } from "kysely";
import { DAY_MS } from "../../clock.ts";
import { ConflictError, ValidationError } from "../../errors.ts";
import { recordAudit } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { planOf } from "../plans/service.ts";
import { findProject, insertDeploy, type ProjectRow, projectEventPayload } from "../projects/service.ts";
import { openWorkspaceFile, workspaceFile, workspaceSchema } from "../projects/workspace-db.ts";
import { emitOrgEvent } from "../webhooks/events.ts";
import type { WorkspaceRuntime } from "../workspace/access.ts";
import { outboxRows } from "../workspace/dispatch.ts";
import { HISTORY_TABLES, historyInstant, restoreToInstant, stampHistory } from "./history.ts";

/** A project a restore may act on: active or paused (its workspace exists and is not changing shape). */
function assertRestorable(project: ProjectRow): void {
  if (project.status !== "active" && project.status !== "paused") {
    throw new ConflictError(`project is ${project.status}; only an active or paused project can be restored`);
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
  const project = await findProject(ctx, projectSlug);
  assertRestorable(project);
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
  await rewindWorkspace(runtime, project.id, restoredTo, { restoredTo, source: "pitr" });
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
      data: { source: "pitr", restoredTo },
    });
    await emitOrgEvent(trx, ctx.deps, {
      orgId: ctx.org.id,
      kind: "project.restored",
      payload: projectEventPayload(project, { source: "pitr", restoredTo }),
    });
  });
  return { restoredTo };
}

/**
 * Rewinds the workspace's data to `instant` and raises `workspace:restored`, in one workspace
 * transaction that writers wait for and readers do not: on SQLite on a connection of its own
 * (readers go on reading through the pool's until it commits; writers wait for its write lock),
 * on PostgreSQL with the data tables locked against writes only.
 */
async function rewindWorkspace(
  runtime: WorkspaceRuntime,
  projectId: string,
  instant: string,
  data: { restoredTo: string; source: "pitr" | "backup" },
): Promise<void> {
  const { deps } = runtime;
  const event = outboxRows(deps, [{ channel: "workspace", event: "restored", data }]);
  // The dispatcher must know of the event before it is committed (see writes.ts).
  await runtime.dispatcher.markPending(projectId);
  if (deps.dialect === "sqlite") {
    const { db, sqlite } = openWorkspaceFile(workspaceFile(deps, projectId), { create: false });
    try {
      await db.transaction().execute(async (trx) => {
        await stampHistory(trx, "sqlite");
        await restoreToInstant(trx, "sqlite", instant);
        await trx.insertInto("events").values(event).execute();
      });
    } finally {
      await db.destroy().catch(() => {});
      if (sqlite.open) sqlite.close();
    }
  } else {
    await deps.db.transaction().execute(async (trx) => {
      await sql`set local search_path to ${sql.id(workspaceSchema(projectId))}`.execute(trx);
      const tables = Object.keys(HISTORY_TABLES).map((table) => sql.id(table));
      await sql`lock table ${sql.join(tables)} in exclusive mode`.execute(trx);
      await restoreToInstant(trx, "postgres", instant);
      await sql`insert into events (id, channel, event, data, created_at) values (${event[0]?.id}, ${event[0]?.channel}, ${event[0]?.event}, ${event[0]?.data}, ${event[0]?.created_at})`.execute(
        trx,
      );
    });
  }
  runtime.dispatcher.schedule(projectId);
}
