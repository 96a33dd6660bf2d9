import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { requireAccount } from "../../http/principal.ts";
import {
  authedErrors,
  createRouter,
  jsonBody,
  jsonContent,
  OkSchema,
  sessionOnly,
  sessionOrKey,
} from "../../http/router.ts";
import { callerCtx, orgCtx, requires } from "../../http/service-context.ts";
import {
  CreateOrgInput,
  OrgListResponse,
  OrgResponse,
  OverviewResponse,
  SlugParams,
  UpdateOrgInput,
  UpdateOrgResponse,
} from "./schemas.ts";
import { createOrg, deleteOrg, getOverview, listOrgs, updateOrg } from "./service.ts";

const tags = ["Organizations"];

const listOrgsRoute = createRoute({
  method: "get",
  path: "/orgs",
  tags,
  summary: "List the caller's organizations with the caller's role",
  security: sessionOrKey,
  responses: { 200: jsonContent(OrgListResponse, "The caller's organizations"), ...authedErrors },
});

const createOrgRoute = createRoute({
  method: "post",
  path: "/org",
  tags,
  summary: "Create an organization; the caller becomes its owner",
  security: sessionOnly,
  request: { body: jsonBody(CreateOrgInput) },
  responses: { 201: jsonContent(OrgResponse, "The new organization"), ...authedErrors },
});

const overviewRoute = createRoute({
  method: "get",
  path: "/org/{slug}/overview",
  tags,
  summary: "An organization with the caller's role and its projects",
  security: sessionOrKey,
  request: { params: SlugParams },
  responses: { 200: jsonContent(OverviewResponse, "Overview"), ...authedErrors },
});

const updateOrgRoute = createRoute({
  method: "patch",
  path: "/org/{slug}",
  tags,
  summary: "Update an organization (admin)",
  description: "Setting `webhookUrl` to a new URL generates a signing secret for it, returned once as `webhookSecret`.",
  security: sessionOrKey,
  request: { params: SlugParams, body: jsonBody(UpdateOrgInput) },
  responses: { 200: jsonContent(UpdateOrgResponse, "The updated organization"), ...authedErrors },
});

const deleteOrgRoute = createRoute({
  method: "delete",
  path: "/org/{slug}",
  tags,
  summary: "Delete an organization (owner, signed in)",
  security: sessionOnly,
  request: { params: SlugParams },
  responses: { 200: jsonContent(OkSchema, "Deleted"), ...authedErrors },
});

export function orgRoutes(deps: Deps) {
  return createRouter()
    .openapi(listOrgsRoute, async (c) => {
      const orgs = await listOrgs({ ctx: callerCtx(c, deps) });
      return c.json({ orgs }, 200);
    })
    .openapi(createOrgRoute, async (c) => {
      const account = requireAccount(c);
      const org = await createOrg({ ctx: callerCtx(c, deps), account, input: c.req.valid("json") });
      return c.json({ org }, 201);
    })
    .openapi(overviewRoute, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await getOverview({ ctx }), 200);
    })
    .openapi({ ...updateOrgRoute, middleware: requires(deps, "org:update") }, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await updateOrg({ ctx, input: c.req.valid("json") }), 200);
    })
    .openapi(deleteOrgRoute, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      await deleteOrg({ ctx });
      return c.json({ ok: true }, 200);
    });
}
