import type { z } from "@hono/zod-openapi";
import type { Selectable } from "kysely";
import { DAY_MS } from "../../clock.ts";
import { precompiled } from "../../db/compiled.ts";
import type { Db } from "../../db/database.ts";
import type { ProjectsTable } from "../../db/schema.ts";
import { forUpdateOn } from "../../db/shapes.ts";
import type { Deps } from "../../deps.ts";
import { ConflictError, errorMessage, NotFoundError, PlanLimitError, ValidationError } from "../../errors.ts";
import { newId } from "../../lib/ids.ts";
import { firstFreeSlug, slugify } from "../../lib/slug.ts";
import { randomHex, sha256Hex } from "../../lib/tokens.ts";
import { recordAudit } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { forgetHost } from "../domains/hosts.ts";
import { withFreshSlug } from "../fresh-slug.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { planOf } from "../plans/service.ts";
import { emitOrgEvent } from "../webhooks/events.ts";
import { holdingWrites } from "../workspace/write-gate.ts";
import type { CreateProjectInput, DeploySchema, ProjectSchema, UpdateProjectInput, UpgradeResult } from "./schemas.ts";
import { compareVersions, DEFAULT_TEMPLATE, findTemplate, latestVersion, resolveTemplateRef } from "./templates.ts";
import { migrateWorkspace } from "./workspace-db.ts";

export type ProjectRow = Selectable<ProjectsTable>;
type Project = z.infer<typeof ProjectSchema>;
type Deploy = z.infer<typeof DeploySchema>;

