import { createRoute, z } from "@hono/zod-openapi";
import { createRouter, jsonContent } from "../../../http/router.ts";
import { IdP, Page, UserSchema } from "../schemas.ts";
import { deleteUser, listUsers } from "../users.ts";
import { adminOnly, errors, tags, type WorkspaceEnv, workspaceOf } from "./security.ts";

const list = createRoute({
  method: "get",
  path: "/users",
  tags,
  summary: "The workspace's users, oldest first (admin): `limit`, `offset`",
  security: adminOnly,
  request: { query: Page },
  responses: { 200: jsonContent(z.object({ users: z.array(UserSchema) }), "Users"), ...errors },
});

const remove = createRoute({
  method: "delete",
  path: "/users/{id}",
  tags,
  summary: "Delete a workspace user (admin); emits auth:user_deleted",
  security: adminOnly,
  request: { params: IdP },
  responses: { 204: { description: "Deleted" }, ...errors },
});

export function userRoutes() {
  return createRouter<WorkspaceEnv>()
    .openapi(list, async (c) => c.json(await listUsers({ ctx: workspaceOf(c), query: c.req.valid("query") }), 200))
    .openapi(remove, async (c) => {
      await deleteUser({ ctx: workspaceOf(c), id: c.req.valid("param").id });
      return c.body(null, 204);
    });
}
