import type { z } from "@hono/zod-openapi";
import type { Selectable } from "kysely";
import { isUniqueViolation } from "../../db/database.ts";
import type { BranchesTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import { ConflictError, NotFoundError, PlanLimitError, publicErrorMessage, ValidationError } from "../../errors.ts";
import { newId } from "../../lib/ids.ts";
import { randomHex, sha256Hex } from "../../lib/tokens.ts";
import { recordAudit } from "../audit/service.ts";
import { historyInstant } from "../backups/history.ts";
import { instantOf, windowOf } from "../backups/service.ts";
import type { OrgCtx } from "../context.ts";
import { notifyOrgAdmins } from "../notifications/service.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { findProjectRecord } from "../owned-records.ts";
import { assertWorkspaceSettled, findProject, type ProjectRow } from "../projects/service.ts";
import { measureProject } from "../usage/meter.ts";
import { emitOrgEvent } from "../webhooks/events.ts";
import type { WorkspacePool } from "../workspace/pool.ts";
import { copyWorkspace, dropCopy } from "./copy.ts";
import type { BranchSchema, CreateBranchInput } from "./schemas.ts";

/** Branches a project may have at once (DESIGN §9), on every plan. */
export const BRANCHES_PER_PROJECT = 10;

type BranchRow = Selectable<BranchesTable>;
type Branch = z.infer<typeof BranchSchema>;

function toBranch(row: BranchRow, publicUrl: string): Branch {
  return {
    id: row.id,
    name: row.name,
    prNumber: row.pr_number === null ? null : Number(row.pr_number),
    status: row.status as Branch["status"],
    projectId: row.project_id,
    sourceTimestamp: row.source_timestamp,
    workspaceUrl: `${publicUrl}/w/${row.id}`,
    error: row.error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The project's branch `id`; 404 for an unknown id or another project's. */
function findBranch(ctx: OrgCtx, project: ProjectRow, id: string): Promise<BranchRow> {
  return findProjectRecord(ctx.deps.db, "branches", "brn", project.id, id, "branch");
}

function branchEventPayload(project: ProjectRow, row: BranchRow) {
  return {
    branchId: row.id,
    branchName: row.name,
    prNumber: row.pr_number,
    projectId: project.id,
    projectSlug: project.slug,
    sourceTimestamp: row.source_timestamp,
  };
}

/** The instant `at` names, checked against the project's restore window; null: now. */
async function sourceInstant(ctx: OrgCtx, project: ProjectRow, at: number | undefined): Promise<string | null> {
  if (at === undefined) return null;
  const { earliest, latest } = await windowOf(ctx, project);
  const ms = instantOf(at);
  if (ms < earliest.getTime() || ms > latest.getTime()) {
    throw new ValidationError([
      {
        path: "at",
        message: `must be within the restore window, ${earliest.toISOString()} to ${latest.toISOString()}`,
      },
    ]);
  }
  return historyInstant(ms);
}

export async function listBranches({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }) {
  authorize(ctx, "projects:read");
  const project = await findProject(ctx, projectSlug);
  const rows = await ctx.deps.db
    .selectFrom("branches")
    .selectAll()
    .where("project_id", "=", project.id)
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .execute();
  return { branches: rows.map((row) => toBranch(row, ctx.deps.config.publicUrl)) };
}

export async function getBranch({ ctx, projectSlug, id }: { ctx: OrgCtx; projectSlug: string; id: string }) {
  authorize(ctx, "projects:read");
  const project = await findProject(ctx, projectSlug);
  return { branch: toBranch(await findBranch(ctx, project, id), ctx.deps.config.publicUrl) };
}

/**
 * Creates the branch and copies the project's workspace into it before answering (a copy is a
 * file copy on SQLite, one statement per table on PostgreSQL). The record exists from the start
 * as `creating`, so the name and the limit hold while the copy runs; a failed copy leaves
 * nothing behind, the branch `failed` with its error, and the org's admins notified.
 */
export async function createBranch({
  ctx,
  pool,
  projectSlug,
  input,
}: {
  ctx: OrgCtx;
  pool: WorkspacePool;
  projectSlug: string;
  input: z.infer<typeof CreateBranchInput>;
}) {
  authorize(ctx, "projects:lifecycle");
  const { deps } = ctx;
  const project = await findProject(ctx, projectSlug);
  assertWorkspaceSettled(project, "branched");
  const instant = await sourceInstant(ctx, project, input.at);
  const token = `wsa_${randomHex(32)}`;
  const now = deps.clock.now();
  // Exclusive: the count and the name are checked by one request of the org at a time.
  const row = await inOrgTransaction(
    ctx,
    async (trx) => {
      const counted = await trx
        .selectFrom("branches")
        .select((eb) => eb.fn.countAll().as("count"))
        .where("project_id", "=", project.id)
        .executeTakeFirstOrThrow();
      const used = Number(counted.count);
      if (used >= BRANCHES_PER_PROJECT) {
        throw new PlanLimitError(`a project has at most ${BRANCHES_PER_PROJECT} branches`, {
          limit: BRANCHES_PER_PROJECT,
          used,
          planId: ctx.org.plan_id,
        });
      }
      const taken = await trx
        .selectFrom("branches")
        .select("id")
        .where("project_id", "=", project.id)
        .where("name", "=", input.name)
        .executeTakeFirst();
      if (taken) throw new ConflictError(`the project already has a branch named '${input.name}'`);
      const branch: BranchRow = {
        id: newId("brn", now),
        project_id: project.id,
        name: input.name,
        pr_number: input.prNumber ?? null,
        status: "creating",
        admin_token_hash: sha256Hex(token),
        source_timestamp: instant ?? now.toISOString(),
        error: null,
        created_at: now.toISOString(),
        updated_at: now.toISOString(),
      };
      await trx.insertInto("branches").values(branch).execute();
      await recordAudit(trx, ctx, {
        orgId: ctx.org.id,
        action: "branch.created",
        target: { type: "branch", id: branch.id },
        data: { projectId: project.id, name: branch.name, prNumber: branch.pr_number, at: branch.source_timestamp },
      });
      return branch;
    },
    { exclusive: true },
  ).catch((error: unknown) => {
    if (isUniqueViolation(error)) throw new ConflictError(`the project already has a branch named '${input.name}'`);
    throw error;
  });
  const settled = await fillBranch(ctx, pool, project, row, instant, "created");
  return { branch: toBranch(settled, deps.config.publicUrl), adminToken: token };
}

/** Copies the project's current data into the branch again; its own changes are lost. */
export async function resetBranch({
  ctx,
  pool,
  projectSlug,
  id,
}: {
  ctx: OrgCtx;
  pool: WorkspacePool;
  projectSlug: string;
  id: string;
}) {
  authorize(ctx, "projects:lifecycle");
  const project = await findProject(ctx, projectSlug);
  assertWorkspaceSettled(project, "branched");
  const branch = await findBranch(ctx, project, id);
  const now = ctx.deps.clock.now().toISOString();
  // From active or failed only: a compare-and-set, so two resets (or a reset of a branch still
  // being created) cannot copy into it at once. Its workspace answers 409 until the copy is in.
  const row = await inOrgTransaction(ctx, async (trx) => {
    const updated = await trx
      .updateTable("branches")
      .set({ status: "creating", error: null, source_timestamp: now, updated_at: now })
      .where("id", "=", branch.id)
      .where("status", "in", ["active", "failed"])
      .returningAll()
      .executeTakeFirst();
    if (!updated) throw new ConflictError(`cannot reset a branch that is ${branch.status}`);
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "branch.reset",
      target: { type: "branch", id: branch.id },
      data: { projectId: project.id, name: branch.name, at: now },
    });
    return updated;
  });
  const settled = await fillBranch(ctx, pool, project, row, null, "reset");
  return { branch: toBranch(settled, ctx.deps.config.publicUrl) };
}

/**
 * Copies the project's workspace into the branch `row` (status `creating`) and settles it
 * `active`, or `failed` with the error (the branch's workspace as it was before, none for a new
 * one) and a notification. A branch deleted meanwhile loses the copy just made: 404.
 */
async function fillBranch(
  ctx: OrgCtx,
  pool: WorkspacePool,
  project: ProjectRow,
  row: BranchRow,
  instant: string | null,
  verb: "created" | "reset",
): Promise<BranchRow> {
  const { deps } = ctx;
  let failure: string | null = null;
  try {
    await copyWorkspace(deps, pool, { sourceId: project.id, targetId: row.id, instant });
  } catch (error) {
    failure = publicErrorMessage(error);
    deps.log.error({ err: error, branchId: row.id, projectId: project.id }, "copying a workspace into a branch failed");
  }
  const settled = await inOrgTransaction(ctx, async (trx) => {
    const updated = await trx
      .updateTable("branches")
      .set({ status: failure ? "failed" : "active", error: failure, updated_at: deps.clock.now().toISOString() })
      .where("id", "=", row.id)
      .where("status", "=", "creating")
      .returningAll()
      .executeTakeFirst();
    if (!updated) return undefined;
    if (failure) {
      await recordAudit(trx, ctx, {
        orgId: ctx.org.id,
        action: "branch.failed",
        target: { type: "branch", id: row.id },
        data: { projectId: project.id, name: row.name, error: failure },
      });
      await notifyOrgAdmins(trx, deps, {
        orgId: ctx.org.id,
        kind: "branch.failed",
        title: `Branch ${row.name} of ${project.slug} could not be ${verb === "created" ? "created" : "reset"}`,
        body: failure,
        data: { branchId: row.id, projectId: project.id },
      });
    } else if (verb === "created") {
      await emitOrgEvent(trx, deps, {
        orgId: ctx.org.id,
        kind: "branch.created",
        payload: branchEventPayload(project, updated),
      });
    }
    return updated;
  });
  if (!settled) {
    if (!failure) await dropCopy(deps, pool, row.id);
    throw new NotFoundError("branch not found");
  }
  await measureBranched(deps, project.id);
  return settled;
}

/**
 * Measures the project's usage at once after one of its branches was copied or removed: a
 * branch's bytes are the project's (DESIGN §8 quotas), and a copy can be as large as the project.
 */
async function measureBranched(deps: Deps, projectId: string): Promise<void> {
  await measureProject(deps, projectId).catch((error: unknown) =>
    deps.log.warn({ err: error, projectId }, "measuring a project's usage failed"),
  );
}

/** Deletes the branch and removes its workspace (database and files). */
export async function deleteBranch({
  ctx,
  pool,
  projectSlug,
  id,
}: {
  ctx: OrgCtx;
  pool: WorkspacePool;
  projectSlug: string;
  id: string;
}): Promise<void> {
  authorize(ctx, "projects:lifecycle");
  const project = await findProject(ctx, projectSlug);
  const branch = await findBranch(ctx, project, id);
  await inOrgTransaction(ctx, async (trx) => {
    const deleted = await trx.deleteFrom("branches").where("id", "=", branch.id).executeTakeFirst();
    if (Number(deleted.numDeletedRows) === 0) throw new NotFoundError("branch not found");
    await trx.deleteFrom("workspace_outbox_hints").where("project_id", "=", branch.id).execute();
    // Hooks its admin added to the branch (it starts with none) go with it.
    await trx
      .updateTable("webhooks")
      .set({ deleted_at: ctx.deps.clock.now().toISOString(), active: 0 })
      .where("project_id", "=", branch.id)
      .where("deleted_at", "is", null)
      .execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "branch.deleted",
      target: { type: "branch", id: branch.id },
      data: { projectId: project.id, name: branch.name },
    });
    await emitOrgEvent(trx, ctx.deps, {
      orgId: ctx.org.id,
      kind: "branch.deleted",
      payload: branchEventPayload(project, branch),
    });
  });
  // The branch is gone with the commit (its workspace URL is 404); what is left on disk goes now.
  await dropCopy(ctx.deps, pool, branch.id).catch((error: unknown) =>
    ctx.deps.log.error({ err: error, branchId: branch.id }, "removing a deleted branch's workspace failed"),
  );
  await measureBranched(ctx.deps, project.id);
}