function toProject(row: ProjectRow, publicUrl: string): Project {
  return {
    id: row.id,
    slug: row.slug,
    name: row.name,
    status: row.status as Project["status"],
    environment: row.environment as Project["environment"],
    signUp: (row.sign_up ?? "open") as Project["signUp"],
    region: row.region,
    primaryRegion: row.region,
    dbType: row.db_type,
    template: row.template,
    templateVersion: row.template_version,
    workspaceUrl: `${publicUrl}/w/${row.id}`,
    failureReason: row.failure_reason,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function adminToken(): string {
  return `wsa_${randomHex(32)}`;
}

interface Page {
  limit: number;
  offset: number;
}

/** A page of the org's live projects, oldest first (the overview reads the first on every visit). */
const liveProjectRows = precompiled<ProjectRow>((db) =>
  db
    .selectFrom("projects")
    .selectAll()
    .where("org_id", "=", "?")
    .where("deleted_at", "is", null)
    .orderBy("created_at")
    .orderBy("id")
    .limit(PROJECTS_LIMIT)
    .offset(0),
);

function liveProjects(deps: Deps, orgId: string, { limit, offset }: Page): Promise<ProjectRow[]> {
  return liveProjectRows(deps.db, deps.dialect, orgId, limit, offset);
}

/** How many live projects the org has. */
export async function countProjects(db: Db, orgId: string): Promise<number> {
  const row = await db
    .selectFrom("projects")
    .select((eb) => eb.fn.countAll().as("count"))
    .where("org_id", "=", orgId)
    .where("deleted_at", "is", null)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** The org's first `limit` live projects, in brief (the overview's). */
export async function projectSummaries(deps: Deps, orgId: string, limit: number) {
  const rows = await liveProjects(deps, orgId, { limit, offset: 0 });
  return rows.map((row) => ({
    id: row.id,
    slug: row.slug,
    name: row.name,
    status: row.status,
    environment: row.environment,
    primaryRegion: row.region,
  }));
}

/**
 * 409 unless the project's workspace exists and is not changing shape (active or paused): what
 * backups, restores and branches need. `what`: what cannot be done otherwise (`restored`).
 */
export function assertWorkspaceSettled(project: Pick<ProjectRow, "status">, what: string): void {
  if (project.status !== "active" && project.status !== "paused") {
    throw new ConflictError(`project is ${project.status}; only an active or paused project can be ${what}`);
  }
}

export async function findProject(ctx: OrgCtx, projectSlug: string): Promise<ProjectRow> {
  const row = await ctx.deps.db
    .selectFrom("projects")
    .selectAll()
    .where("org_id", "=", ctx.org.id)
    .where("slug", "=", projectSlug)
    .where("deleted_at", "is", null)
    .executeTakeFirst();
  if (!row) throw new NotFoundError("project not found");
  return row;
}

export const PROJECTS_LIMIT = 100;
export const PROJECTS_MAX_LIMIT = 500;

export async function listProjects({ ctx, query }: { ctx: OrgCtx; query: Partial<Page> }) {
  authorize(ctx, "projects:read");
  const page = { limit: query.limit ?? PROJECTS_LIMIT, offset: query.offset ?? 0 };
  const rows = await liveProjects(ctx.deps, ctx.org.id, page);
  return { projects: rows.map((row) => toProject(row, ctx.deps.config.publicUrl)) };
}

export async function getProject({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }) {
  authorize(ctx, "projects:read");
  const row = await findProject(ctx, projectSlug);
  return { project: toProject(row, ctx.deps.config.publicUrl), latestTemplateVersion: latestVersion(row.template) };
}

export async function insertDeploy(
  trx: Db,
  deps: Deps,
  projectId: string,
  deploy: {
    kind: Deploy["kind"];
    status: Deploy["status"] | "skipped";
    from?: string | null;
    to?: string;
    error?: string;
  },
): Promise<string> {
  const now = deps.clock.now().toISOString();
  const id = newId("dep");
  await trx
    .insertInto("deploys")
    .values({
      id,
      project_id: projectId,
      kind: deploy.kind,
      status: deploy.status,
      from_version: deploy.from ?? null,
      to_version: deploy.to ?? null,
      error: deploy.error ?? null,
      created_at: now,
      finished_at: deploy.status === "pending" ? null : now,
    })
    .execute();
  return id;
}

/** Creates the project and queues its provisioning; the admin token is returned this once. */
export async function createProject({ ctx, input }: { ctx: OrgCtx; input: z.infer<typeof CreateProjectInput> }) {
  authorize(ctx, "projects:lifecycle");
  const template = resolveTemplateRef(input.template ?? DEFAULT_TEMPLATE);
  if (!template) {
    throw new ValidationError([{ path: "template", message: "unknown template or version; see GET /api/templates" }]);
  }
  const { deps } = ctx;
  const base = slugify(input.name, "project");
  const token = adminToken();
  // Exclusive: slug choice for an org's projects runs one at a time.
  const row = await withFreshSlug("project", () =>
    inOrgTransaction(
      ctx,
      async (trx) => {
        // The plan's cap on live projects (DESIGN §8), counted under the org's lock.
        const cap = planOf(deps.config, ctx.org.plan_id).limits.projects;
        if (cap !== null) {
          const live = await trx
            .selectFrom("projects")
            .select((eb) => eb.fn.countAll<number | string>().as("n"))
            .where("org_id", "=", ctx.org.id)
            .where("deleted_at", "is", null)
            .executeTakeFirstOrThrow();
          if (Number(live.n) >= cap) {
            throw new PlanLimitError(`the ${ctx.org.plan_id} plan allows ${cap} projects`, {
              limit: cap,
              used: Number(live.n),
              planId: ctx.org.plan_id,
            });
          }
        }
        const taken = await trx
          .selectFrom("projects")
          .select("slug")
          .where("org_id", "=", ctx.org.id)
          .where("deleted_at", "is", null)
          .where((eb) => eb.or([eb("slug", "=", base), eb("slug", "like", `${base}-%`)]))
          .execute();
        const now = deps.clock.now();
        const at = now.toISOString();
        const project: ProjectRow = {
          id: newId("prj", now),
          org_id: ctx.org.id,
          slug: firstFreeSlug(base, new Set(taken.map((t) => t.slug))),
          name: input.name,
          status: "provisioning",
          environment: "production",
          sign_up: "open",
          region: input.region ?? ctx.org.default_region,
          db_type: input.dbType ?? "d1",
          template: template.name,
          template_version: template.version,
          admin_token_hash: sha256Hex(token),
          failure_reason: null,
          created_at: at,
          updated_at: at,
          deleted_at: null,
          purge_after: null,
          purged_at: null,
          history_since: null,
        };
        await trx.insertInto("projects").values(project).execute();
        const deployId = await insertDeploy(trx, deps, project.id, {
          kind: "provision",
          status: "pending",
          to: template.version,
        });
        await deps.jobs.enqueue(trx, { kind: "project.provision", payload: { projectId: project.id, deployId } });
        await recordAudit(trx, ctx, {
          orgId: ctx.org.id,
          action: "project.created",
          target: { type: "project", id: project.id },
          data: {
            slug: project.slug,
            name: project.name,
            region: project.region,
            template: `${template.name}@${template.version}`,
          },
        });
        return project;
      },
      { exclusive: true },
    ),
  );
  return { project: { ...toProject(row, deps.config.publicUrl), adminToken: token }, adminToken: token };
}

export async function updateProject({
  ctx,
  projectSlug,
  input,
}: {
  ctx: OrgCtx;
  projectSlug: string;
  input: z.infer<typeof UpdateProjectInput>;
}) {
  authorize(ctx, "projects:lifecycle");
  const project = await findProject(ctx, projectSlug);
  const changes = {
    ...(input.name !== undefined && input.name !== project.name ? { name: input.name } : {}),
    ...(input.environment !== undefined && input.environment !== project.environment
      ? { environment: input.environment }
      : {}),
    ...(input.signUp !== undefined && input.signUp !== project.sign_up ? { signUp: input.signUp } : {}),
  };
  if (Object.keys(changes).length === 0) return { project: toProject(project, ctx.deps.config.publicUrl) };
  const updated = await inOrgTransaction(ctx, async (trx) => {
    const row = await trx
      .updateTable("projects")
      .set({
        name: changes.name,
        environment: changes.environment,
        sign_up: changes.signUp,
        updated_at: ctx.deps.clock.now().toISOString(),
      })
      .where("id", "=", project.id)
      .where("deleted_at", "is", null)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw new NotFoundError("project not found");
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "project.updated",
      target: { type: "project", id: project.id },
      data: changes,
    });
    return row;
  });
  return { project: toProject(updated, ctx.deps.config.publicUrl) };
}

