import { Readable } from "node:stream";
import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { limitRequestBody } from "../../http/body-limit.ts";
import type { AppEnv } from "../../http/context.ts";
import { idempotent, wantsIdempotency, withIdempotencyKeyHeader } from "../../http/idempotency.ts";
import { limitRate } from "../../http/rate-limit.ts";
import { createRouter, errorResponses, jsonBody, jsonContent, withOperationIds } from "../../http/router.ts";
import { assertSameOriginWrite } from "../../http/same-origin.ts";
import { DeliveriesQuery, DeliveryHeaders, DeliverySchema, deliveryResponses } from "../webhooks/schemas.ts";
import {
  openWorkspace,
  requireAdmin,
  requireMember,
  visitWorkspace,
  type WorkspaceCtx,
  type WorkspaceRuntime,
  type WorkspaceVisit,
} from "./access.ts";
import { deleteFile, downloadFile, listFiles, uploadFile } from "./files.ts";
import {
  createHook,
  deleteHook,
  getHook,
  listHookDeliveries,
  listHooks,
  retryDelivery,
  testHook,
  updateHook,
} from "./hooks.ts";
import { createCollection, createItem, deleteItem, getItem, listCollections, listItems, updateItem } from "./items.ts";
import {
  CollectionInput,
  CollectionP,
  CollectionSchema,
  Credentials,
  FileQuery,
  FileSchema,
  HookInput,
  HookSchema,
  HookUpdate,
  IdP,
  ItemInput,
  ItemP,
  ItemSchema,
  oneDelivery,
  oneHook,
  Page,
  SignedIn,
  uploadBody,
} from "./schemas.ts";
import { deleteUser, signInUser, signOutUser, signUpUser } from "./users.ts";

const errors = errorResponses(400, 401, 403, 404, 409, 413, 422, 429);
const security: Record<string, string[]>[] = [
  { adminToken: [] },
  { userToken: [] },
  { apiKey: [] },
  { sessionCookie: [] },
];
const adminSecurity: Record<string, string[]>[] = [{ adminToken: [] }, { apiKey: [] }, { sessionCookie: [] }];

/** The only workspace operations open to callers without credentials. */
const ANONYMOUS = /\/api\/auth\/sign-(up|in)\/?$/;
/** Operations only the workspace admin may call (every route under them checks it again). */
const ADMIN_ONLY = /\/api\/(webhooks|users)(\/|$)/;
const CREATE_COLLECTION = /\/api\/collections$/;
/** Operations for admins and workspace users (every route under them checks it again). */
const MEMBERS = /\/api\/(collections|items|files)(\/|$)/;

type WorkspaceEnv = AppEnv & { Variables: { workspace: WorkspaceCtx } };

