import { z } from "@hono/zod-openapi";
import { limitRequestBody } from "../../../http/body-limit.ts";
import { idempotent, wantsIdempotency, withIdempotencyKeyHeader } from "../../../http/idempotency.ts";
import { declaredSecurity } from "../../../http/operations.ts";
import { limitRate } from "../../../http/rate-limit.ts";
import { createRouter, jsonBody, withOperationIds } from "../../../http/router.ts";
import { assertSameOriginWrite } from "../../../http/same-origin.ts";
import { assertD1Room } from "../../usage/quotas.ts";
import { DeliveryHeaders, deliveryResponses } from "../../webhooks/schemas.ts";
import {
  openWorkspace,
  requireAdmin,
  requireMember,
  visitWorkspace,
  type WorkspaceRuntime,
  type WorkspaceVisit,
} from "../access.ts";
import { authRoutes } from "./auth.ts";
import { fileRoutes } from "./files.ts";
import { itemRoutes } from "./items.ts";
import { admitsOf, type WorkspaceEnv } from "./security.ts";
import { userRoutes } from "./users.ts";
import { webhookRoutes } from "./webhooks.ts";

/** Where the workspace API is mounted in the app. */
export const WORKSPACE_MOUNT = "/w/:projectId/api";

/** The OpenAPI 3.1 document of the workspace API (one for every workspace; the project is in the server URL). */
export function workspaceDocument(router: ReturnType<typeof workspaceRoutes>, version: string) {
  const document = router.getOpenAPI31Document({
    openapi: "3.1.0",
    info: {
      title: "Plinth workspace API",
      version,
      description: "Each project's own backend: collections, items, workspace users, files and webhooks.",
      license: { name: "MIT", url: "https://spdx.org/licenses/MIT.html" },
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
  const app = createRouter<WorkspaceEnv>();
  app.openAPIRegistry.registerWebhook({
    method: "post",
    path: "workspaceEvent",
    operationId: "workspaceEvent",
    tags: ["Webhooks"],
    summary: "A workspace event, POSTed to each active hook whose patterns match it (test sends: webhook.test)",
    // A delivery carries no credentials: its receiver checks the signature headers.
    security: [],
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
  const securityOf = declaredSecurity(app, WORKSPACE_MOUNT);
  const { rateLimitPerMinute, authRateLimitPerMinute } = deps.config;
  app.use("*", async (c, next) => {
    const address = c.get("clientRateKey");
    const write = c.req.method !== "GET" && c.req.method !== "HEAD";
    const admits = admitsOf(securityOf(c));
    // Sign-up and sign-in, open to anyone: the address's budget first, so that nothing is read
    // or kept for a made-up project id; then, once the project is found, the stricter budget of
    // the address on that project.
    const credentials = admits === "anyone" && write;
    if (credentials) await limitRate(c, runtime.limiter, `ip:${address}`, rateLimitPerMinute);
    let visit: WorkspaceVisit;
    let projectId: string | undefined;
    try {
      visit = await visitWorkspace(c, runtime, c.req.param("projectId") as string, admits === "anyone", (id) => {
        projectId = id;
      });
    } catch (error) {
      // A project's own refusals (bad credentials) are its tenant errors, kept apart as
      // unauthenticated ones; none for a made-up id.
      if (projectId !== undefined) runtime.errors.noteAnswer(c, projectId, error, false);
      // Refused before anyone was recognised (bad credentials, no such project): the address's
      // budget pays, so made-up tokens cannot each open a budget of their own.
      if (!credentials) await limitRate(c, runtime.limiter, `ip:${address}`, rateLimitPerMinute);
      throw error;
    }
    // Metered once the project is known: what a made-up id asks for is nobody's usage.
    runtime.meter.count(visit.project.id, visit.project.org_id);
    // The workspace stays held (open) until the request is over, whatever its outcome; its
    // answer, if an error, is recorded for the project (tenant errors).
    let thrown: unknown;
    try {
      if (credentials) {
        await limitRate(c, runtime.limiter, `ws-auth:${visit.project.id}:${address}`, authRateLimitPerMinute);
      }
      // Rate-limited per principal, as the console API is: the project's admin token, an org
      // API key or account (their console budget), a workspace user, or the address (unless it
      // paid above).
      if (!credentials || visit.caller.kind !== "anonymous") {
        await limitRate(c, runtime.limiter, workspaceBucket(visit, address), rateLimitPerMinute);
      }
      assertSameOriginWrite(c, trustedOrigin, sessionCookie);
      // Who may call comes before what was sent, and before the project's state: a workspace user
      // hears 403 from an admin operation, a read-only key from any write, and an anonymous caller
      // 401, whatever the body (or its size) and whether or not the project is paused (409).
      if (admits === "admin") requireAdmin(visit, write);
      else if (admits === "member") requireMember(visit, write);
      const workspace = openWorkspace(c, runtime, visit);
      // The org's d1 allowance (DESIGN §8): once reached, writes that add data are refused;
      // deletes (which free it), sign-in and sign-out still go.
      if (write && c.req.method !== "DELETE" && !/\/auth\/sign-(in|out)$/.test(c.req.path)) {
        await assertD1Room(deps, visit.project.org_id);
      }
      c.set("workspace", workspace);
      await limitRequestBody(c, wantsIdempotency(c) ? () => idempotent(c, deps, sessionCookie, next) : next);
    } catch (error) {
      thrown = error;
      throw error;
    } finally {
      visit.lease?.release();
      runtime.errors.noteAnswer(c, visit.project.id, thrown, visit.caller.kind !== "anonymous");
    }
  });
  return app
    .route("/", authRoutes())
    .route("/", userRoutes())
    .route("/", fileRoutes())
    .route("/", itemRoutes())
    .route("/", webhookRoutes());
}
