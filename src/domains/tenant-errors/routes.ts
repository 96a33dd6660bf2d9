import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, jsonContent, sessionOrKey } from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { ProjectParams } from "../projects/schemas.ts";
import { TenantErrorList, TenantErrorQuery } from "./schemas.ts";
import { listTenantErrors } from "./service.ts";

const listRoute = createRoute({
  method: "get",
  path: "/org/{slug}/projects/{projectSlug}/errors",
  tags: ["Tenant errors"],
  summary: "The project's workspace API errors (status 400 and above), newest first",
  description:
    "Every workspace API answer of status 400 or more, recorded within about a second, kept 7 days and at most 10,000 per project. " +
    "Errors of requests without valid workspace credentials are flagged `authenticated: false` and kept apart, the newest 20 per project. " +
    "Filter by `status` (`4xx`, `5xx` or one code), `since` and `authenticated`.",
  security: sessionOrKey,
  request: { params: ProjectParams, query: TenantErrorQuery },
  responses: { 200: jsonContent(TenantErrorList, "Errors"), ...authedErrors },
});

export function tenantErrorRoutes(deps: Deps) {
  return createRouter().openapi({ ...listRoute, middleware: requires(deps, "projects:read") }, async (c) => {
    const { slug, projectSlug } = c.req.valid("param");
    const ctx = await orgCtx(c, deps, slug);
    return c.json(await listTenantErrors({ ctx, projectSlug, query: c.req.valid("query") }), 200);
  });
}