const tags = ["Workspace"];
const r = {
  signUp: createRoute({
    method: "post",
    path: "/auth/sign-up",
    tags,
    summary: "Create a workspace user; emits auth:signed_up",
    request: { body: jsonBody(Credentials) },
    responses: { 201: jsonContent(SignedIn, "The user and a token"), ...errors },
  }),
  signIn: createRoute({
    method: "post",
    path: "/auth/sign-in",
    tags,
    summary: "Sign a workspace user in; emits auth:signed_in",
    request: { body: jsonBody(Credentials) },
    responses: { 200: jsonContent(SignedIn, "The user and a token"), ...errors },
  }),
  signOut: createRoute({
    method: "post",
    path: "/auth/sign-out",
    tags,
    summary: "End the calling user's session; emits auth:signed_out",
    security: [{ userToken: [] }],
    responses: { 200: jsonContent(z.object({ ok: z.boolean() }), "Signed out"), ...errors },
  }),
  deleteUser: createRoute({
    method: "delete",
    path: "/users/{id}",
    tags,
    summary: "Delete a workspace user (admin); emits auth:user_deleted",
    security: adminSecurity,
    request: { params: IdP },
    responses: { 204: { description: "Deleted" }, ...errors },
  }),
  upload: createRoute({
    method: "post",
    path: "/files",
    tags,
    summary: "Upload a file (multipart field `file`, or a raw body with ?name=); emits files:uploaded",
    security,
    request: { query: FileQuery, body: uploadBody },
    responses: { 201: jsonContent(z.object({ file: FileSchema }), "The file"), ...errors },
  }),
  listFiles: createRoute({
    method: "get",
    path: "/files",
    tags,
    summary: "List files, oldest first (limit default 50, at most 500; offset)",
    security,
    request: { query: Page },
    responses: { 200: jsonContent(z.object({ files: z.array(FileSchema) }), "Files"), ...errors },
  }),
  download: createRoute({
    method: "get",
    path: "/files/{id}",
    tags,
    summary: "Download a file",
    security,
    request: { params: IdP },
    responses: {
      200: {
        description: "The file's bytes, with the content type it was uploaded with",
        content: { "*/*": { schema: z.string().openapi({ format: "binary" }) } },
      },
      ...errors,
    },
  }),
  deleteFile: createRoute({
    method: "delete",
    path: "/files/{id}",
    tags,
    summary: "Delete a file; emits files:deleted",
    security,
    request: { params: IdP },
    responses: { 204: { description: "Deleted" }, ...errors },
  }),
  createCollection: createRoute({
    method: "post",
    path: "/collections",
    tags,
    summary: "Create a collection (admin)",
    security: adminSecurity,
    request: { body: jsonBody(CollectionInput) },
    responses: { 201: jsonContent(z.object({ collection: CollectionSchema }), "The collection"), ...errors },
  }),
  listCollections: createRoute({
    method: "get",
    path: "/collections",
    tags,
    summary: "List collections",
    security,
    responses: { 200: jsonContent(z.object({ collections: z.array(CollectionSchema) }), "Collections"), ...errors },
  }),
  createItem: createRoute({
    method: "post",
    path: "/items/{collection}",
    tags,
    summary: "Create an item (any JSON object); emits items:<collection>:created",
    security,
    request: { params: CollectionP, body: jsonBody(ItemInput) },
    responses: { 201: jsonContent(z.object({ item: ItemSchema }), "The item"), ...errors },
  }),
  listItems: createRoute({
    method: "get",
    path: "/items/{collection}",
    tags,
    summary: "List a collection's items, oldest first (limit default 50, at most 500; offset)",
    security,
    request: { params: CollectionP, query: Page },
    responses: { 200: jsonContent(z.object({ items: z.array(ItemSchema) }), "Items"), ...errors },
  }),
  getItem: createRoute({
    method: "get",
    path: "/items/{collection}/{id}",
    tags,
    summary: "One item",
    security,
    request: { params: ItemP },
    responses: { 200: jsonContent(z.object({ item: ItemSchema }), "The item"), ...errors },
  }),
  updateItem: createRoute({
    method: "patch",
    path: "/items/{collection}/{id}",
    tags,
    summary: "Merge top-level keys into an item; emits items:<collection>:updated",
    security,
    request: { params: ItemP, body: jsonBody(ItemInput) },
    responses: { 200: jsonContent(z.object({ item: ItemSchema }), "The item"), ...errors },
  }),
  deleteItem: createRoute({
    method: "delete",
    path: "/items/{collection}/{id}",
    tags,
    summary: "Delete an item; emits items:<collection>:deleted with its last state",
    security,
    request: { params: ItemP },
    responses: { 204: { description: "Deleted" }, ...errors },
  }),
  createHook: createRoute({
    method: "post",
    path: "/webhooks",
    tags,
    summary: "Create a workspace webhook (admin)",
    security: adminSecurity,
    request: { body: jsonBody(HookInput) },
    responses: { 201: jsonContent(oneHook, "The webhook (never its secret)"), ...errors },
  }),
  listHooks: createRoute({
    method: "get",
    path: "/webhooks",
    tags,
    summary: "List workspace webhooks with their breaker state",
    security: adminSecurity,
    responses: { 200: jsonContent(z.object({ webhooks: z.array(HookSchema) }), "Webhooks"), ...errors },
  }),
  getHook: createRoute({
    method: "get",
    path: "/webhooks/{id}",
    tags,
    summary: "One workspace webhook",
    security: adminSecurity,
    request: { params: IdP },
    responses: { 200: jsonContent(oneHook, "The webhook"), ...errors },
  }),
  updateHook: createRoute({
    method: "patch",
    path: "/webhooks/{id}",
    tags,
    summary: "Update a workspace webhook; `active: true` resumes it",
    security: adminSecurity,
    request: { params: IdP, body: jsonBody(HookUpdate) },
    responses: { 200: jsonContent(oneHook, "The webhook"), ...errors },
  }),
  deleteHook: createRoute({
    method: "delete",
    path: "/webhooks/{id}",
    tags,
    summary: "Delete a workspace webhook",
    security: adminSecurity,
    request: { params: IdP },
    responses: { 204: { description: "Deleted" }, ...errors },
  }),
  testHook: createRoute({
    method: "post",
    path: "/webhooks/{id}/test",
    tags,
    summary: "Send the synthetic webhook.test event now (patterns are not matched)",
    security: adminSecurity,
    request: { params: IdP },
    responses: { 200: jsonContent(oneDelivery, "The delivery after one attempt"), ...errors },
  }),
  hookDeliveries: createRoute({
    method: "get",
    path: "/webhooks/{id}/deliveries",
    tags,
    summary: "A workspace webhook's deliveries with their attempts, newest first",
    security: adminSecurity,
    request: { params: IdP, query: DeliveriesQuery },
    responses: { 200: jsonContent(z.object({ deliveries: z.array(DeliverySchema) }), "Deliveries"), ...errors },
  }),
  retry: createRoute({
    method: "post",
    path: "/webhooks/_deliveries/{id}/retry",
    tags,
    summary: "Re-send a past delivery with its original body, headers and signature",
    security: adminSecurity,
    request: { params: IdP },
    responses: { 200: jsonContent(oneDelivery, "The delivery after the re-send"), ...errors },
  }),
};

