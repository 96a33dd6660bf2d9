import { createRoute, z } from "@hono/zod-openapi";
import { createRouter, jsonBody, jsonContent } from "../../../http/router.ts";
import { DeliveriesQuery, DeliverySchema } from "../../webhooks/schemas.ts";
import {
  createHook,
  deleteHook,
  getHook,
  listHookDeliveries,
  listHooks,
  retryDelivery,
  testHook,
  updateHook,
} from "../hooks.ts";
import { HookInput, HookSchema, HookUpdate, IdP, oneDelivery, oneHook } from "../schemas.ts";
import { adminOnly, errors, tags, type WorkspaceEnv, workspaceOf } from "./security.ts";

const create = createRoute({
  method: "post",
  path: "/webhooks",
  tags,
  summary: "Create a workspace webhook (admin)",
  security: adminOnly,
  request: { body: jsonBody(HookInput) },
  responses: { 201: jsonContent(oneHook, "The webhook (never its secret)"), ...errors },
});

const list = createRoute({
  method: "get",
  path: "/webhooks",
  tags,
  summary: "List workspace webhooks with their breaker state",
  security: adminOnly,
  responses: { 200: jsonContent(z.object({ webhooks: z.array(HookSchema) }), "Webhooks"), ...errors },
});

const get = createRoute({
  method: "get",
  path: "/webhooks/{id}",
  tags,
  summary: "One workspace webhook",
  security: adminOnly,
  request: { params: IdP },
  responses: { 200: jsonContent(oneHook, "The webhook"), ...errors },
});

const update = createRoute({
  method: "patch",
  path: "/webhooks/{id}",
  tags,
  summary: "Update a workspace webhook; `active: true` resumes it",
  security: adminOnly,
  request: { params: IdP, body: jsonBody(HookUpdate) },
  responses: { 200: jsonContent(oneHook, "The webhook"), ...errors },
});

const remove = createRoute({
  method: "delete",
  path: "/webhooks/{id}",
  tags,
  summary: "Delete a workspace webhook",
  security: adminOnly,
  request: { params: IdP },
  responses: { 204: { description: "Deleted" }, ...errors },
});

const test = createRoute({
  method: "post",
  path: "/webhooks/{id}/test",
  tags,
  summary: "Send the synthetic webhook.test event now (patterns are not matched)",
  security: adminOnly,
  request: { params: IdP },
  responses: { 200: jsonContent(oneDelivery, "The delivery after one attempt"), ...errors },
});

const deliveries = createRoute({
  method: "get",
  path: "/webhooks/{id}/deliveries",
  tags,
  summary: "A workspace webhook's deliveries with their attempts, newest first",
  security: adminOnly,
  request: { params: IdP, query: DeliveriesQuery },
  responses: { 200: jsonContent(z.object({ deliveries: z.array(DeliverySchema) }), "Deliveries"), ...errors },
});

const retry = createRoute({
  method: "post",
  path: "/webhooks/_deliveries/{id}/retry",
  tags,
  summary: "Re-send a past delivery with its original body, headers and signature, to its original URL",
  security: adminOnly,
  request: { params: IdP },
  responses: { 200: jsonContent(oneDelivery, "The delivery after the re-send"), ...errors },
});

/** The workspace's webhooks, their deliveries and re-sends (all admin-only, SPEC). */
export function webhookRoutes() {
  return createRouter<WorkspaceEnv>()
    .openapi(create, async (c) => c.json(await createHook({ ctx: workspaceOf(c), input: c.req.valid("json") }), 201))
    .openapi(list, async (c) => c.json(await listHooks({ ctx: workspaceOf(c) }), 200))
    .openapi(retry, async (c) => c.json(await retryDelivery({ ctx: workspaceOf(c), id: c.req.valid("param").id }), 200))
    .openapi(get, async (c) => c.json(await getHook({ ctx: workspaceOf(c), id: c.req.valid("param").id }), 200))
    .openapi(update, async (c) => {
      const { id } = c.req.valid("param");
      return c.json(await updateHook({ ctx: workspaceOf(c), id, input: c.req.valid("json") }), 200);
    })
    .openapi(remove, async (c) => {
      await deleteHook({ ctx: workspaceOf(c), id: c.req.valid("param").id });
      return c.body(null, 204);
    })
    .openapi(test, async (c) => c.json(await testHook({ ctx: workspaceOf(c), id: c.req.valid("param").id }), 200))
    .openapi(deliveries, async (c) => {
      const { id } = c.req.valid("param");
      return c.json(await listHookDeliveries({ ctx: workspaceOf(c), id, query: c.req.valid("query") }), 200);
    });
}
