import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { matchedRoutes } from "hono/route";

/** An operation's OpenAPI `security`: any one of the requirements admits the caller; `{}` is "anyone". */
export type Security = Record<string, string[]>[];

/**
 * The declared `security` of the operation a request was routed to, so that what the OpenAPI
 * document says and what is enforced cannot disagree: middleware reads it instead of matching
 * paths. `mountPath` is where `router` is mounted (`/api`, `/w/:projectId/api`). Undefined when
 * the request matched no operation (an unknown path, or a method the path does not take).
 * Indexed on first use, once every route is registered.
 */
// biome-ignore lint/suspicious/noExplicitAny: any router's environment
export function declaredSecurity(router: OpenAPIHono<any>, mountPath: string): (c: Context) => Security | undefined {
  let index: Map<string, Security> | undefined;
  return (c) => {
    index ??= new Map(
      router.openAPIRegistry.definitions.flatMap((definition): Array<[string, Security]> => {
        if (definition.type !== "route") return [];
        const { method, path, security } = definition.route;
        const routed = `${mountPath}${path.replace(/\{([^}/]+)\}/g, ":$1")}`;
        return [[`${method.toUpperCase()} ${routed}`, security ?? []]];
      }),
    );
    // The handler is the last operation matched: middleware is registered for every method
    // (ALL), and the console's catch-all GET (`*`) follows every route.
    for (const matched of matchedRoutes(c).toReversed()) {
      const security = matched.method === "ALL" ? undefined : index.get(`${matched.method} ${matched.path}`);
      if (security) return security;
    }
    return undefined;
  };
}

/** Whether `security` lets callers without credentials in (none declared, or an empty requirement). */
export function isPublic(security: Security): boolean {
  return security.length === 0 || security.some((requirement) => Object.keys(requirement).length === 0);
}
