import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, jsonBody, jsonContent, sessionOrKey } from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { ProjectParams } from "../projects/schemas.ts";
import type { WorkspaceRuntime } from "../workspace/access.ts";
import { PitrRestoreInput, PitrRestoreResult, RestoreWindowSchema } from "./schemas.ts";
import { getRestoreWindow, restoreToTimestamp } from "./service.ts";

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

export function backupRoutes(deps: Deps, runtime: WorkspaceRuntime) {
  return createRouter()
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
