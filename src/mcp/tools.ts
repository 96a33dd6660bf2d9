import { type PermissionName, scopeAllows } from "../domains/orgs/access.ts";
import type { KeyScope } from "../http/principal.ts";
import { TOOL_CATALOG, type ToolEntry } from "./catalog.ts";

type JsonSchema = Record<string, unknown>;
/** A route as Hono lists it: one per handler, middleware included. */
type RouterRoute = { method: string; path: string; handler: unknown };
// biome-ignore lint/suspicious/noExplicitAny: an OpenAPI document as JSON
type OpenApiDocument = any;

/** A catalog entry resolved against its REST operation: its input schema, who may call it, how to call it. */
export interface McpTool {
  name: string;
  description: string;
  readOnly: boolean;
  destructive: boolean;
  idempotent: boolean;
  /** JSON Schema of the arguments: the operation's parameters and body, as the OpenAPI document has them. */
  inputSchema: JsonSchema & { type: "object" };
  /** Whether an API key of `scope` may call it. */
  allows(scope: KeyScope): boolean;
  /** The REST request a call with `args` makes, or the arguments' faults (each naming its field). */
  request(args: Record<string, unknown>, orgSlug: string): RestRequest | ArgumentFault[];
}

export interface RestRequest {
  method: string;
  /** From the service's root: `/api/org/…` or `/w/{projectId}/api/…`. */
  path: string;
  body?: unknown;
}

export interface ArgumentFault {
  path: string;
  message: string;
}

/** What resolving the catalog needs of the two APIs. */
export interface ToolSources {
  control: { router: { routes: readonly RouterRoute[] }; document: OpenApiDocument };
  workspace: { document: OpenApiDocument };
}

/** Under this argument when the body is not an object of known fields (an item's data), or they clash. */
const BODY_ARGUMENT = "data";

/**
 * What a path argument may be: one segment that no URL parser or router reads as anything else
 * (`.`, `..`, `/`, `\` and percent-escapes would let a call reach another route than its tool's).
 */
const SEGMENT = "[A-Za-z0-9_-]+";
const PATH_SEGMENT = new RegExp(`^${SEGMENT}$`);
const PATH_SEGMENT_RULE = "must be one path segment of A-Z, a-z, 0-9, '_' or '-'";

/**
 * Resolves every catalog entry against the OpenAPI documents and the routes; throws when an entry
 * names no operation, or a write names no permission (so a tool can never outlive its route).
 */
export function resolveTools(sources: ToolSources): McpTool[] {
  const permissions = routePermissions(sources.control.router);
  return TOOL_CATALOG.map((entry) => {
    const [method, path] = entry.operation.split(" ") as [string, string];
    const document = entry.api === "control" ? sources.control.document : sources.workspace.document;
    const operation = document.paths?.[path]?.[method.toLowerCase()];
    if (!operation) throw new Error(`MCP tool ${entry.name}: no operation ${entry.operation} in the ${entry.api} API`);
    const readOnly = method === "GET";
    return {
      name: entry.name,
      description: entry.description,
      readOnly,
      destructive: readOnly ? false : (entry.destructive ?? false),
      idempotent: readOnly || (entry.idempotent ?? false),
      allows: scopeRule(entry, readOnly, permissionOf(entry, permissions.get(`${method} ${path}`))),
      ...callShape(entry, method, path, operation, document),
    };
  });
}

/** Which key scopes may call a tool: any for a read; for a write, its route's permission (the workspace: full keys). */
function scopeRule(entry: ToolEntry, readOnly: boolean, permission: PermissionName | undefined) {
  if (readOnly) return () => true;
  // The workspace takes writes from full keys only (a key there acts as workspace admin).
  if (entry.api === "workspace") return (scope: KeyScope) => scope === "full";
  if (!permission) throw new Error(`MCP tool ${entry.name}: ${entry.operation} declares no permission (requires)`);
  return (scope: KeyScope) => scopeAllows(scope, permission);
}

/** The permission a write needs: its route's, or the catalog's where the route checks none up front (never both). */
function permissionOf(entry: ToolEntry, routes: PermissionName | undefined): PermissionName | undefined {
  if (routes && entry.permission) {
    throw new Error(`MCP tool ${entry.name}: its route checks ${routes}; the catalog must not name a permission`);
  }
  return routes ?? entry.permission;
}

/** `METHOD /openapi/{path}` → the permission its route's `requires` middleware checks. */
function routePermissions(router: { routes: readonly RouterRoute[] }): Map<string, PermissionName> {
  const found = new Map<string, PermissionName>();
  for (const route of router.routes) {
    const permission = (route.handler as { permission?: PermissionName }).permission;
    if (permission) found.set(`${route.method} ${route.path.replace(/:(\w+)/g, "{$1}")}`, permission);
  }
  return found;
}

interface Parameter {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required?: boolean;
  description?: string;
  schema?: JsonSchema;
}

