import { createRoute, z } from "@hono/zod-openapi";
import { Scalar } from "@scalar/hono-api-reference";
import type { Context, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { matchedRoutes } from "hono/route";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { NoResultError, sql } from "kysely";
import type { Auth } from "./auth/better-auth.ts";
import type { ConsoleSessions } from "./auth/console-sessions.ts";
import { authRoutes } from "./auth/routes.ts";
import type { Deps } from "./deps.ts";
import { accountRoutes } from "./domains/account/routes.ts";
import { apiKeyRoutes } from "./domains/api-keys/routes.ts";
import { auditRoutes } from "./domains/audit/routes.ts";
import { integrationRoutes } from "./domains/integrations/routes.ts";
import { memberRoutes } from "./domains/members/routes.ts";
import { notificationRoutes } from "./domains/notifications/routes.ts";
import { authorize, type PermissionName, resolveOrgAccess } from "./domains/orgs/access.ts";
import { orgRoutes } from "./domains/orgs/routes.ts";
import { projectRoutes } from "./domains/projects/routes.ts";
import { documentOrgEvents, webhookRoutes } from "./domains/webhooks/routes.ts";
import type { WorkspaceRuntime } from "./domains/workspace/access.ts";
import { workspaceDocument, workspaceRoutes } from "./domains/workspace/routes.ts";
import { acceptInvitePage } from "./http/accept-invite.ts";
import { bodyWasNotUtf8, limitRequestBody } from "./http/body-limit.ts";
import type { AppEnv } from "./http/context.ts";
import { AppError, type ErrorCode, errorBody, ForbiddenError } from "./http/errors.ts";
import { idempotent, wantsIdempotency, withIdempotencyKeyHeader } from "./http/idempotency.ts";
import { identifyCaller } from "./http/identify.ts";
import { requireAccount, requirePrincipal } from "./http/principal.ts";
import { limitRate, type RateLimiter, rateBucket } from "./http/rate-limit.ts";
import { requestContext } from "./http/request-context.ts";
import { createRouter, errorResponses, jsonContent, withOperationIds } from "./http/router.ts";
import { assertSameOriginWrite } from "./http/same-origin.ts";

const API_VERSION = "0.0.1";
const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
/** Paths the workspace API's own middleware rate-limits. */
const WORKSPACE_API = /^\/w\/[^/]+\/api\//;

/** Paths outside authentication, each rate-limited in a bucket of its own per address. */
const PUBLIC_PATHS = new Set(["/api/health"]);

const healthRoute = createRoute({
  method: "get",
  path: "/health",
  tags: ["Service"],
  summary: "Liveness and database reachability",
  description: "503 when the database cannot be reached, or while the process shuts down (`SHUTDOWN_DELAY_MS`).",
  responses: {
    200: jsonContent(z.object({ status: z.literal("ok"), database: z.literal("ok") }), "Healthy"),
    503: jsonContent(z.object({ error: z.object({ code: z.string(), message: z.string() }) }), "Unhealthy"),
    ...errorResponses(429),
  },
});

const openApiRoute = createRoute({
  method: "get",
  path: "/openapi.json",
  tags: ["Service"],
  summary: "This OpenAPI 3.1 document",
  responses: { 200: jsonContent(z.record(z.string(), z.unknown()), "The OpenAPI document"), ...errorResponses(429) },
});

const workspaceOpenApiRoute = createRoute({
  method: "get",
  path: "/workspace/openapi.json",
  tags: ["Service"],
  summary: "The OpenAPI 3.1 document of the workspace API ({workspaceUrl}/api)",
  responses: {
    200: jsonContent(z.record(z.string(), z.unknown()), "The workspace OpenAPI document"),
    ...errorResponses(429),
  },
});

const docsRoute = createRoute({
  method: "get",
  path: "/docs",
  tags: ["Service"],
  summary: "Interactive API reference",
  responses: {
    200: { description: "HTML page", content: { "text/html": { schema: z.string() } } },
    ...errorResponses(429),
  },
});

export interface AppParts {
  deps: Deps;
  auth: Auth;
  sessions: ConsoleSessions;
  limiter: RateLimiter;
  workspace: WorkspaceRuntime;
  /** True once `SIGTERM` has come: health answers 503 so that a load balancer stops sending. */
  shuttingDown?: () => boolean;
}

export function createApp({ deps, auth, sessions, limiter, workspace, shuttingDown }: AppParts): Hono<AppEnv> {
  const { config } = deps;
  const api = createRouter();
  const workspaceApi = workspaceRoutes(workspace);

  const operationOf = operationsOf(api);
  const limits = { perMinute: config.rateLimitPerMinute, authPerMinute: config.authRateLimitPerMinute };
  const trustedOrigin = new URL(config.publicUrl).origin;
  const sessionCookie = `${config.cookiePrefix}.session_token`;
  // One middleware, awaiting only when it must: it runs on every request.
  api.use("*", async (c, next) => {
    if (PUBLIC_PATHS.has(c.req.path)) {
      await limitRate(c, limiter, `public:${c.get("clientIp")}`, limits.perMinute);
      return next();
    }
    const identifying = identifyCaller(deps, sessions, c);
    if (identifying) await identifying;
    const [bucket, limit] = rateBucket(c, limits);
    const limiting = limitRate(c, limiter, bucket, limit);
    if (limiting) await limiting;
    assertSameOriginWrite(c, trustedOrigin, sessionCookie);
    // Authentication comes before request validation: an anonymous caller learns nothing more.
    const { method, path } = c.req;
    const operation = operationOf(method, path);
    const admits = operation?.admits ?? "anyone";
    if (admits !== "anyone") requirePrincipal(c);
    const principal = c.get("principal");
    // Likewise authorization, where it needs nothing but the request: an API key where only a
    // signed-in account may act, and a read-only key writing, are 403 whatever the body. Within
    // another org than the key's it is 404 instead, found out later.
    if (principal?.type === "api_key" && !inOtherOrg(path, principal.org.slug)) {
      if (admits === "account") requireAccount(c);
      if (principal.scope === "read-only" && !READ_METHODS.has(method) && path.startsWith("/api/org/")) {
        throw new ForbiddenError("a read-only API key may only read");
      }
    }
    if (!wantsIdempotency(c)) return limitRequestBody(c, next);
    return limitRequestBody(c, async () =>
      (await passesGuards(c, deps, operation)) ? idempotent(c, deps, sessionCookie, next) : next(),
    );
  });

  api
    .openapi(healthRoute, async (c) => {
      if (shuttingDown?.()) return c.json({ error: { code: "UNAVAILABLE", message: "shutting down" } }, 503);
      try {
        await sql`select 1`.execute(deps.db);
        return c.json({ status: "ok" as const, database: "ok" as const }, 200);
      } catch (error) {
        deps.log.error({ err: error }, "health check: database unreachable");
        return c.json({ error: { code: "UNAVAILABLE", message: "database unreachable" } }, 503);
      }
    })
    .route("/", authRoutes(deps, auth, sessions))
    .route("/", accountRoutes(deps))
    .route("/", orgRoutes(deps))
    .route("/", memberRoutes(deps))
    .route("/", apiKeyRoutes(deps))
    .route("/", auditRoutes(deps))
    .route("/", projectRoutes(deps))
    .route("/", webhookRoutes(deps))
    .route("/", integrationRoutes(deps))
    .route("/", notificationRoutes(deps));

  documentOrgEvents(api);
  api.openAPIRegistry.registerComponent("securitySchemes", "sessionCookie", {
    type: "apiKey",
    in: "cookie",
    name: `${config.cookiePrefix}.session_token`,
    description: "The session cookie set by sign-up and sign-in.",
  });
  api.openAPIRegistry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "pak_<64 hex>",
    description: "An organization API key: `Authorization: Bearer pak_…`.",
  });

  let document: unknown;
  api.openapi(openApiRoute, (c) => {
    document ??= withIdempotencyKeyHeader(
      withOperationIds(
        api.getOpenAPI31Document({
          openapi: "3.1.0",
          info: {
            title: "Plinth API",
            version: API_VERSION,
            description: "Control plane of a self-hostable backend-as-a-service platform.",
          },
          servers: [{ url: "/api" }],
        }),
      ),
    );
    return c.json(document as Record<string, unknown>, 200);
  });
  let workspaceDoc: unknown;
  api.openapi(workspaceOpenApiRoute, (c) => {
    workspaceDoc ??= workspaceDocument(workspaceApi, API_VERSION);
    return c.json(workspaceDoc as Record<string, unknown>, 200);
  });
  api.openapi(docsRoute, Scalar({ url: "/api/openapi.json", pageTitle: "Plinth API reference" }) as never);

  const app = createRouter();
  app.use("*", requestContext(deps.log, config.trustProxy));
  // Paths outside both APIs (answered 404) are rate-limited by address like any anonymous call.
  app.use("*", async (c, next) => {
    if (c.req.path.startsWith("/api/") || WORKSPACE_API.test(c.req.path)) return next();
    await limitRate(c, limiter, `ip:${c.get("clientIp")}`, limits.perMinute);
    return next();
  });
  app.route("/api", api);
  app.route("/w/:projectId/api", workspaceApi);
  // Where invitation mail links to: the web console's page, until there is a console.
  app.get("/accept-invite", acceptInvitePage);
  app.notFound(notFoundOrWrongMethod(app));
  app.onError((error, c) => renderError(error, c, deps));
  return app;
}

