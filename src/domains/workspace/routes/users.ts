import { createRoute } from "@hono/zod-openapi";
import { createRouter } from "../../../http/router.ts";
import { IdP } from "../schemas.ts";
import { deleteUser } from "../users.ts";
import { adminOnly, errors, tags, type WorkspaceEnv, workspaceOf } from "./security.ts";

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
  return createRouter<WorkspaceEnv>().openapi(remove, async (c) => {
    await deleteUser({ ctx: workspaceOf(c), id: c.req.valid("param").id });
    return c.body(null, 204);
  });
}
