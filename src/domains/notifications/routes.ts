import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, jsonContent, OkSchema, sessionOnly } from "../../http/router.ts";
import { orgCtx } from "../../http/service-context.ts";
import { pageQuery } from "../fields.ts";
import { SlugParams } from "../orgs/schemas.ts";
import {
  listNotifications,
  markAllNotificationsRead,
  markNotificationRead,
  NOTIFICATIONS_LIMIT,
  NOTIFICATIONS_MAX_LIMIT,
} from "./service.ts";

const tags = ["Notifications"];

const NotificationSchema = z
  .object({
    id: z.string(),
    kind: z.string(),
    title: z.string(),
    body: z.string(),
    data: z.record(z.string(), z.unknown()),
    read: z.boolean(),
    readAt: z.string().nullable(),
    createdAt: z.string(),
  })
  .openapi("Notification");

const NotificationParams = z.object({
  slug: z.string().openapi({ param: { name: "slug", in: "path" } }),
  id: z.string().openapi({ param: { name: "id", in: "path" } }),
});

const routes = {
  list: createRoute({
    method: "get",
    path: "/org/{slug}/notifications",
    tags,
    summary: "The signed-in account's notifications in this org, newest first",
    security: sessionOnly,
    request: {
      params: SlugParams,
      query: z.object({
        unread: z
          .enum(["true", "false", "1", "0"])
          .optional()
          .openapi({ description: "Only unread ones (`true` or `1`)" }),
        ...pageQuery(NOTIFICATIONS_LIMIT, NOTIFICATIONS_MAX_LIMIT),
      }),
    },
    responses: {
      200: jsonContent(z.object({ notifications: z.array(NotificationSchema) }), "Notifications"),
      ...authedErrors,
    },
  }),
  read: createRoute({
    method: "post",
    path: "/org/{slug}/notifications/{id}/read",
    tags,
    summary: "Mark one notification read",
    security: sessionOnly,
    request: { params: NotificationParams },
    responses: { 200: jsonContent(OkSchema, "Marked read"), ...authedErrors },
  }),
  readAll: createRoute({
    method: "post",
    path: "/org/{slug}/notifications/read-all",
    tags,
    summary: "Mark all of the caller's notifications in this org read",
    security: sessionOnly,
    request: { params: SlugParams },
    responses: { 200: jsonContent(OkSchema, "Marked read"), ...authedErrors },
  }),
};

export function notificationRoutes(deps: Deps) {
  return createRouter()
    .openapi(routes.list, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      const { unread, limit, offset } = c.req.valid("query");
      return c.json(
        await listNotifications({ ctx, unreadOnly: unread === "true" || unread === "1", limit, offset }),
        200,
      );
    })
    .openapi(routes.read, async (c) => {
      const { slug, id } = c.req.valid("param");
      await markNotificationRead({ ctx: await orgCtx(c, deps, slug), id });
      return c.json({ ok: true }, 200);
    })
    .openapi(routes.readAll, async (c) => {
      await markAllNotificationsRead({ ctx: await orgCtx(c, deps, c.req.valid("param").slug) });
      return c.json({ ok: true }, 200);
    });
}
