import { createRoute, z } from "@hono/zod-openapi";
import type { Context, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { matchedRoutes } from "hono/route";
import { NoResultError, sql } from "kysely";
import type { Auth } from "./auth/better-auth.ts";
import type { ConsoleSessions } from "./auth/console-sessions.ts";
import { authRoutes } from "./auth/routes.ts";
import type { Deps } from "./deps.ts";
import { accountRoutes } from "./domains/account/routes.ts";
import { alarmRoutes } from "./domains/alarms/routes.ts";
import { apiKeyRoutes } from "./domains/api-keys/routes.ts";
import { auditRoutes } from "./domains/audit/routes.ts";
import { backupRoutes } from "./domains/backups/routes.ts";
import { billingRoutes } from "./domains/billing/routes.ts";
import { branchRoutes } from "./domains/branches/routes.ts";
import { domainRoutes } from "./domains/domains/routes.ts";
import { exportRoutes } from "./domains/exports/routes.ts";
import { scimRoutes } from "./domains/identity/scim/routes.ts";
import { ssoRoutes } from "./domains/identity/sso/routes.ts";
import { integrationRoutes } from "./domains/integrations/routes.ts";
import { memberRoutes } from "./domains/members/routes.ts";
import { notificationRoutes } from "./domains/notifications/routes.ts";
import { authorize, type PermissionName, resolveOrgAccess } from "./domains/orgs/access.ts";
import { orgRoutes } from "./domains/orgs/routes.ts";
import { planRoutes } from "./domains/plans/routes.ts";
import { projectRoutes } from "./domains/projects/routes.ts";
import { tenantErrorRoutes } from "./domains/tenant-errors/routes.ts";
import { usageRoutes } from "./domains/usage/routes.ts";
import { documentOrgEvents, webhookRoutes } from "./domains/webhooks/routes.ts";
import type { WorkspaceRuntime } from "./domains/workspace/access.ts";
import { WORKSPACE_MOUNT, workspaceDocument, workspaceRoutes } from "./domains/workspace/routes/index.ts";
import { AppError, ForbiddenError, UnavailableError } from "./errors.ts";
import { bodyWasNotUtf8, limitRequestBody } from "./http/body-limit.ts";
import { consoleRoutes } from "./http/console.ts";
import type { AppEnv } from "./http/context.ts";
import { docsRoutes } from "./http/docs.ts";
import { codeOf, errorResponse } from "./http/envelope.ts";
import { idempotent, wantsIdempotency, withIdempotencyKeyHeader } from "./http/idempotency.ts";
import { identifyCaller } from "./http/identify.ts";
import { IN_PROCESS } from "./http/in-process.ts";
import { httpMetrics, metricsRoute } from "./http/metrics.ts";
import { declaredSecurity, isPublic, type Security } from "./http/operations.ts";
import { requireAccount, requirePrincipal } from "./http/principal.ts";
import { limitRate, type RateLimiter, rateBucket } from "./http/rate-limit.ts";
import { requestContext } from "./http/request-context.ts";
import { anyone, createRouter, errorResponses, jsonContent, withOperationIds } from "./http/router.ts";
import { assertSameOriginWrite } from "./http/same-origin.ts";
import type { SignInFailures } from "./http/sign-in-failures.ts";
import { metricsText } from "./lib/metrics.ts";
import { mcpRoutes } from "./mcp/routes.ts";
import { type McpTool, resolveTools } from "./mcp/tools.ts";

const API_VERSION = "0.0.1";
const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
/** Paths the workspace API's own middleware rate-limits. */
const WORKSPACE_API = /^\/w\/[^/]+\/api\//;

/** Paths outside authentication, each rate-limited in a bucket of its own per address. */
const PUBLIC_PATHS = new Set(["/api/health", "/api/health/ready"]);

/** How long readiness waits for the database or the storage before calling it unreachable. */
const READY_TIMEOUT_MS = 3_000;

const healthRoute = createRoute({
  method: "get",
  path: "/health",
  tags: ["Service"],
  summary: "Liveness and database reachability",
  description: "503 when the database cannot be reached, or while the process shuts down (`SHUTDOWN_DELAY_MS`).",
  security: anyone,
  responses: {
    200: jsonContent(z.object({ status: z.literal("ok"), database: z.literal("ok") }), "Healthy"),
    ...errorResponses(429, 503),
  },
});

const readyRoute = createRoute({
  method: "get",
  path: "/health/ready",
  tags: ["Service"],
  summary: "Readiness: the database and the object storage can be reached",
  description:
    "200 when both can be reached; 503 `UNAVAILABLE` while either cannot (its `details` say which), or while " +
    "the process shuts down. `GET /health` stays the liveness answer.",
  security: anyone,
  responses: {
    200: jsonContent(
      z.object({ status: z.literal("ok"), database: z.literal("ok"), storage: z.literal("ok") }),
      "Ready",
    ),
    ...errorResponses(429, 503),
  },
});

const openApiRoute = createRoute({
  method: "get",
  path: "/openapi.json",
  tags: ["Service"],
  summary: "This OpenAPI 3.1 document",
  security: anyone,
  responses: { 200: jsonContent(z.record(z.string(), z.unknown()), "The OpenAPI document"), ...errorResponses(429) },
});

const workspaceOpenApiRoute = createRoute({
  method: "get",
  path: "/workspace/openapi.json",
  tags: ["Service"],
  summary: "The OpenAPI 3.1 document of the workspace API ({workspaceUrl}/api)",
  security: anyone,
  responses: {
    200: jsonContent(z.record(z.string(), z.unknown()), "The workspace OpenAPI document"),
    ...errorResponses(429),
  },
});

export interface AppParts {
  deps: Deps;
  auth: Auth;
  sessions: ConsoleSessions;
  limiter: RateLimiter;
  signInFailures: SignInFailures;
  workspace: WorkspaceRuntime;
  /** True once `SIGTERM` has come: health answers 503 so that a load balancer stops sending. */
  shuttingDown?: () => boolean;
  /** The Prometheus text `GET /metrics` answers (with METRICS_TOKEN set). */
  metrics?: () => Promise<string>;
}

export function createApp({
  deps,
  auth,
  sessions,
  limiter,
  signInFailures,
  workspace,
  shuttingDown,
  metrics = metricsText,
}: AppParts): Hono<AppEnv> {
  const { config } = deps;
  const api = createRouter();
  const workspaceApi = workspaceRoutes(workspace);

  const securityOf = declaredSecurity(api, "/api");
  const limits = { perMinute: config.rateLimitPerMinute, authPerMinute: config.authRateLimitPerMinute };
  const trustedOrigin = new URL(config.publicUrl).origin;
  const sessionCookie = `${config.cookiePrefix}.session_token`;
  // One middleware, awaiting only when it must: it runs on every request.
  api.use("*", async (c, next) => {
    if (PUBLIC_PATHS.has(c.req.path)) {
      await limitRate(c, limiter, `public:${c.get("clientRateKey")}`, limits.perMinute);
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
    const admits = admitsOf(securityOf(c));
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
      (await passesGuards(c, deps, admits)) ? idempotent(c, deps, sessionCookie, next) : next(),
    );
  });

  api
    .openapi(healthRoute, async (c) => {
      if (shuttingDown?.()) throw new UnavailableError("shutting down");
      try {
        await sql`select 1`.execute(deps.db);
        return c.json({ status: "ok" as const, database: "ok" as const }, 200);
      } catch (error) {
        deps.log.error({ err: error }, "health check: database unreachable");
        throw new UnavailableError("database unreachable");
      }
    })
    .openapi(readyRoute, async (c) => {
      if (shuttingDown?.()) throw new UnavailableError("shutting down");
      const [database, storage] = await Promise.all([
        reachable(deps, "database", () => sql`select 1`.execute(deps.db)),
        reachable(deps, "storage", () => deps.storage.check()),
      ]);
      if (database !== "ok" || storage !== "ok") {
        const down = [database !== "ok" && "database", storage !== "ok" && "storage"].filter(Boolean).join(" and ");
        throw new AppError("UNAVAILABLE", `${down} unreachable`, { database, storage });
      }
      return c.json({ status: "ok" as const, database: "ok" as const, storage: "ok" as const }, 200);
    })
    .route("/", authRoutes(deps, auth, sessions, signInFailures))
    .route("/", accountRoutes(deps))
    .route("/", orgRoutes(deps))
    .route("/", memberRoutes(deps))
    .route("/", apiKeyRoutes(deps))
    .route("/", auditRoutes(deps))
    .route("/", projectRoutes(deps))
    .route("/", exportRoutes(deps, workspace.pool))
    .route("/", webhookRoutes(deps))
    .route("/", integrationRoutes(deps))
    .route("/", notificationRoutes(deps))
    .route("/", planRoutes(deps))
    .route("/", backupRoutes(deps, workspace))
    .route("/", tenantErrorRoutes(deps))
    .route("/", domainRoutes(deps))
    .route("/", usageRoutes(deps))
    .route("/", alarmRoutes(deps))
    .route("/", billingRoutes(deps))
    .route("/", scimRoutes(deps))
    .route("/", ssoRoutes(deps, auth))
    .route("/", branchRoutes(deps, workspace.pool))
    .route(
      "/",
      mcpRoutes(
        () =>
          (tools ??= resolveTools({
            control: { router: api, document: controlDocument() },
            workspace: { document: workspaceDoc() },
          })),
        async (c, request) => {
          const headers: Record<string, string> = { "x-request-id": c.get("requestId") };
          if (request.body !== undefined) headers["content-type"] = "application/json";
          const inner = new Request(new URL(request.path, config.publicUrl), {
            method: request.method,
            headers,
            ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
          });
          const principal = c.get("principal");
          if (principal?.type !== "api_key") throw new Error("an MCP call without its API key");
          return app.fetch(inner, { [IN_PROCESS]: { principal, clientIp: c.get("clientIp") } });
        },
      ),
    );
  let tools: McpTool[] | undefined;

  documentOrgEvents(api);
  api.openAPIRegistry.registerComponent("securitySchemes", "sessionCookie", {
    type: "apiKey",
    in: "cookie",
    name: `${config.cookiePrefix}.session_token`,
    description: "The session cookie set by sign-up and sign-in.",
  });
  api.openAPIRegistry.registerComponent("securitySchemes", "scimToken", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "scim_…",
    description: "An org's SCIM token (POST /org/{slug}/scim/token), for its identity provider.",
  });
  api.openAPIRegistry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    bearerFormat: "pak_<64 hex>",
    description: "An organization API key: `Authorization: Bearer pak_…`.",
  });

  let document: Record<string, unknown> | undefined;
  const controlDocument = () =>
    (document ??= withIdempotencyKeyHeader(
      withOperationIds(
        api.getOpenAPI31Document({
          openapi: "3.1.0",
          info: {
            title: "Plinth API",
            version: API_VERSION,
            description: "Control plane of a self-hostable backend-as-a-service platform.",
            license: { name: "MIT", url: "https://spdx.org/licenses/MIT.html" },
          },
          servers: [{ url: "/api" }],
        }),
      ),
    ) as unknown as Record<string, unknown>);
  api.openapi(openApiRoute, (c) => c.json(controlDocument(), 200));
  let workspaceDocumentBuilt: Record<string, unknown> | undefined;
  const workspaceDoc = () =>
    (workspaceDocumentBuilt ??= workspaceDocument(workspaceApi, API_VERSION) as unknown as Record<string, unknown>);
  api.openapi(workspaceOpenApiRoute, (c) => c.json(workspaceDoc(), 200));
  api.route("/", docsRoutes());

  const app = createRouter();
  app.use("*", requestContext(deps.log, config.trustProxy));
  if (config.metricsToken) app.use("*", httpMetrics());
  // Paths outside both APIs (answered 404) are rate-limited by address like any anonymous call.
  app.use("*", async (c, next) => {
    if (c.req.path.startsWith("/api/") || WORKSPACE_API.test(c.req.path)) return next();
    await limitRate(c, limiter, `ip:${c.get("clientRateKey")}`, limits.perMinute);
    return next();
  });
  app.route("/api", api);
  app.route(WORKSPACE_MOUNT, workspaceApi);
  // Prometheus's (DESIGN §16): behind METRICS_TOKEN, and not there at all without it.
  if (config.metricsToken) app.get("/metrics", metricsRoute(config.metricsToken, metrics));
  else app.get("/metrics", (c) => errorResponse(c, "NOT_FOUND", `no route for GET ${c.req.path}`));
  // The web console, at every path outside the APIs that asks for HTML (DESIGN §15), the
  // invitation mail's `/accept-invite` included.
  app.get("*", consoleRoutes());
  app.notFound(notFoundOrWrongMethod(app));
  app.onError((error, c) => renderError(error, c, deps));
  return app;
}

