import { createRoute, z } from "@hono/zod-openapi";
import { createRouter, jsonBody, jsonContent } from "../../../http/router.ts";
import { createCollection, createItem, deleteItem, getItem, listCollections, listItems, updateItem } from "../items.ts";
import { CollectionInput, CollectionP, CollectionSchema, ItemInput, ItemP, ItemSchema, Page } from "../schemas.ts";
import { adminOnly, adminsAndUsers, errors, tags, type WorkspaceEnv, workspaceOf } from "./security.ts";

const createCollectionRoute = createRoute({
  method: "post",
  path: "/collections",
  tags,
  summary: "Create a collection (admin)",
  security: adminOnly,
  request: { body: jsonBody(CollectionInput) },
  responses: { 201: jsonContent(z.object({ collection: CollectionSchema }), "The collection"), ...errors },
});

const listCollectionsRoute = createRoute({
  method: "get",
  path: "/collections",
  tags,
  summary: "List collections",
  security: adminsAndUsers,
  responses: { 200: jsonContent(z.object({ collections: z.array(CollectionSchema) }), "Collections"), ...errors },
});

const create = createRoute({
  method: "post",
  path: "/items/{collection}",
  tags,
  summary: "Create an item (any JSON object); emits items:<collection>:created",
  security: adminsAndUsers,
  request: { params: CollectionP, body: jsonBody(ItemInput) },
  responses: { 201: jsonContent(z.object({ item: ItemSchema }), "The item"), ...errors },
});

const list = createRoute({
  method: "get",
  path: "/items/{collection}",
  tags,
  summary: "List a collection's items, oldest first (limit default 50, at most 500; offset)",
  security: adminsAndUsers,
  request: { params: CollectionP, query: Page },
  responses: { 200: jsonContent(z.object({ items: z.array(ItemSchema) }), "Items"), ...errors },
});

const get = createRoute({
  method: "get",
  path: "/items/{collection}/{id}",
  tags,
  summary: "One item",
  security: adminsAndUsers,
  request: { params: ItemP },
  responses: { 200: jsonContent(z.object({ item: ItemSchema }), "The item"), ...errors },
});

const update = createRoute({
  method: "patch",
  path: "/items/{collection}/{id}",
  tags,
  summary: "Merge top-level keys into an item; emits items:<collection>:updated",
  security: adminsAndUsers,
  request: { params: ItemP, body: jsonBody(ItemInput) },
  responses: { 200: jsonContent(z.object({ item: ItemSchema }), "The item"), ...errors },
});

const remove = createRoute({
  method: "delete",
  path: "/items/{collection}/{id}",
  tags,
  summary: "Delete an item; emits items:<collection>:deleted with its last state",
  security: adminsAndUsers,
  request: { params: ItemP },
  responses: { 204: { description: "Deleted" }, ...errors },
});

/** Collections and their items. */
export function itemRoutes() {
  return createRouter<WorkspaceEnv>()
    .openapi(createCollectionRoute, async (c) =>
      c.json(await createCollection({ ctx: workspaceOf(c), input: c.req.valid("json") }), 201),
    )
    .openapi(listCollectionsRoute, async (c) => c.json(await listCollections({ ctx: workspaceOf(c) }), 200))
    .openapi(create, async (c) => {
      const { collection } = c.req.valid("param");
      return c.json(await createItem({ ctx: workspaceOf(c), collection, input: c.req.valid("json") }), 201);
    })
    .openapi(list, async (c) => {
      const { collection } = c.req.valid("param");
      return c.json(await listItems({ ctx: workspaceOf(c), collection, query: c.req.valid("query") }), 200);
    })
    .openapi(get, async (c) => {
      const { collection, id } = c.req.valid("param");
      return c.json(await getItem({ ctx: workspaceOf(c), collection, id }), 200);
    })
    .openapi(update, async (c) => {
      const { collection, id } = c.req.valid("param");
      return c.json(await updateItem({ ctx: workspaceOf(c), collection, id, input: c.req.valid("json") }), 200);
    })
    .openapi(remove, async (c) => {
      const { collection, id } = c.req.valid("param");
      await deleteItem({ ctx: workspaceOf(c), collection, id });
      return c.body(null, 204);
    });
}