/** Whether `path` is inside an org (`/api/org/{slug}…`) other than `slug`. */
function inOtherOrg(path: string, slug: string): boolean {
  if (!path.startsWith("/api/org/")) return false;
  const own = `/api/org/${slug}`;
  return path !== own && !path.startsWith(`${own}/`);
}

/** Who an operation admits, from its declared `security`. */
type Admits = "anyone" | "caller" | "account";

/** An authenticated operation, and whom it admits. */
interface Operation {
  method: string;
  pattern: RegExp;
  admits: Admits;
}

/**
 * Each request's authenticated operation, read from the operations' declared `security`, so the
 * OpenAPI document and the enforcement cannot disagree: any caller, or a signed-in account only
 * (`sessionOnly`); undefined for public operations and unknown paths. Compiled on first use,
 * once every route is registered.
 */
function operationsOf(api: ReturnType<typeof createRouter>) {
  let operations: Operation[] | undefined;
  return (method: string, path: string): Operation | undefined => {
    operations ??= api.openAPIRegistry.definitions.flatMap((definition) => {
      if (definition.type !== "route") return [];
      const requirements = definition.route.security ?? [];
      if (requirements.length === 0 || requirements.some((r) => Object.keys(r).length === 0)) return [];
      const pattern = new RegExp(`^/api${definition.route.path.replace(/\{[^/]+\}/g, "[^/]+")}$`);
      // Only a session cookie (no API key among the requirements): a signed-in account only.
      const admits: Admits = requirements.some((r) => "apiKey" in r) ? "caller" : "account";
      return [{ method: definition.route.method.toUpperCase(), pattern, admits }];
    });
    return operations.find((op) => op.method === method && op.pattern.test(path));
  };
}