/**
 * Moves a project from one status to another if it is still in `from` (a compare-and-set, so two
 * racing requests cannot both pass), with the audit row and whatever `also` writes, in one
 * transaction. 409 when the project is not in a status the transition starts from.
 */
async function transition(
  ctx: OrgCtx,
  projectSlug: string,
  spec: {
    from: string[];
    /** Omitted: the status stays as it is. */
    to?: string;
    action: string;
    verb: string;
    set?: Partial<ProjectRow>;
    also?: (trx: Db, project: ProjectRow) => Promise<void>;
  },
): Promise<ProjectRow> {
  const project = await findProject(ctx, projectSlug);
  if (!spec.from.includes(project.status)) {
    throw new ConflictError(`cannot ${spec.verb} a project that is ${project.status}`);
  }
  return inOrgTransaction(ctx, async (trx) => {
    const row = await trx
      .updateTable("projects")
      .set({ ...(spec.to ? { status: spec.to } : {}), updated_at: ctx.deps.clock.now().toISOString(), ...spec.set })
      .where("id", "=", project.id)
      .where("status", "in", spec.from)
      .where("deleted_at", "is", null)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw new ConflictError(`cannot ${spec.verb} the project: its status just changed`);
    await spec.also?.(trx, row);
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: spec.action,
      target: { type: "project", id: project.id },
      data: { slug: project.slug, from: project.status, to: spec.to ?? project.status },
    });
    return row;
  });
}

/** The payload of a `project.*` event. */
export function projectEventPayload(project: ProjectRow, extra: Record<string, unknown> = {}) {
  return {
    projectId: project.id,
    projectSlug: project.slug,
    projectName: project.name,
    region: project.region,
    templateVersion: project.template_version,
    ...extra,
  };
}

export async function pauseProject({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }) {
  authorize(ctx, "projects:lifecycle");
  const row = await transition(ctx, projectSlug, {
    from: ["active"],
    to: "paused",
    action: "project.paused",
    verb: "pause",
    also: (trx, project) =>
      emitOrgEvent(trx, ctx.deps, { orgId: ctx.org.id, kind: "project.paused", payload: projectEventPayload(project) }),
  });
  return { project: toProject(row, ctx.deps.config.publicUrl) };
}

