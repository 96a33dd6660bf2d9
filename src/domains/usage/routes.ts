import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, jsonContent, sessionOrKey } from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { SlugParams } from "../orgs/schemas.ts";
import { UsageHistorySchema, UsageSchema } from "./schemas.ts";
import { getUsage, getUsageHistory, MAX_HISTORY_DAYS } from "./service.ts";

const tags = ["Usage"];

const usageRoute = createRoute({
  method: "get",
  path: "/org/{slug}/usage",
  tags,
  summary: "What the org has used in its billing period, against its plan",
  description:
    "Workspace API requests (counted in memory and written at least every 10 s by every process), d1 (workspace database bytes) " +
    "and r2 (stored file bytes, measured hourly and soon after each upload or delete), per project and in all.",
  security: sessionOrKey,
  request: { params: SlugParams },
  responses: { 200: jsonContent(UsageSchema, "Usage"), ...authedErrors },
});

const historyRoute = createRoute({
  method: "get",
  path: "/org/{slug}/usage/history",
  tags,
  summary: "The org's usage per project and day, deleted and purged projects included",
  security: sessionOrKey,
  request: {
    params: SlugParams,
    query: z.object({
      from: z.string().optional().openapi({ description: "YYYY-MM-DD; default 29 days before `to`" }),
      to: z
        .string()
        .optional()
        .openapi({ description: `YYYY-MM-DD; default today (UTC); at most ${MAX_HISTORY_DAYS} days in all` }),
    }),
  },
  responses: { 200: jsonContent(UsageHistorySchema, "Usage per day"), ...authedErrors },
});

export function usageRoutes(deps: Deps) {
  return createRouter()
    .openapi({ ...usageRoute, middleware: requires(deps, "projects:read") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await getUsage({ ctx: await orgCtx(c, deps, slug) }), 200);
    })
    .openapi({ ...historyRoute, middleware: requires(deps, "projects:read") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await getUsageHistory({ ctx: await orgCtx(c, deps, slug), query: c.req.valid("query") }), 200);
    });
}
