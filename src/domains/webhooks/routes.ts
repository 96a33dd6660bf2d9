import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, jsonBody, jsonContent, sessionOrKey } from "../../http/router.ts";
import { callerCtx, orgCtx, requires } from "../../http/service-context.ts";
import { SlugParams } from "../orgs/schemas.ts";
import {
  DeliveriesQuery,
  DeliveryHeaders,
  DeliverySchema,
  deliveryResponses,
  UpdateWebhookInput,
  WebhookIdParams,
  WebhookInput,
  WebhookParams,
  WebhookSchema,
} from "./schemas.ts";
import {
  createWebhook,
  deleteWebhook,
  listWebhookDeliveries,
  listWebhooks,
  testWebhook,
  updateWebhook,
} from "./service.ts";

const tags = ["Webhooks"];

const routes = {
  create: createRoute({
    method: "post",
    path: "/org/{slug}/webhooks",
    tags,
    summary: "Create an org webhook (admin); its signing secret is returned once",
    security: sessionOrKey,
    request: { params: SlugParams, body: jsonBody(WebhookInput) },
    responses: {
      201: jsonContent(
        z.object({
          webhook: WebhookSchema,
          secret: z.string().openapi({ description: "`whsec_` + standard base64 of 32 random bytes, shown once" }),
        }),
        "The webhook and its secret",
      ),
      ...authedErrors,
    },
  }),
  list: createRoute({
    method: "get",
    path: "/org/{slug}/webhooks",
    tags,
    summary: "List the org's webhooks",
    security: sessionOrKey,
    request: { params: SlugParams },
    responses: { 200: jsonContent(z.object({ webhooks: z.array(WebhookSchema) }), "Webhooks"), ...authedErrors },
  }),
  update: createRoute({
    method: "patch",
    path: "/org/{slug}/webhooks/{id}",
    tags,
    summary: "Update a webhook (admin); `active: true` resumes a disabled one",
    security: sessionOrKey,
    request: { params: WebhookParams, body: jsonBody(UpdateWebhookInput) },
    responses: { 200: jsonContent(z.object({ webhook: WebhookSchema }), "The webhook"), ...authedErrors },
  }),
  remove: createRoute({
    method: "delete",
    path: "/org/{slug}/webhooks/{id}",
    tags,
    summary: "Delete a webhook (admin)",
    security: sessionOrKey,
    request: { params: WebhookParams },
    responses: { 204: { description: "Deleted" }, ...authedErrors },
  }),
  deliveries: createRoute({
    method: "get",
    path: "/org/{slug}/webhooks/{id}/deliveries",
    tags,
    summary: "A webhook's recent deliveries with every attempt, newest first",
    security: sessionOrKey,
    request: { params: WebhookParams, query: DeliveriesQuery },
    responses: {
      200: jsonContent(z.object({ deliveries: z.array(DeliverySchema) }), "Deliveries"),
      ...authedErrors,
    },
  }),
  test: createRoute({
    method: "post",
    path: "/webhooks/{id}/test",
    tags,
    summary: "Send a sample delivery now (admin); returns it after one attempt",
    security: sessionOrKey,
    request: { params: WebhookIdParams },
    responses: { 200: jsonContent(z.object({ delivery: DeliverySchema }), "The delivery"), ...authedErrors },
  }),
};

export function webhookRoutes(deps: Deps) {
  return createRouter()
    .openapi({ ...routes.create, middleware: requires(deps, "webhooks:manage") }, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await createWebhook({ ctx, input: c.req.valid("json") }), 201);
    })
    .openapi(routes.list, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await listWebhooks({ ctx }), 200);
    })
    .openapi({ ...routes.update, middleware: requires(deps, "webhooks:manage") }, async (c) => {
      const { slug, id } = c.req.valid("param");
      const ctx = await orgCtx(c, deps, slug);
      return c.json(await updateWebhook({ ctx, id, input: c.req.valid("json") }), 200);
    })
    .openapi({ ...routes.remove, middleware: requires(deps, "webhooks:manage") }, async (c) => {
      const { slug, id } = c.req.valid("param");
      await deleteWebhook({ ctx: await orgCtx(c, deps, slug), id });
      return c.body(null, 204);
    })
    .openapi({ ...routes.deliveries, middleware: requires(deps, "webhooks:read") }, async (c) => {
      const { slug, id } = c.req.valid("param");
      const ctx = await orgCtx(c, deps, slug);
      return c.json(await listWebhookDeliveries({ ctx, id, query: c.req.valid("query") }), 200);
    })
    .openapi(routes.test, async (c) => {
      return c.json(await testWebhook({ ctx: callerCtx(c, deps), id: c.req.valid("param").id }), 200);
    });
}

/** Documents the deliveries org webhooks and `webhookUrl` receive, in the OpenAPI `webhooks` section. */
export function documentOrgEvents(api: ReturnType<typeof createRouter>): void {
  api.openAPIRegistry.registerWebhook({
    method: "post",
    path: "orgEvent",
    operationId: "orgEvent",
    tags: ["Webhooks"],
    summary: "An org event, POSTed to each subscribed org webhook and to the org's webhookUrl",
    // A delivery carries no credentials: its receiver checks the signature headers.
    security: [],
    request: {
      headers: DeliveryHeaders,
      body: jsonBody(
        z
          .object({
            event: z.string().openapi({ example: "project.provisioned" }),
            payload: z.record(z.string(), z.unknown()),
            timestamp: z.number().int().openapi({ description: "Unix seconds" }),
          })
          .openapi("OrgEventDelivery"),
      ),
    },
    responses: deliveryResponses,
  });
}
