import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, jsonBody, jsonContent, sessionOrKey } from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { SlugParams } from "../orgs/schemas.ts";
import { AlarmInput, AlarmParams, AlarmSchema } from "./schemas.ts";
import { createAlarm, deleteAlarm, listAlarms } from "./service.ts";

const tags = ["Alarms"];

const createAlarmRoute = createRoute({
  method: "post",
  path: "/org/{slug}/alarms",
  tags,
  summary: "Be told when a metric reaches a share of the plan (developer+)",
  description:
    "Evaluated every minute; fires once per billing period: `alarm.fired` (org webhooks, `org.webhookUrl`, integrations), a notification to admins and owners, an audit row. " +
    "The same metric and threshold twice is 409; 20 per org (409 `PLAN_LIMIT`).",
  security: sessionOrKey,
  request: { params: SlugParams, body: jsonBody(AlarmInput) },
  responses: { 201: jsonContent(z.object({ alarm: AlarmSchema }), "The alarm"), ...authedErrors },
});

const listAlarmsRoute = createRoute({
  method: "get",
  path: "/org/{slug}/alarms",
  tags,
  summary: "The org's alarms",
  security: sessionOrKey,
  request: { params: SlugParams },
  responses: { 200: jsonContent(z.object({ alarms: z.array(AlarmSchema) }), "Alarms"), ...authedErrors },
});

const deleteAlarmRoute = createRoute({
  method: "delete",
  path: "/org/{slug}/alarms/{id}",
  tags,
  summary: "Delete an alarm",
  security: sessionOrKey,
  request: { params: AlarmParams },
  responses: { 204: { description: "Deleted" }, ...authedErrors },
});

export function alarmRoutes(deps: Deps) {
  return createRouter()
    .openapi({ ...createAlarmRoute, middleware: requires(deps, "alarms:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await createAlarm({ ctx: await orgCtx(c, deps, slug), input: c.req.valid("json") }), 201);
    })
    .openapi({ ...listAlarmsRoute, middleware: requires(deps, "projects:read") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await listAlarms({ ctx: await orgCtx(c, deps, slug) }), 200);
    })
    .openapi({ ...deleteAlarmRoute, middleware: requires(deps, "alarms:manage") }, async (c) => {
      const { slug, id } = c.req.valid("param");
      await deleteAlarm({ ctx: await orgCtx(c, deps, slug), id });
      return c.body(null, 204);
    });
}
