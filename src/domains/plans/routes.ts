import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { anyone, createRouter, errorResponses, jsonContent } from "../../http/router.ts";
import { PlanSchema } from "./catalog.ts";
import { listPlans } from "./service.ts";

const listRoute = createRoute({
  method: "get",
  path: "/plans",
  tags: ["Plans"],
  summary: "The plans an org can be on, with their prices (US cents) and limits",
  security: anyone,
  responses: {
    200: jsonContent(z.object({ plans: z.array(PlanSchema) }), "The plan catalog"),
    ...errorResponses(429),
  },
});

export function planRoutes(deps: Deps) {
  return createRouter().openapi(listRoute, (c) => c.json(listPlans(deps.config), 200));
}
