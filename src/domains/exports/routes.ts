import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, errorResponses, jsonContent, sessionOrKey } from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { SlugParams } from "../orgs/schemas.ts";
import type { WorkspacePool } from "../workspace/pool.ts";
import { ExportParams, ExportResponse } from "./schemas.ts";
import { exportOrg, openExport } from "./service.ts";

const tags = ["Organizations"];

const exportRoute = createRoute({
  method: "post",
  path: "/org/{slug}/export",
  tags,
  summary: "Export every live project's workspace as a portable SQL dump (admin)",
  description:
    "One dump per project that is not deleted, each written to disk before the answer. A dump is plain SQL " +
    "(`BEGIN;`, `CREATE TABLE`, `INSERT`, `CREATE INDEX`, `COMMIT;`) of every workspace table but the event " +
    "outbox, as of one moment, that `sqlite3` loads into an empty database and `psql` into an empty schema. " +
    "Workspace users' sessions are left out; a project with no workspace yet gets a dump that creates nothing. " +
    "Dumps are kept EXPORT_RETENTION_DAYS.",
  security: sessionOrKey,
  request: { params: SlugParams },
  responses: {
    200: jsonContent(ExportResponse, "The dumps written, one per project"),
    ...authedErrors,
    ...errorResponses(503),
  },
});

const downloadRoute = createRoute({
  method: "get",
  path: "/org/{slug}/exports/{filename}",
  tags,
  summary: "Download a dump an export wrote (admin)",
  security: sessionOrKey,
  request: { params: ExportParams },
  responses: {
    200: {
      description: "The dump, as an attachment",
      content: { "application/sql": { schema: z.string().openapi({ format: "binary" }) } },
    },
    ...authedErrors,
  },
});

export function exportRoutes(deps: Deps, workspaces: WorkspacePool) {
  return createRouter()
    .openapi({ ...exportRoute, middleware: requires(deps, "org:export") }, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await exportOrg({ ctx, workspaces }), 200);
    })
    .openapi(downloadRoute, async (c) => {
      const { slug, filename } = c.req.valid("param");
      const dump = await openExport({ ctx: await orgCtx(c, deps, slug), filename });
      return c.body(dump.content, 200, {
        "Content-Type": "application/sql",
        "Content-Length": String(dump.size),
        "Content-Disposition": `attachment; filename="${dump.filename}"`,
        "X-Content-Type-Options": "nosniff",
      });
    });
}