function callShape(
  entry: ToolEntry,
  method: string,
  path: string,
  operation: OpenApiDocument,
  document: OpenApiDocument,
): Pick<McpTool, "inputSchema" | "request"> {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  const pathNames: string[] = [];
  const queryNames = new Set<string>();
  const take = (name: string, schema: JsonSchema, isRequired: boolean) => {
    properties[name] = schema;
    if (isRequired) required.push(name);
  };
  if (entry.api === "workspace") {
    take("projectId", { type: "string", description: "The project's id (prj_…) or a branch's id (brn_…)" }, true);
    pathNames.push("projectId");
  }
  for (const parameter of (operation.parameters ?? []) as Parameter[]) {
    // The org is the API key's own.
    if (entry.api === "control" && parameter.in === "path" && parameter.name === "slug") continue;
    if (parameter.in !== "path" && parameter.in !== "query") continue;
    const schema = inline(document, { ...parameter.schema, ...describe(parameter.description) });
    take(parameter.name, schema, parameter.in === "path" || parameter.required === true);
    if (parameter.in === "path") pathNames.push(parameter.name);
    else queryNames.add(parameter.name);
  }
  const bodySpec = operation.requestBody?.content?.["application/json"];
  let bodyFields: ReadonlySet<string> | "whole" | null = null;
  if (bodySpec) {
    const schema = inline(document, bodySpec.schema ?? {});
    const flat = flatFields(schema);
    if (flat && !Object.keys(flat.fields).some((name) => name in properties)) {
      for (const [name, field] of Object.entries(flat.fields)) take(name, field, flat.required.includes(name));
      bodyFields = new Set(Object.keys(flat.fields));
    } else {
      take(BODY_ARGUMENT, schema, operation.requestBody?.required === true);
      bodyFields = "whole";
    }
  }
  const known = new Set(Object.keys(properties));
  const template = `${entry.api === "control" ? "/api" : "/w/{projectId}/api"}${path}`;
  const templatePattern = pathPattern(template);
  const inputSchema = {
    type: "object" as const,
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
  };
  return {
    inputSchema,
    request(args, orgSlug) {
      const faults: ArgumentFault[] = [];
      for (const name of Object.keys(args)) {
        if (!known.has(name)) faults.push({ path: name, message: `is not an argument of ${entry.name}` });
      }
      const values: Record<string, string> = { slug: orgSlug };
      for (const name of pathNames) {
        const value = args[name];
        if (value === undefined || value === null || value === "") faults.push({ path: name, message: "is required" });
        else if (typeof value !== "string" && typeof value !== "number")
          faults.push({ path: name, message: "must be a string" });
        else if (!PATH_SEGMENT.test(String(value))) faults.push({ path: name, message: PATH_SEGMENT_RULE });
        else values[name] = String(value);
      }
      const query = new URLSearchParams();
      for (const name of queryNames) {
        const value = args[name];
        if (value === undefined || value === null) continue;
        for (const item of Array.isArray(value) ? value : [value]) {
          if (typeof item === "object" && item !== null)
            faults.push({ path: name, message: "must be a string, number or boolean" });
          else query.append(name, String(item));
        }
      }
      if (faults.length > 0) return faults;
      const resolved = template.replace(/\{(\w+)\}/g, (_, name: string) => values[name] ?? "");
      // Each argument was checked above; this holds the whole path, the org's slug included, to the
      // tool's route. Failing it is a bug here, not the caller's fault: the SDK answers an internal error.
      if (!templatePattern.test(resolved))
        throw new Error(`MCP tool ${entry.name}: ${resolved} is no path of ${template}`);
      const search = query.size > 0 ? `?${query}` : "";
      let body: unknown;
      if (bodyFields === "whole") body = args[BODY_ARGUMENT] ?? {};
      else if (bodyFields) body = Object.fromEntries(Object.entries(args).filter(([name]) => bodyFields.has(name)));
      return { method, path: `${resolved}${search}`, ...(bodyFields ? { body } : {}) };
    },
  };
}

/** A path template (`/api/org/{slug}/…`) as a pattern in which each `{name}` is exactly one SEGMENT. */
function pathPattern(template: string): RegExp {
  const literals = template.split(/\{\w+\}/).map((literal) => literal.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${literals.join(SEGMENT)}$`);
}

function describe(description: string | undefined): JsonSchema {
  return description ? { description } : {};
}

/**
 * An object schema's fields and which are required, when fields are all it takes (no free-form
 * keys, no alternatives); an `allOf` of such objects (a zod `.extend`ed schema) is their union.
 */
function flatFields(schema: JsonSchema): { fields: Record<string, JsonSchema>; required: string[] } | null {
  if (Array.isArray(schema.allOf) && Object.keys(schema).every((key) => key === "allOf" || key === "description")) {
    const parts = (schema.allOf as JsonSchema[]).map(flatFields);
    if (parts.some((part) => part === null)) return null;
    return {
      fields: Object.assign({}, ...parts.map((part) => part?.fields)),
      required: parts.flatMap((part) => part?.required ?? []),
    };
  }
  if (schema.type !== "object" || typeof schema.properties !== "object" || schema.properties === null) return null;
  const extra = schema.additionalProperties;
  if (extra !== undefined && extra !== false) return null;
  if ("anyOf" in schema || "oneOf" in schema || "propertyNames" in schema) return null;
  return { fields: schema.properties as Record<string, JsonSchema>, required: (schema.required ?? []) as string[] };
}

/** `schema` with every `$ref` to the document's components replaced by what it names (MCP clients resolve none). */
function inline(document: OpenApiDocument, schema: unknown, depth = 0): JsonSchema {
  if (depth > 32) throw new Error("MCP tools: a schema nests too deep (a recursive $ref?)");
  if (Array.isArray(schema)) return schema.map((item) => inline(document, item, depth + 1)) as unknown as JsonSchema;
  if (typeof schema !== "object" || schema === null) return schema as JsonSchema;
  const ref = (schema as { $ref?: unknown }).$ref;
  if (typeof ref === "string") {
    const name = /^#\/components\/schemas\/(.+)$/.exec(ref)?.[1];
    const target = name === undefined ? undefined : document.components?.schemas?.[name];
    if (!target) throw new Error(`MCP tools: unresolvable $ref ${ref}`);
    const { $ref: _, ...rest } = schema as JsonSchema;
    return { ...inline(document, target, depth + 1), ...inline(document, rest, depth + 1) };
  }
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, inline(document, value, depth + 1)]));
}
