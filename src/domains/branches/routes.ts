import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, jsonBody, jsonContent, sessionOrKey } from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { ProjectParams } from "../projects/schemas.ts";
import type { WorkspacePool } from "../workspace/pool.ts";
import { BranchesResponse, BranchParams, BranchResponse, CreateBranchInput, CreatedBranchResponse } from "./schemas.ts";
import { createBranch, deleteBranch, getBranch, listBranches, resetBranch } from "./service.ts";

const tags = ["Branches"];
const BRANCHES = "/org/{slug}/projects/{projectSlug}/branches";

const routes = {
  create: createRoute({
    method: "post",
    path: BRANCHES,
    tags,
    summary: "Branch the project: a copy of its workspace (as of now, or of `at` in its restore window)",
    description:
      "Answers once the copy is made: the branch `active`, or `failed` with its `error` (nothing left behind). " +
      "The branch has its own workspace API at `{workspaceUrl}/api`, its own admin token (returned this once) and no webhooks. " +
      `At most 10 branches per project (409 PLAN_LIMIT).`,
    security: sessionOrKey,
    request: { params: ProjectParams, body: jsonBody(CreateBranchInput) },
    responses: { 201: jsonContent(CreatedBranchResponse, "The new branch"), ...authedErrors },
  }),
  list: createRoute({
    method: "get",
    path: BRANCHES,
    tags,
    summary: "List the project's branches, newest first",
    security: sessionOrKey,
    request: { params: ProjectParams },
    responses: { 200: jsonContent(BranchesResponse, "Branches"), ...authedErrors },
  }),
  get: createRoute({
    method: "get",
    path: `${BRANCHES}/{id}`,
    tags,
    summary: "Get a branch",
    security: sessionOrKey,
    request: { params: BranchParams },
    responses: { 200: jsonContent(BranchResponse, "The branch"), ...authedErrors },
  }),
  delete: createRoute({
    method: "delete",
    path: `${BRANCHES}/{id}`,
    tags,
    summary: "Delete a branch and its workspace",
    security: sessionOrKey,
    request: { params: BranchParams },
    responses: { 204: { description: "Deleted" }, ...authedErrors },
  }),
  reset: createRoute({
    method: "post",
    path: `${BRANCHES}/{id}/reset`,
    tags,
    summary: "Copy the project's current data into the branch again (the branch's own changes are lost)",
    security: sessionOrKey,
    request: { params: BranchParams },
    responses: {
      200: jsonContent(BranchResponse, "The branch, active again (or failed, with its error)"),
      ...authedErrors,
    },
  }),
};

export function branchRoutes(deps: Deps, pool: WorkspacePool) {
  return createRouter()
    .openapi({ ...routes.create, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      const ctx = await orgCtx(c, deps, slug);
      return c.json(await createBranch({ ctx, pool, projectSlug, input: c.req.valid("json") }), 201);
    })
    .openapi(routes.list, async (c) => {
      const { slug, projectSlug } = c.req.valid("param");
      return c.json(await listBranches({ ctx: await orgCtx(c, deps, slug), projectSlug }), 200);
    })
    .openapi(routes.get, async (c) => {
      const { slug, projectSlug, id } = c.req.valid("param");
      return c.json(await getBranch({ ctx: await orgCtx(c, deps, slug), projectSlug, id }), 200);
    })
    .openapi({ ...routes.delete, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug, id } = c.req.valid("param");
      await deleteBranch({ ctx: await orgCtx(c, deps, slug), pool, projectSlug, id });
      return c.body(null, 204);
    })
    .openapi({ ...routes.reset, middleware: requires(deps, "projects:lifecycle") }, async (c) => {
      const { slug, projectSlug, id } = c.req.valid("param");
      return c.json(await resetBranch({ ctx: await orgCtx(c, deps, slug), pool, projectSlug, id }), 200);
    });
}
