import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { requireAccount } from "../../http/principal.ts";
import { authedErrors, createRouter, jsonBody, jsonContent, OkSchema, sessionOnly } from "../../http/router.ts";
import { callerCtx } from "../../http/service-context.ts";
import { AccountSchema, UpdateAccountInput } from "./schemas.ts";
import { getAccount, updateAccount } from "./service.ts";

const tags = ["Account"];

const getAccountRoute = createRoute({
  method: "get",
  path: "/account",
  tags,
  summary: "The signed-in account",
  security: sessionOnly,
  responses: { 200: jsonContent(z.object({ account: AccountSchema }), "The account"), ...authedErrors },
});

const updateAccountRoute = createRoute({
  method: "patch",
  path: "/account",
  tags,
  summary: "Update the signed-in account's profile",
  security: sessionOnly,
  request: { body: jsonBody(UpdateAccountInput) },
  responses: { 200: jsonContent(OkSchema, "Updated"), ...authedErrors },
});

export function accountRoutes(deps: Deps) {
  return createRouter()
    .openapi(getAccountRoute, async (c) => {
      const account = requireAccount(c);
      return c.json({ account: await getAccount({ ctx: callerCtx(c, deps), account }) }, 200);
    })
    .openapi(updateAccountRoute, async (c) => {
      const account = requireAccount(c);
      await updateAccount({ ctx: callerCtx(c, deps), account, input: c.req.valid("json") });
      return c.json({ ok: true }, 200);
    });
}
