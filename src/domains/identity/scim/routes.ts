import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Deps } from "../../../deps.ts";
import type { AppEnv } from "../../../http/context.ts";
import { authedErrors, createRouter, jsonContent, OkSchema, sessionOrKey } from "../../../http/router.ts";
import { orgCtx, requires } from "../../../http/service-context.ts";
import { SlugParams } from "../../orgs/schemas.ts";
import {
  listResponse,
  resourceTypes,
  SCIM_CONTENT_TYPE,
  ScimError,
  schemas,
  serviceProviderConfig,
} from "./resources.ts";
import {
  createGroup,
  createUser,
  deleteGroup,
  deleteUser,
  getGroup,
  getUser,
  listGroups,
  listUsers,
  patchGroup,
  patchUser,
  replaceGroup,
  replaceUser,
  type ScimCtx,
} from "./service.ts";
import { authenticateScim, getScimSettings, mintScimToken, revokeScim, scimBaseUrl } from "./tokens.ts";

const tags = ["SCIM"];

const ScimSettings = z
  .object({
    scimBaseUrl: z
      .string()
      .openapi({ description: "`{PUBLIC_URL}/api/scim/v2/{orgSlug}`: give it to the identity provider" }),
    enabled: z.boolean(),
    tokenCreatedAt: z.string().nullable(),
  })
  .openapi("ScimSettings");

const management = {
  get: createRoute({
    method: "get",
    path: "/org/{slug}/scim",
    tags,
    summary: "SCIM provisioning: the base URL and whether a token is set (admin)",
    security: sessionOrKey,
    request: { params: SlugParams },
    responses: { 200: jsonContent(ScimSettings, "SCIM settings"), ...authedErrors },
  }),
  token: createRoute({
    method: "post",
    path: "/org/{slug}/scim/token",
    tags,
    summary: "Mint the org's SCIM bearer token (shown once; replaces the previous one at once) (admin)",
    security: sessionOrKey,
    request: { params: SlugParams },
    responses: {
      201: jsonContent(z.object({ token: z.string().openapi({ description: "`scim_…`, shown once" }) }), "The token"),
      ...authedErrors,
    },
  }),
  revoke: createRoute({
    method: "delete",
    path: "/org/{slug}/scim",
    tags,
    summary: "Revoke SCIM provisioning: the token stops working at once (admin)",
    security: sessionOrKey,
    request: { params: SlugParams },
    responses: { 200: jsonContent(OkSchema, "Revoked"), ...authedErrors },
  }),
};

const ScimParams = z.object({ orgSlug: z.string().openapi({ param: { name: "orgSlug", in: "path" } }) });
const ScimIdParams = ScimParams.extend({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });
const scimSecurity = [{ scimToken: [] }];
// Described only: the bodies are SCIM's own (RFC 7643), in `application/scim+json`.
const scimAnswer = (description: string) => ({ description: `${description} (${SCIM_CONTENT_TYPE})` });
const scimErrors = {
  400: scimAnswer("SCIM error: invalidFilter, invalidValue, mutability, invalidSyntax…"),
  401: scimAnswer("SCIM error: no token, or not this org's"),
  404: scimAnswer("SCIM error: no such resource"),
  409: scimAnswer("SCIM error: uniqueness"),
  // Before the route: the API's own error envelope (application/json).
  413: { description: "Request body too large" },
  429: { description: "Rate limited (with Retry-After)" },
  500: { description: "Internal error (never with internals)" },
};

function scimRoute(
  method: "get" | "post" | "put" | "patch" | "delete",
  path: string,
  summary: string,
  withId: boolean,
) {
  return createRoute({
    method,
    path: `/scim/v2/{orgSlug}${path}`,
    tags,
    summary,
    description: "SCIM 2.0 (RFC 7644), with the org's SCIM token: `Authorization: Bearer scim_…`.",
    security: scimSecurity,
    request: { params: withId ? ScimIdParams : ScimParams },
    responses: {
      [method === "post" ? 201 : method === "delete" ? 204 : 200]: scimAnswer("The SCIM resource"),
      ...scimErrors,
    },
  });
}

/** Answers in SCIM's media type; a ScimError becomes SCIM's error body. */
async function answer(
  c: Context<AppEnv>,
  deps: Deps,
  status: 200 | 201 | 204,
  work: (ctx: ScimCtx) => Promise<unknown>,
): Promise<Response> {
  try {
    const org = await authenticateScim(deps, c.req.param("orgSlug") ?? "", c.req.header("authorization"));
    const result = await work({ deps, org, ip: c.get("clientIp") });
    if (status === 204) return c.body(null, 204);
    return c.body(JSON.stringify(result), status, { "content-type": SCIM_CONTENT_TYPE });
  } catch (error) {
    if (!(error instanceof ScimError)) throw error;
    return c.body(JSON.stringify(error.body()), error.status as 400, { "content-type": SCIM_CONTENT_TYPE });
  }
}