export async function resumeProject({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }) {
  authorize(ctx, "projects:lifecycle");
  const row = await transition(ctx, projectSlug, {
    from: ["paused"],
    to: "active",
    action: "project.resumed",
    verb: "resume",
    also: async (trx, project) => {
      await insertDeploy(trx, ctx.deps, project.id, {
        kind: "resume",
        status: "succeeded",
        from: project.template_version,
        to: project.template_version,
      });
      await emitOrgEvent(trx, ctx.deps, {
        orgId: ctx.org.id,
        kind: "project.resumed",
        payload: projectEventPayload(project),
      });
    },
  });
  return { project: toProject(row, ctx.deps.config.publicUrl) };
}

export async function retryProvisioning({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }) {
  authorize(ctx, "projects:lifecycle");
  const row = await transition(ctx, projectSlug, {
    from: ["failed"],
    to: "provisioning",
    action: "project.provision_retried",
    verb: "retry provisioning of",
    set: { failure_reason: null },
    also: async (trx, project) => {
      const deployId = await insertDeploy(trx, ctx.deps, project.id, {
        kind: "provision",
        status: "pending",
        to: project.template_version,
      });
      await ctx.deps.jobs.enqueue(trx, { kind: "project.provision", payload: { projectId: project.id, deployId } });
    },
  });
  return { project: toProject(row, ctx.deps.config.publicUrl) };
}

/** A new workspace admin token; the old one stops working with this commit. */
export async function reprovisionAdmin({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }) {
  authorize(ctx, "projects:credentials");
  const token = adminToken();
  const row = await transition(ctx, projectSlug, {
    from: ["active", "paused"],
    action: "project.admin_token_rotated",
    verb: "rotate the admin token of",
    set: { admin_token_hash: sha256Hex(token) },
    also: async (trx, current) => {
      await insertDeploy(trx, ctx.deps, current.id, {
        kind: "reprovision",
        status: "succeeded",
        from: current.template_version,
        to: current.template_version,
      });
    },
  });
  return { project: toProject(row, ctx.deps.config.publicUrl), adminToken: token };
}

/** Soft-deletes the project: it vanishes from reads now and is purged after PROJECT_PURGE_DAYS. */
export async function deleteProject({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }): Promise<void> {
  authorize(ctx, "projects:delete");
  const project = await findProject(ctx, projectSlug);
  const now = ctx.deps.clock.now();
  let released: Array<{ hostname: string }> = [];
  await inOrgTransaction(ctx, async (trx) => {
    const deleted = await trx
      .updateTable("projects")
      .set({
        status: "deleted",
        deleted_at: now.toISOString(),
        updated_at: now.toISOString(),
        purge_after: new Date(now.getTime() + ctx.deps.config.projectPurgeDays * DAY_MS).toISOString(),
      })
      .where("id", "=", project.id)
      .where("deleted_at", "is", null)
      .executeTakeFirst();
    if (Number(deleted.numUpdatedRows) === 0) throw new NotFoundError("project not found");
    // Its custom domains stop serving now, and their names are free for another project.
    released = await trx.deleteFrom("domains").where("project_id", "=", project.id).returning("hostname").execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "project.deleted",
      target: { type: "project", id: project.id },
      data: { slug: project.slug, from: project.status },
    });
  });
  for (const { hostname } of released) forgetHost(hostname);
}

/** Soft-deletes every live project of an org (the org itself is being deleted). */
export async function deleteOrgProjects(trx: Db, deps: Deps, orgId: string): Promise<void> {
  const now = deps.clock.now();
  // Their custom domains stop serving (other processes within seconds) and free their names.
  await trx
    .deleteFrom("domains")
    .where("project_id", "in", trx.selectFrom("projects").select("id").where("org_id", "=", orgId))
    .execute();
  await trx
    .updateTable("projects")
    .set({
      status: "deleted",
      deleted_at: now.toISOString(),
      updated_at: now.toISOString(),
      purge_after: new Date(now.getTime() + deps.config.projectPurgeDays * DAY_MS).toISOString(),
    })
    .where("org_id", "=", orgId)
    .where("deleted_at", "is", null)
    .execute();
}

type Upgrade = z.infer<typeof UpgradeResult>;

