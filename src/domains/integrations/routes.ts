import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, jsonBody, jsonContent, sessionOrKey } from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { SlugParams } from "../orgs/schemas.ts";
import { DeliverySchema } from "../webhooks/schemas.ts";
import { IntegrationInput, IntegrationParams, IntegrationSchema, UpdateIntegrationInput } from "./schemas.ts";
import {
  createIntegration,
  deleteIntegration,
  getIntegration,
  listIntegrations,
  testIntegration,
  updateIntegration,
} from "./service.ts";

const tags = ["Integrations"];

const one = z.object({ integration: IntegrationSchema });

const routes = {
  create: createRoute({
    method: "post",
    path: "/org/{slug}/integrations",
    tags,
    summary: "Connect Slack, Discord, Datadog or GitHub (admin)",
    security: sessionOrKey,
    request: { params: SlugParams, body: jsonBody(IntegrationInput) },
    responses: { 201: jsonContent(one, "The integration"), ...authedErrors },
  }),
  list: createRoute({
    method: "get",
    path: "/org/{slug}/integrations",
    tags,
    summary: "List the org's integrations",
    security: sessionOrKey,
    request: { params: SlugParams },
    responses: {
      200: jsonContent(z.object({ integrations: z.array(IntegrationSchema) }), "Integrations"),
      ...authedErrors,
    },
  }),
  get: createRoute({
    method: "get",
    path: "/org/{slug}/integrations/{id}",
    tags,
    summary: "One integration",
    security: sessionOrKey,
    request: { params: IntegrationParams },
    responses: { 200: jsonContent(one, "The integration"), ...authedErrors },
  }),
  update: createRoute({
    method: "patch",
    path: "/org/{slug}/integrations/{id}",
    tags,
    summary: "Change an integration's config or events (admin)",
    security: sessionOrKey,
    request: { params: IntegrationParams, body: jsonBody(UpdateIntegrationInput) },
    responses: { 200: jsonContent(one, "The integration"), ...authedErrors },
  }),
  remove: createRoute({
    method: "delete",
    path: "/org/{slug}/integrations/{id}",
    tags,
    summary: "Remove an integration (admin)",
    security: sessionOrKey,
    request: { params: IntegrationParams },
    responses: { 204: { description: "Removed" }, ...authedErrors },
  }),
  test: createRoute({
    method: "post",
    path: "/org/{slug}/integrations/{id}/test",
    tags,
    summary: "Send a sample message now (admin)",
    security: sessionOrKey,
    request: { params: IntegrationParams },
    responses: { 200: jsonContent(z.object({ delivery: DeliverySchema }), "The delivery"), ...authedErrors },
  }),
};

export function integrationRoutes(deps: Deps) {
  return createRouter()
    .openapi({ ...routes.create, middleware: requires(deps, "integrations:manage") }, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await createIntegration({ ctx, input: c.req.valid("json") }), 201);
    })
    .openapi(routes.list, async (c) => {
      return c.json(await listIntegrations({ ctx: await orgCtx(c, deps, c.req.valid("param").slug) }), 200);
    })
    .openapi(routes.get, async (c) => {
      const { slug, id } = c.req.valid("param");
      return c.json(await getIntegration({ ctx: await orgCtx(c, deps, slug), id }), 200);
    })
    .openapi({ ...routes.update, middleware: requires(deps, "integrations:manage") }, async (c) => {
      const { slug, id } = c.req.valid("param");
      const ctx = await orgCtx(c, deps, slug);
      return c.json(await updateIntegration({ ctx, id, input: c.req.valid("json") }), 200);
    })
    .openapi(routes.remove, async (c) => {
      const { slug, id } = c.req.valid("param");
      await deleteIntegration({ ctx: await orgCtx(c, deps, slug), id });
      return c.body(null, 204);
    })
    .openapi({ ...routes.test, middleware: requires(deps, "integrations:manage") }, async (c) => {
      const { slug, id } = c.req.valid("param");
      const result = await testIntegration({ ctx: await orgCtx(c, deps, slug), id });
      return c.json(result, 200);
    });
}
