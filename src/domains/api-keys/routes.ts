import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { authedErrors, createRouter, jsonBody, jsonContent, sessionOrKey } from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { SlugParams } from "../orgs/schemas.ts";
import { ApiKeyInput, ApiKeyParams, ApiKeysResponse, CreatedApiKeyResponse } from "./schemas.ts";
import { createApiKey, listApiKeys, revokeApiKey } from "./service.ts";

const tags = ["API keys"];

const createKeyRoute = createRoute({
  method: "post",
  path: "/org/{slug}/api-keys",
  tags,
  summary: "Create an API key (admin); the token is returned once",
  security: sessionOrKey,
  request: { params: SlugParams, body: jsonBody(ApiKeyInput) },
  responses: { 201: jsonContent(CreatedApiKeyResponse, "The key and its token"), ...authedErrors },
});

const listKeysRoute = createRoute({
  method: "get",
  path: "/org/{slug}/api-keys",
  tags,
  summary: "List the org's API keys (never their tokens)",
  security: sessionOrKey,
  request: { params: SlugParams },
  responses: { 200: jsonContent(ApiKeysResponse, "API keys"), ...authedErrors },
});

const revokeKeyRoute = createRoute({
  method: "delete",
  path: "/org/{slug}/api-keys/{id}",
  tags,
  summary: "Revoke an API key (admin), effective on the next request",
  security: sessionOrKey,
  request: { params: ApiKeyParams },
  responses: { 204: { description: "Revoked" }, ...authedErrors },
});

export function apiKeyRoutes(deps: Deps) {
  return createRouter()
    .openapi({ ...createKeyRoute, middleware: requires(deps, "api_keys:manage") }, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await createApiKey({ ctx, input: c.req.valid("json") }), 201);
    })
    .openapi(listKeysRoute, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await listApiKeys({ ctx }), 200);
    })
    .openapi(revokeKeyRoute, async (c) => {
      const { slug, id } = c.req.valid("param");
      await revokeApiKey({ ctx: await orgCtx(c, deps, slug), id });
      return c.body(null, 204);
    });
}
