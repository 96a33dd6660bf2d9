import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, jsonContent, sessionOrKey } from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { SlugParams } from "../orgs/schemas.ts";
import { AUDIT_DEFAULT_LIMIT, AUDIT_MAX_LIMIT, listAuditEvents } from "./service.ts";

const AuditEventSchema = z
  .object({
    id: z.string(),
    action: z.string(),
    actor: z.object({ type: z.string(), id: z.string(), email: z.string().optional() }),
    target: z.object({ type: z.string(), id: z.string() }),
    data: z.record(z.string(), z.unknown()),
    ip: z.string().nullable(),
    createdAt: z.string(),
  })
  .openapi("AuditEvent");

const AuditQuery = z.object({
  action: z.string().optional().openapi({ description: "Exact action, or a prefix ending in `.*` (`member.*`)" }),
  from: z.string().optional().openapi({ description: "Earliest createdAt: ISO-8601 or Unix milliseconds" }),
  to: z.string().optional().openapi({ description: "Latest createdAt: ISO-8601 or Unix milliseconds" }),
  limit: z
    .string()
    .optional()
    .openapi({
      type: "integer",
      minimum: 1,
      maximum: AUDIT_MAX_LIMIT,
      description: `1..${AUDIT_MAX_LIMIT}, default ${AUDIT_DEFAULT_LIMIT}`,
    }),
  offset: z.string().optional().openapi({ type: "integer", minimum: 0, description: "Rows to skip, default 0" }),
});

const listAuditRoute = createRoute({
  method: "get",
  path: "/org/{slug}/audit",
  tags: ["Audit log"],
  summary: "The org's audit log, newest first (admin)",
  security: sessionOrKey,
  request: { params: SlugParams, query: AuditQuery },
  responses: {
    200: jsonContent(z.object({ events: z.array(AuditEventSchema) }), "Audit events"),
    ...authedErrors,
  },
});

export function auditRoutes(deps: Deps) {
  return createRouter().openapi({ ...listAuditRoute, middleware: requires(deps, "audit:read") }, async (c) => {
    const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
    return c.json(await listAuditEvents({ ctx, query: c.req.valid("query") }), 200);
  });
}
