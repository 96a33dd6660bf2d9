import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, emptyBodyIsNone, jsonBody, jsonContent, sessionOrKey } from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { ProjectParams } from "../projects/schemas.ts";
import type { WorkspaceRuntime } from "../workspace/access.ts";
import {
  BackupInput,
  BackupList,
  BackupParams,
  BackupResponse,
  PitrRestoreInput,
  PitrRestoreResult,
  RestoreWindowSchema,
} from "./schemas.ts";
import {
  createBackup,
  deleteBackup,
  getBackup,
  getRestoreWindow,
  listBackups,
  restoreBackup,
  restoreToTimestamp,
} from "./service.ts";

const tags = ["Backups and restores"];

const restoreRoute = createRoute({
  method: "post",
  path: "/org/{slug}/projects/{projectSlug}/restore",
  tags,
  summary: "Restore the workspace to an instant of its restore window, from continuous history",
  description:
    "The workspace then holds exactly what was committed at or before the instant (Unix ms; below 10^11 read as seconds), atomically; " +
    "the restore is itself history, so restoring to an instant just before it undoes it. Webhooks are left alone; " +
    "one `workspace:restored` event goes out, and `project.restored` on the control plane.",
  security: sessionOrKey,
  request: { params: ProjectParams, body: jsonBody(PitrRestoreInput) },
  responses: { 200: jsonContent(PitrRestoreResult, "Restored"), ...authedErrors },
});

const windowRoute = createRoute({
  method: "get",
  path: "/org/{slug}/projects/{projectSlug}/restore-window",
  tags,
  summary: "The instants a point-in-time restore can reach",
  security: sessionOrKey,
  request: { params: ProjectParams },
  responses: { 200: jsonContent(RestoreWindowSchema, "The restore window"), ...authedErrors },
});

const backups = "/org/{slug}/projects/{projectSlug}/backups";

const createBackupRoute = createRoute({
  method: "post",
  path: backups,
  tags,
  summary: "Back up the project's workspace",
  description:
    "Records a `pending` backup and takes a consistent snapshot of the workspace (its data and the bytes of every listed file) in a job, " +
    "which sets it `completed` (or `failed` with `error`, and notifies the org's admins). The project must be active or paused. " +
    "Manual backups are kept until deleted and capped per plan (409 `PLAN_LIMIT`); automatic ones expire after the plan's restore window.",
  security: sessionOrKey,
  request: {
    params: ProjectParams,
    body: { required: false, content: { "application/json": { schema: BackupInput } } },
  },
  responses: { 201: jsonContent(BackupResponse, "The backup, pending"), ...authedErrors },
});

const listBackupsRoute = createRoute({
  method: "get",
  path: backups,
  tags,
  summary: "The project's backups, newest first",
  security: sessionOrKey,
  request: { params: ProjectParams },
  responses: { 200: jsonContent(BackupList, "The backups"), ...authedErrors },
});

const getBackupRoute = createRoute({
  method: "get",
  path: `${backups}/{id}`,
  tags,
  summary: "One backup",
  security: sessionOrKey,
  request: { params: BackupParams },
  responses: { 200: jsonContent(BackupResponse, "The backup"), ...authedErrors },
});

const deleteBackupRoute = createRoute({
  method: "delete",
  path: `${backups}/{id}`,
  tags,
  summary: "Delete a backup and its snapshot",
  security: sessionOrKey,
  request: { params: BackupParams },
  responses: { 204: { description: "Deleted" }, ...authedErrors },
});

const restoreBackupRoute = createRoute({
  method: "post",
  path: `${backups}/{id}/restore`,
  tags,
  summary: "Restore the workspace from a completed backup",
  description:
    "Answers once the workspace is exactly the snapshot, switched in one transaction: readers never see a half-restored workspace, and writes wait for it. " +
    "A snapshot older than the workspace's template version is migrated forward first. The restore is itself history: a point-in-time restore " +
    "to an instant before it undoes it. Webhooks are left alone; one `workspace:restored` event goes out, and `project.restored` on the control plane. " +
    "409 unless the backup is completed and the project active or paused.",
  security: sessionOrKey,
  request: { params: BackupParams },
  responses: { 200: jsonContent(BackupResponse, "The backup the workspace now holds"), ...authedErrors },
});

export function backupRoutes(deps: Deps, runtime: WorkspaceRuntime) {
  return createRouter()
    .openapi(
      { ...createBackupRoute, middleware: [emptyBodyIsNone, requires(deps, "projects:lifecycle")] },
      async (c) => {
        const { slug, projectSlug } = c.req.valid("param");
        const ctx = await orgCtx(c, deps, slug);
        // The body is validated (BackupInput refuses `auto`); a manual backup is all it can ask for.
        return c.json(await createBackup({ ctx, projectSlug }), 201);
      },
    )
    .openapi(listBackupsRoute, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      return c.json(await listBackups({ ctx: await orgCtx(c, deps, slug), projectSlug }), 200);
    })
    .openapi(getBackupRoute, async (c) => {
      const { slug, projectSlug, id } = c.req.valid("param");
      return c.json(await getBackup({ ctx: await orgCtx(c, deps, slug), projectSlug, id }), 200);
    })
    .openapi({ ...deleteBackupRoute, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug, id } = c.req.valid("param");
      await deleteBackup({ ctx: await orgCtx(c, deps, slug), projectSlug, id });
      return c.body(null, 204);
    })
    .openapi({ ...restoreBackupRoute, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug, id } = c.req.valid("param");
      const ctx = await orgCtx(c, deps, slug);
      return c.json(await restoreBackup({ ctx, runtime, projectSlug, id }), 200);
    })
    .openapi({ ...restoreRoute, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      const ctx = await orgCtx(c, deps, slug);
      return c.json(await restoreToTimestamp({ ctx, runtime, projectSlug, input: c.req.valid("json") }), 200);
    })
    .openapi(windowRoute, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      return c.json(await getRestoreWindow({ ctx: await orgCtx(c, deps, slug), projectSlug }), 200);
    });
}