/** Whether `check` succeeds within READY_TIMEOUT_MS; a failure is logged (the storage logs its own). */
async function reachable(deps: Deps, what: string, check: () => Promise<unknown>): Promise<"ok" | "unreachable"> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS);
  });
  try {
    await Promise.race([check(), timeout]);
    return "ok";
  } catch (error) {
    if (!(error instanceof AppError)) deps.log.error({ err: error }, `readiness: ${what} unreachable`);
    return "unreachable";
  } finally {
    clearTimeout(timer);
  }
}

/** Whether `path` is inside an org (`/api/org/{slug}…`) other than `slug`. */
function inOtherOrg(path: string, slug: string): boolean {
  if (!path.startsWith("/api/org/")) return false;
  const own = `/api/org/${slug}`;
  return path !== own && !path.startsWith(`${own}/`);
}

/** Who an operation admits: anyone, any caller (`sessionOrKey`), or a signed-in account only (`sessionOnly`). */
type Admits = "anyone" | "caller" | "account";

function admitsOf(security: Security | undefined): Admits {
  if (security === undefined || isPublic(security)) return "anyone";
  // SCIM routes authenticate their own token (domains/identity/scim/tokens.ts).
  if (security.every((requirement) => "scimToken" in requirement)) return "anyone";
  return security.some((requirement) => "apiKey" in requirement) ? "caller" : "account";
}