async function bodyOf(c: Context<AppEnv>): Promise<Record<string, unknown>> {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new ScimError(400, "the body must be a JSON object", "invalidSyntax");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ScimError(400, "the body must be a JSON object", "invalidSyntax");
  }
  return body as Record<string, unknown>;
}

export function scimRoutes(deps: Deps) {
  const query = (c: Context<AppEnv>) => ({
    filter: c.req.query("filter"),
    startIndex: c.req.query("startIndex"),
    count: c.req.query("count"),
    excludedAttributes: c.req.query("excludedAttributes"),
  });
  const id = (c: Context<AppEnv>) => c.req.param("id") ?? "";
  const base = (c: Context<AppEnv>) => scimBaseUrl(deps, c.req.param("orgSlug") ?? "");
  return createRouter()
    .openapi({ ...management.get, middleware: requires(deps, "scim:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await getScimSettings({ ctx: await orgCtx(c, deps, slug) }), 200);
    })
    .openapi({ ...management.token, middleware: requires(deps, "scim:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await mintScimToken({ ctx: await orgCtx(c, deps, slug) }), 201);
    })
    .openapi({ ...management.revoke, middleware: requires(deps, "scim:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await revokeScim({ ctx: await orgCtx(c, deps, slug) }), 200);
    })
    .openapi(scimRoute("get", "/ServiceProviderConfig", "What this SCIM service supports", false), (c) =>
      answer(c, deps, 200, async () => serviceProviderConfig(base(c))),
    )
    .openapi(scimRoute("get", "/ResourceTypes", "The resource types: User and Group", false), (c) =>
      answer(c, deps, 200, async () => {
        const types = resourceTypes(base(c));
        return listResponse(types, types.length, 1);
      }),
    )
    .openapi(scimRoute("get", "/Schemas", "The User and Group schemas", false), (c) =>
      answer(c, deps, 200, async () => {
        const list = schemas(base(c));
        return listResponse(list, list.length, 1);
      }),
    )
    .openapi(scimRoute("get", "/Users", "List members (filter, startIndex, count)", false), (c) =>
      answer(c, deps, 200, (ctx) => listUsers(ctx, query(c))),
    )
    .openapi(scimRoute("post", "/Users", "Provision a member", false), (c) =>
      answer(c, deps, 201, async (ctx) => createUser(ctx, await bodyOf(c))),
    )
    .openapi(scimRoute("get", "/Users/{id}", "One member", true), (c) =>
      answer(c, deps, 200, (ctx) => getUser(ctx, id(c))),
    )
    .openapi(scimRoute("put", "/Users/{id}", "Replace a member's attributes", true), (c) =>
      answer(c, deps, 200, async (ctx) => replaceUser(ctx, id(c), await bodyOf(c))),
    )
    .openapi(scimRoute("patch", "/Users/{id}", "Change a member: active false suspends, true reactivates", true), (c) =>
      answer(c, deps, 200, async (ctx) => patchUser(ctx, id(c), await bodyOf(c))),
    )
    .openapi(scimRoute("delete", "/Users/{id}", "Deprovision a member (the membership goes)", true), (c) =>
      answer(c, deps, 204, (ctx) => deleteUser(ctx, id(c))),
    )
    .openapi(scimRoute("get", "/Groups", "List groups (roles)", false), (c) =>
      answer(c, deps, 200, (ctx) => listGroups(ctx, query(c))),
    )
    .openapi(scimRoute("post", "/Groups", "Create a group named after a role; its members get that role", false), (c) =>
      answer(c, deps, 201, async (ctx) => createGroup(ctx, await bodyOf(c))),
    )
    .openapi(scimRoute("get", "/Groups/{id}", "One group with its members", true), (c) =>
      answer(c, deps, 200, (ctx) => getGroup(ctx, id(c), c.req.query("excludedAttributes"))),
    )
    .openapi(scimRoute("put", "/Groups/{id}", "Replace a group's members", true), (c) =>
      answer(c, deps, 200, async (ctx) => replaceGroup(ctx, id(c), await bodyOf(c))),
    )
    .openapi(scimRoute("patch", "/Groups/{id}", "Add or remove members", true), (c) =>
      answer(c, deps, 200, async (ctx) => patchGroup(ctx, id(c), await bodyOf(c))),
    )
    .openapi(scimRoute("delete", "/Groups/{id}", "Delete a group; its members lose its role", true), (c) =>
      answer(c, deps, 204, (ctx) => deleteGroup(ctx, id(c))),
    );
}
