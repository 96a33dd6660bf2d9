import type { Context, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import { UnauthorizedError } from "../errors.ts";
import { activeRequests, METRICS_CONTENT_TYPE, requestDuration } from "../lib/metrics.ts";
import { sameHash, sha256Hex } from "../lib/tokens.ts";
import type { AppEnv } from "./context.ts";

/**
 * Times every request into `http_server_request_duration_seconds` and counts those in flight
 * (DESIGN §16), labelled as OpenTelemetry names them. The route is the template a request matched
 * (`/api/org/{slug}/projects`), never its path, so ids never become label values; a request
 * that matched no route has none. Installed only when metrics are on (METRICS_TOKEN).
 */
export function httpMetrics(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const method = c.req.method;
    const started = performance.now();
    activeRequests.inc({ http_request_method: method });
    try {
      await next();
    } finally {
      activeRequests.dec({ http_request_method: method });
      const route = routeTemplate(c);
      requestDuration.observe(
        {
          http_request_method: method,
          http_response_status_code: c.res.status,
          ...(route === undefined ? {} : { http_route: route }),
        },
        (performance.now() - started) / 1000,
      );
    }
  };
}

/** Hono's paths (`/api/org/:slug`) as OpenAPI writes them (`/api/org/{slug}`), converted once each. */
const templates = new Map<string, string>();

/**
 * The template of the route that answered: the last one matched that is an operation (middleware
 * matches every method, as `ALL`). The console's catch-all (`*`) answers pages, `/*`.
 */
function routeTemplate(c: Context): string | undefined {
  let wildcard = false;
  const matched = matchedRoutes(c);
  for (let index = matched.length - 1; index >= 0; index--) {
    const route = matched[index];
    if (!route || route.method === "ALL") continue;
    if (route.path === "*" || route.path.endsWith("/*")) {
      wildcard = true;
      continue;
    }
    let template = templates.get(route.path);
    if (template === undefined) {
      template = route.path.replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?/g, "{$1}");
      templates.set(route.path, template);
    }
    return template;
  }
  return wildcard && c.res.status !== 404 ? "/*" : undefined;
}

/**
 * `GET /metrics`: the Prometheus text, for a caller with `Authorization: Bearer <METRICS_TOKEN>`.
 * `collect` gathers it (this process's registry, and its worker thread's).
 */
export function metricsRoute(token: string, collect: () => Promise<string>) {
  const expected = sha256Hex(token);
  return async (c: Context<AppEnv>) => {
    const given = /^Bearer\s+(\S+)$/i.exec(c.req.header("authorization") ?? "")?.[1];
    if (!given || !sameHash(sha256Hex(given), expected)) {
      c.header("WWW-Authenticate", 'Bearer realm="plinth-metrics"');
      throw new UnauthorizedError("GET /metrics needs Authorization: Bearer <METRICS_TOKEN>");
    }
    return c.body(await collect(), 200, { "Content-Type": METRICS_CONTENT_TYPE, "Cache-Control": "no-store" });
  };
}