/**
 * Migrates the workspace forward to `version` (the latest by default) in one transaction.
 * Always answers with the outcome: `upgraded`, `skipped` (already there or newer) or `failed`
 * (the workspace is left exactly as it was). Simultaneous upgrades of one workspace run one
 * after another, and the later ones find the work done (`skipped`).
 */
export async function upgradeProject({
  ctx,
  projectSlug,
  version,
}: {
  ctx: OrgCtx;
  projectSlug: string;
  version: string | undefined;
}): Promise<Upgrade> {
  authorize(ctx, "projects:lifecycle");
  const { deps } = ctx;
  const found = await findProject(ctx, projectSlug);
  const template = findTemplate(found.template);
  const to = version ?? latestVersion(found.template);
  if (!template || !to || !template.versions.some((v) => v.version === to)) {
    throw new ValidationError([
      { path: "version", message: `unknown version of template '${found.template}'; see GET /api/templates` },
    ]);
  }
  if (found.status !== "active") throw new ConflictError(`cannot upgrade a project that is ${found.status}`);
  const from = found.template_version;
  // The migration runs on a workspace connection of its own, outside any control-plane
  // transaction: holding one connection while waiting for another would let enough concurrent
  // upgrades take the whole pool and wait forever. Upgrades of one workspace queue inside
  // migrateWorkspace; the ones after the first find the work done.
  let result: Upgrade;
  if (compareVersions(to, from) <= 0) {
    result = {
      status: "skipped",
      from,
      to,
      reason: to === from ? `already at ${from}` : `${to} is older than the current ${from}`,
    };
  } else {
    try {
      // After any restore of the workspace, and with this process's writes held back: on SQLite
      // the migration's connection would otherwise wait on their lock in the busy handler.
      const migrated = await holdingWrites(found.id, () => migrateWorkspace(deps, found.id, found.template, to));
      result =
        migrated.from !== null && compareVersions(migrated.from, to) >= 0
          ? { status: "skipped", from: migrated.from, to, reason: `already at ${migrated.from}` }
          : { status: "upgraded", from, to };
    } catch (error) {
      result = { status: "failed", from, to, error: errorMessage(error) };
    }
  }
  return inOrgTransaction(ctx, async (trx) => {
    const locked = trx.selectFrom("projects").select("id").where("id", "=", found.id).where("deleted_at", "is", null);
    if (!(await forUpdateOn(deps.dialect, locked).executeTakeFirst())) throw new NotFoundError("project not found");
    if (result.status === "upgraded") {
      await trx
        .updateTable("projects")
        .set({ template_version: to, updated_at: deps.clock.now().toISOString() })
        .where("id", "=", found.id)
        .execute();
    }
    await insertDeploy(trx, deps, found.id, {
      kind: "upgrade",
      status: result.status === "upgraded" ? "succeeded" : result.status,
      from: result.from,
      to,
      ...(result.error ? { error: result.error } : {}),
    });
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: result.status === "upgraded" ? "project.upgraded" : `project.upgrade_${result.status}`,
      target: { type: "project", id: found.id },
      data: { from: result.from, to, ...(result.error ? { error: result.error } : {}) },
    });
    return result;
  });
}

/** Deploys a list shows by default, and at most. */
export const DEPLOYS_LIMIT = 100;
export const DEPLOYS_MAX_LIMIT = 500;

export async function listDeploys({
  ctx,
  projectSlug,
  limit = DEPLOYS_LIMIT,
  offset = 0,
}: {
  ctx: OrgCtx;
  projectSlug: string;
  limit?: number;
  offset?: number;
}) {
  authorize(ctx, "projects:read");
  const project = await findProject(ctx, projectSlug);
  const rows = await ctx.deps.db
    .selectFrom("deploys")
    .selectAll()
    .where("project_id", "=", project.id)
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .limit(limit)
    .offset(offset)
    .execute();
  return {
    deploys: rows.map((row) => ({
      id: row.id,
      kind: row.kind as Deploy["kind"],
      status: row.status as Deploy["status"],
      fromVersion: row.from_version,
      toVersion: row.to_version,
      error: row.error,
      createdAt: row.created_at,
      finishedAt: row.finished_at,
    })),
  };
}