/**
 * Whether a POST carrying `Idempotency-Key` may have it looked at now: its operation exists, and
 * in an org the caller sees the org and (where the route checks it up front) holds the
 * permission. Otherwise the request goes on without it and hears its 404 or 403, as it would
 * without the header; a removed member's retry is never answered from what was kept for them.
 * The access found is kept for the handler (`orgCtx`), which need not look it up again.
 */
async function passesGuards(c: Context<AppEnv>, deps: Deps, admits: Admits): Promise<boolean> {
  if (admits === "anyone") return false;
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

function renderError(error: Error, c: Context<AppEnv>, deps: Deps): Response {
  if (error instanceof AppError) return errorResponse(c, error.code, error.message, error.details);
  if (error instanceof HTTPException && error.status < 500) {
    // Hono raises 400 for malformed JSON and zod-openapi 415 for a body that is not JSON;
    // both are a malformed request to the caller.
    const message =
      error.status === 415
        ? "request body must be application/json"
        : bodyWasNotUtf8(c)
          ? "malformed JSON in request body: it is not valid UTF-8"
          : error.message.toLowerCase();
    return errorResponse(
      c,
      error.status === 415 ? "BAD_REQUEST" : codeOf(error.status),
      message || "malformed request",
    );
  }
  // A row the request read at its start and then went to write was gone by then (deleted by a
  // request that overlapped this one): not found, as for any later request.
  if (error instanceof NoResultError) return errorResponse(c, "NOT_FOUND", "not found");
  // Text PostgreSQL cannot store (a NUL character) that came in other than through a validated
  // body, query or path parameter, which refuse it with the field named.
  if ((error as { code?: unknown }).code === "22021") {
    return errorResponse(c, "VALIDATION", "validation failed: text must not contain the NUL character (U+0000)");
  }
  (c.get("log") ?? deps.log).error({ err: error, requestId: c.get("requestId") }, "unhandled error");
  return errorResponse(c, "INTERNAL", "internal error");
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
      return errorResponse(c, "METHOD_NOT_ALLOWED", `${c.req.method} is not allowed on ${c.req.path}`);
    }
    return errorResponse(c, "NOT_FOUND", `no route for ${c.req.method} ${c.req.path}`);
  };
}