/** The OpenAPI 3.1 document of the workspace API (one for every workspace; the project is in the server URL). */
export function workspaceDocument(router: ReturnType<typeof workspaceRoutes>, version: string) {
  const document = router.getOpenAPI31Document({
    openapi: "3.1.0",
    info: {
      title: "Plinth workspace API",
      version,
      description: "Each project's own backend: collections, items, workspace users, files and webhooks.",
    },
    servers: [
      {
        url: "/w/{projectId}/api",
        variables: { projectId: { default: "prj_0000000000", description: "The project id (its workspaceUrl)" } },
      },
    ],
  });
  return withIdempotencyKeyHeader(withOperationIds(document));
}

/** The rate-limit bucket of a workspace caller: its user, key, account, admin token or address. */
function workspaceBucket({ caller, project }: WorkspaceVisit, address: string | null): string {
  if (caller.kind === "user") return `ws:${project.id}:user:${caller.userId}`;
  if (caller.kind === "anonymous") return `ip:${address}`;
  if (caller.via === "api_key") return `key:${caller.id}`;
  if (caller.via === "session") return `account:${caller.id}`;
  return `ws:${project.id}:admin`;
}

/** The workspace API, served at `{workspaceUrl}/api` = `/w/{projectId}/api`. */
export function workspaceRoutes(runtime: WorkspaceRuntime) {
  const { deps } = runtime;
  const ctxOf = (c: Context<WorkspaceEnv>) => c.get("workspace");
  const app = createRouter<WorkspaceEnv>();
  app.openAPIRegistry.registerWebhook({
    method: "post",
    path: "workspaceEvent",
    tags: ["Webhooks"],
    summary: "A workspace event, POSTed to each active hook whose patterns match it (test sends: webhook.test)",
    request: {
      headers: DeliveryHeaders,
      body: jsonBody(
        z
          .object({
            channel: z.string().openapi({ example: "items:posts" }),
            event: z.string().openapi({ example: "created" }),
            data: z
              .record(z.string(), z.unknown())
              .openapi({ description: "The row as the API returns it, projected by payloadFields" }),
            deliveredAt: z.string().openapi({ description: "ISO-8601" }),
          })
          .openapi("WorkspaceEventDelivery"),
      ),
    },
    responses: deliveryResponses,
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "wsa_<64 hex>",
    description: "The project's workspace admin token.",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "userToken", {
    type: "http",
    scheme: "bearer",
    description: "A workspace user's token from sign-up or sign-in.",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "pak_<64 hex>",
    description: "An API key of the project's org (acts as workspace admin).",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "sessionCookie", {
    type: "apiKey",
    in: "cookie",
    name: `${deps.config.cookiePrefix}.session_token`,
    description: "A session of an admin or owner of the project's org.",
  });
  const trustedOrigin = new URL(deps.config.publicUrl).origin;
  const sessionCookie = `${deps.config.cookiePrefix}.session_token`;
  // Rate limit per project and credential (or address; sign-up and sign-in per project and
  // address at the stricter AUTH_RATE_LIMIT_PER_MINUTE, as the console's are), the cross-site
  // check of cookie-authenticated writes (an org admin's session is a workspace admin), then the
  // project and the caller, before any request validation: an anonymous caller gets 401
  // whatever the body (sign-up and sign-in excepted).
  app.use("*", async (c, next) => {
    const projectId = c.req.param("projectId") as string;
    const address = c.get("clientIp");
    const { method, path } = c.req;
    const anonymous = ANONYMOUS.test(path);
    if (method === "POST" && anonymous) {
      await limitRate(c, runtime.limiter, `ws-auth:${projectId}:${address}`, deps.config.authRateLimitPerMinute);
    }
    let visit: WorkspaceVisit;
    try {
      visit = await visitWorkspace(c, runtime, projectId, anonymous);
    } catch (error) {
      // Refused before anyone was recognised (bad credentials, no such project): the address's
      // budget pays, so made-up tokens cannot each open a budget of their own.
      await limitRate(c, runtime.limiter, `ip:${address}`, deps.config.rateLimitPerMinute);
      throw error;
    }
    // Rate-limited per principal, as the console API is: the project's admin token, an org
    // API key or account (their console budget), a workspace user, or the address.
    await limitRate(c, runtime.limiter, workspaceBucket(visit, address), deps.config.rateLimitPerMinute);
    assertSameOriginWrite(c, trustedOrigin, sessionCookie);
    // Who may call comes before what was sent, and before the project's state: a workspace user
    // hears 403 from an admin operation, a read-only key from any write, and an anonymous caller
    // 401, whatever the body (or its size) and whether or not the project is paused (409).
    const write = method !== "GET" && method !== "HEAD";
    if (ADMIN_ONLY.test(path) || (method === "POST" && CREATE_COLLECTION.test(path))) requireAdmin(visit, write);
    else if (MEMBERS.test(path)) requireMember(visit, write);
    c.set("workspace", openWorkspace(c, runtime, visit));
    await limitRequestBody(c, wantsIdempotency(c) ? () => idempotent(c, deps, sessionCookie, next) : next);
  });
  return app
    .openapi(r.signUp, async (c) => c.json(await signUpUser({ ctx: ctxOf(c), input: c.req.valid("json") }), 201))
    .openapi(r.signIn, async (c) => c.json(await signInUser({ ctx: ctxOf(c), input: c.req.valid("json") }), 200))
    .openapi(r.signOut, async (c) => {
      await signOutUser({ ctx: ctxOf(c) });
      return c.json({ ok: true }, 200);
    })
    .openapi(r.deleteUser, async (c) => {
      await deleteUser({ ctx: ctxOf(c), id: c.req.valid("param").id });
      return c.body(null, 204);
    })
    .openapi(r.upload, async (c) => {
      const ctx = ctxOf(c);
      const incoming = c.env?.incoming;
      const body = incoming ?? Readable.fromWeb((c.req.raw.body ?? new ReadableStream()) as never);
      const upload = { body, contentType: c.req.header("content-type"), name: c.req.valid("query").name };
      return c.json(await uploadFile({ ctx, upload }), 201);
    })
    .openapi(r.listFiles, async (c) => c.json(await listFiles({ ctx: ctxOf(c), query: c.req.valid("query") }), 200))
    .openapi(r.download, async (c) => {
      const file = await downloadFile({ ctx: ctxOf(c), id: c.req.valid("param").id });
      return c.body(file.content, 200, {
        "Content-Type": file.contentType,
        "Content-Length": String(file.size),
        "Content-Disposition": `attachment; filename*=UTF-8''${encodeURIComponent(file.name)}`,
        // The type is the uploader's word: a browser must not sniff one of its own (HTML, say).
        "X-Content-Type-Options": "nosniff",
      });
    })
    .openapi(r.deleteFile, async (c) => {
      await deleteFile({ ctx: ctxOf(c), id: c.req.valid("param").id });
      return c.body(null, 204);
    })
    .openapi(r.createCollection, async (c) =>
      c.json(await createCollection({ ctx: ctxOf(c), input: c.req.valid("json") }), 201),
    )
    .openapi(r.listCollections, async (c) => c.json(await listCollections({ ctx: ctxOf(c) }), 200))
    .openapi(r.createItem, async (c) =>
      c.json(
        await createItem({ ctx: ctxOf(c), collection: c.req.valid("param").collection, input: c.req.valid("json") }),
        201,
      ),
    )
    .openapi(r.listItems, async (c) =>
      c.json(
        await listItems({ ctx: ctxOf(c), collection: c.req.valid("param").collection, query: c.req.valid("query") }),
        200,
      ),
    )
    .openapi(r.getItem, async (c) => {
      const { collection, id } = c.req.valid("param");
      return c.json(await getItem({ ctx: ctxOf(c), collection, id }), 200);
    })
    .openapi(r.updateItem, async (c) => {
      const { collection, id } = c.req.valid("param");
      return c.json(await updateItem({ ctx: ctxOf(c), collection, id, input: c.req.valid("json") }), 200);
    })
    .openapi(r.deleteItem, async (c) => {
      const { collection, id } = c.req.valid("param");
      await deleteItem({ ctx: ctxOf(c), collection, id });
      return c.body(null, 204);
    })
    .openapi(r.createHook, async (c) => c.json(await createHook({ ctx: ctxOf(c), input: c.req.valid("json") }), 201))
    .openapi(r.listHooks, async (c) => c.json(await listHooks({ ctx: ctxOf(c) }), 200))
    .openapi(r.retry, async (c) => c.json(await retryDelivery({ ctx: ctxOf(c), id: c.req.valid("param").id }), 200))
    .openapi(r.getHook, async (c) => c.json(await getHook({ ctx: ctxOf(c), id: c.req.valid("param").id }), 200))
    .openapi(r.updateHook, async (c) =>
      c.json(await updateHook({ ctx: ctxOf(c), id: c.req.valid("param").id, input: c.req.valid("json") }), 200),
    )
    .openapi(r.deleteHook, async (c) => {
      await deleteHook({ ctx: ctxOf(c), id: c.req.valid("param").id });
      return c.body(null, 204);
    })
    .openapi(r.testHook, async (c) => c.json(await testHook({ ctx: ctxOf(c), id: c.req.valid("param").id }), 200))
    .openapi(r.hookDeliveries, async (c) => {
      const query = c.req.valid("query");
      return c.json(await listHookDeliveries({ ctx: ctxOf(c), id: c.req.valid("param").id, query }), 200);
    });
}