/**
 * Whether a POST carrying `Idempotency-Key` may have it looked at now: its operation exists, and
 * in an org the caller sees the org and (where the route checks it up front) holds the
 * permission. Otherwise the request goes on without it and hears its 404 or 403, as it would
 * without the header; a removed member's retry is never answered from what was kept for them.
 * The access found is kept for the handler (`orgCtx`), which need not look it up again.
 */
async function passesGuards(c: Context<AppEnv>, deps: Deps, operation: Operation | undefined): Promise<boolean> {
  if (operation === undefined) return false;
  const slug = ORG_PATH.exec(c.req.path)?.[1];
  const principal = c.get("principal");
  if (slug === undefined || !principal) return true;
  try {
    const access = await resolveOrgAccess(deps, principal, decodeURIComponent(slug));
    // The permission the route's own middleware (`requires`) checks before the input.
    const permission = matchedRoutes(c)
      .map((route) => (route.handler as { permission?: PermissionName }).permission)
      .find((name) => name !== undefined);
    if (permission) authorize(access, permission);
    c.set("orgAccess", access);
    return true;
  } catch {
    return false;
  }
}
const ORG_PATH = /^\/api\/org\/([^/]+)\//;

const HTTP_EXCEPTION_CODES: Partial<Record<number, ErrorCode>> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  413: "PAYLOAD_TOO_LARGE",
};

function renderError(error: Error, c: Context<AppEnv>, deps: Deps): Response {
  if (error instanceof AppError) {
    return c.json(errorBody(error.code, error.message, error.details), error.status);
  }
  if (error instanceof HTTPException) {
    // Hono raises 400 for malformed JSON and zod-openapi 415 for a body that is not JSON;
    // both are a malformed request to the caller.
    const status = (error.status === 415 ? 400 : error.status) as ContentfulStatusCode;
    const code = HTTP_EXCEPTION_CODES[status];
    if (code) {
      const message =
        error.status === 415
          ? "request body must be application/json"
          : bodyWasNotUtf8(c)
            ? "malformed JSON in request body: it is not valid UTF-8"
            : error.message.toLowerCase();
      return c.json(errorBody(code, message || "malformed request"), status);
    }
  }
  // A row the request read at its start and then went to write was gone by then (deleted by a
  // request that overlapped this one): not found, as for any later request.
  if (error instanceof NoResultError) return c.json(errorBody("NOT_FOUND", "not found"), 404);
  // Text PostgreSQL cannot store (a NUL character) that came in other than through a validated
  // body, query or path parameter, which refuse it with the field named.
  if ((error as { code?: unknown }).code === "22021") {
    return c.json(errorBody("VALIDATION", "validation failed: text must not contain the NUL character (U+0000)"), 422);
  }
  (c.get("log") ?? deps.log).error({ err: error, requestId: c.get("requestId") }, "unhandled error");
  return c.json(errorBody("INTERNAL", "internal error"), 500);
}

/** Tells a wrong method (405, with `Allow`) from an unknown path (404). */
function notFoundOrWrongMethod(app: Hono<AppEnv>) {
  let routes: { method: string; pattern: RegExp }[] | undefined;
  return (c: Context<AppEnv>): Response => {
    routes ??= app.routes
      .filter((route) => route.method !== "ALL" && !route.path.includes("*"))
      .map((route) => ({
        method: route.method,
        // Exactly as routed: a trailing slash is another path (404), as it is to the router.
        pattern: new RegExp(`^${route.path.replace(/:[^/]+/g, "[^/]+")}$`),
      }));
    const allowed = [...new Set(routes.filter((route) => route.pattern.test(c.req.path)).map((r) => r.method))];
    if (allowed.length > 0) {
      c.header("Allow", allowed.join(", "));
      return c.json(errorBody("METHOD_NOT_ALLOWED", `${c.req.method} is not allowed on ${c.req.path}`), 405);
    }
    return c.json(errorBody("NOT_FOUND", `no route for ${c.req.method} ${c.req.path}`), 404);
  };
}
