import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import {
  anyone,
  authedErrors,
  createRouter,
  errorResponses,
  jsonBody,
  jsonContent,
  OkSchema,
  sessionOrKey,
} from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { pageQuery } from "../fields.ts";
import { SlugParams } from "../orgs/schemas.ts";
import {
  AdminTokenResponse,
  CreatedProjectResponse,
  CreateProjectInput,
  DeploysResponse,
  ProjectDetailResponse,
  ProjectParams,
  ProjectResponse,
  ProjectsResponse,
  TemplatesResponse,
  UpdateProjectInput,
  UpgradeQuery,
  UpgradeResult,
} from "./schemas.ts";
import {
  createProject,
  DEPLOYS_LIMIT,
  DEPLOYS_MAX_LIMIT,
  deleteProject,
  getProject,
  listDeploys,
  listProjects,
  PROJECTS_LIMIT,
  PROJECTS_MAX_LIMIT,
  pauseProject,
  reprovisionAdmin,
  resumeProject,
  retryProvisioning,
  updateProject,
  upgradeProject,
} from "./service.ts";
import { listTemplates } from "./templates.ts";

const tags = ["Projects"];
function lifecycleRoute(path: string, summary: string) {
  return createRoute({
    method: "post",
    path,
    tags,
    summary,
    security: sessionOrKey,
    request: { params: ProjectParams },
    responses: { 200: jsonContent(ProjectResponse, "The project"), ...authedErrors },
  });
}

const routes = {
  list: createRoute({
    method: "get",
    path: "/org/{slug}/projects",
    tags,
    summary: "List the org's projects, oldest first (limit default 100, at most 500; offset)",
    security: sessionOrKey,
    request: { params: SlugParams, query: z.object(pageQuery(PROJECTS_LIMIT, PROJECTS_MAX_LIMIT)) },
    responses: { 200: jsonContent(ProjectsResponse, "Projects"), ...authedErrors },
  }),
  create: createRoute({
    method: "post",
    path: "/org/{slug}/projects",
    tags,
    summary: "Create a project; provisioning starts and the admin token is returned once",
    security: sessionOrKey,
    request: { params: SlugParams, body: jsonBody(CreateProjectInput) },
    responses: { 201: jsonContent(CreatedProjectResponse, "The new project"), ...authedErrors },
  }),
  get: createRoute({
    method: "get",
    path: "/org/{slug}/projects/{projectSlug}",
    tags,
    summary: "A project and the latest version of its template",
    security: sessionOrKey,
    request: { params: ProjectParams },
    responses: { 200: jsonContent(ProjectDetailResponse, "The project"), ...authedErrors },
  }),
  update: createRoute({
    method: "patch",
    path: "/org/{slug}/projects/{projectSlug}",
    tags,
    summary: "Rename a project or change its environment",
    security: sessionOrKey,
    request: { params: ProjectParams, body: jsonBody(UpdateProjectInput) },
    responses: { 200: jsonContent(ProjectResponse, "The project"), ...authedErrors },
  }),
  remove: createRoute({
    method: "delete",
    path: "/org/{slug}/projects/{projectSlug}",
    tags,
    summary: "Delete a project (admin); it is purged after PROJECT_PURGE_DAYS",
    security: sessionOrKey,
    request: { params: ProjectParams },
    responses: { 200: jsonContent(OkSchema, "Deleted"), ...authedErrors },
  }),
  pause: lifecycleRoute("/org/{slug}/projects/{projectSlug}/pause", "Pause an active project"),
  resume: lifecycleRoute("/org/{slug}/projects/{projectSlug}/resume", "Resume a paused project"),
  retry: lifecycleRoute("/org/{slug}/projects/{projectSlug}/provision-retry", "Provision a failed project again"),
  reprovisionAdmin: createRoute({
    method: "post",
    path: "/org/{slug}/projects/{projectSlug}/reprovision-admin",
    tags,
    summary: "Issue a new workspace admin token (admin); the old one stops working",
    security: sessionOrKey,
    request: { params: ProjectParams },
    responses: { 200: jsonContent(AdminTokenResponse, "The project and its new admin token"), ...authedErrors },
  }),
  upgrade: createRoute({
    method: "post",
    path: "/org/{slug}/projects/{projectSlug}/upgrade",
    tags,
    summary: "Migrate the workspace to a template version (the latest by default)",
    security: sessionOrKey,
    request: { params: ProjectParams, query: UpgradeQuery },
    responses: { 200: jsonContent(UpgradeResult, "What happened: upgraded, skipped or failed"), ...authedErrors },
  }),
  deploys: createRoute({
    method: "get",
    path: "/org/{slug}/projects/{projectSlug}/deploys",
    tags,
    summary: "The project's deploys (provision, upgrade, resume, reprovision), newest first",
    security: sessionOrKey,
    request: { params: ProjectParams, query: z.object(pageQuery(DEPLOYS_LIMIT, DEPLOYS_MAX_LIMIT)) },
    responses: { 200: jsonContent(DeploysResponse, "Deploys"), ...authedErrors },
  }),
  templates: createRoute({
    method: "get",
    path: "/templates",
    tags,
    summary: "The project templates and their versions",
    security: anyone,
    responses: { 200: jsonContent(TemplatesResponse, "Templates"), ...errorResponses(429) },
  }),
};

export function projectRoutes(deps: Deps) {
  return createRouter()
    .openapi({ ...routes.list, middleware: requires(deps, "projects:read") }, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await listProjects({ ctx, query: c.req.valid("query") }), 200);
    })
    .openapi({ ...routes.create, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await createProject({ ctx, input: c.req.valid("json") }), 201);
    })
    .openapi(routes.get, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      return c.json(await getProject({ ctx: await orgCtx(c, deps, slug), projectSlug }), 200);
    })
    .openapi({ ...routes.update, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      const ctx = await orgCtx(c, deps, slug);
      return c.json(await updateProject({ ctx, projectSlug, input: c.req.valid("json") }), 200);
    })
    .openapi({ ...routes.remove, middleware: requires(deps, "projects:delete") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      await deleteProject({ ctx: await orgCtx(c, deps, slug), projectSlug });
      return c.json({ ok: true }, 200);
    })
    .openapi({ ...routes.pause, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      return c.json(await pauseProject({ ctx: await orgCtx(c, deps, slug), projectSlug }), 200);
    })
    .openapi({ ...routes.resume, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      return c.json(await resumeProject({ ctx: await orgCtx(c, deps, slug), projectSlug }), 200);
    })
    .openapi({ ...routes.retry, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      return c.json(await retryProvisioning({ ctx: await orgCtx(c, deps, slug), projectSlug }), 200);
    })
    .openapi({ ...routes.reprovisionAdmin, middleware: requires(deps, "projects:credentials") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      return c.json(await reprovisionAdmin({ ctx: await orgCtx(c, deps, slug), projectSlug }), 200);
    })
    .openapi({ ...routes.upgrade, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      const ctx = await orgCtx(c, deps, slug);
      return c.json(
        await upgradeProject({ ctx, projectSlug, version: c.req.valid("query").version || undefined }),
        200,
      );
    })
    .openapi({ ...routes.deploys, middleware: requires(deps, "projects:read") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      const { limit, offset } = c.req.valid("query");
      return c.json(await listDeploys({ ctx: await orgCtx(c, deps, slug), projectSlug, limit, offset }), 200);
    })
    .openapi(routes.templates, (c) => c.json({ templates: listTemplates() }, 200));
}
