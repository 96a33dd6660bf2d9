import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { UnauthorizedError } from "../errors.ts";
import type { AppEnv } from "../http/context.ts";
import { requirePrincipal } from "../http/principal.ts";
import { anyone, createRouter, errorResponses, hasJsonBody, jsonContent } from "../http/router.ts";
import { answerMcp, type RunRestRequest } from "./server.ts";
import type { McpTool, RestRequest } from "./tools.ts";

const tags = ["MCP"];
/** What the SDK's transport answers a body that is no JSON (read here: the API's body limit has read it already). */
const PARSE_ERROR = { jsonrpc: "2.0", error: { code: -32700, message: "Parse error: Invalid JSON" }, id: null };
/**
 * MCP 2025-06-18 removed JSON-RPC batches; the SDK's transport would still run one, each of up to
 * 100 tool calls for the single rate-limit hit of its request.
 */
const BATCH_REFUSED = {
  jsonrpc: "2.0",
  error: { code: -32600, message: "Invalid Request: JSON-RPC batches are not supported; send one message per request" },
  id: null,
};

const ToolSummary = z
  .object({
    name: z.string(),
    description: z.string(),
    readOnlyHint: z.boolean(),
    destructiveHint: z.boolean(),
  })
  .openapi("McpTool");

const toolsRoute = createRoute({
  method: "get",
  path: "/mcp/tools",
  tags,
  summary: "Every MCP tool: the names an API key's `mcpTools` may list",
  security: anyone,
  responses: {
    200: jsonContent(z.object({ tools: z.array(ToolSummary) }), "The tools"),
    ...errorResponses(429),
  },
});

const mcpRoute = createRoute({
  method: "post",
  path: "/mcp",
  tags,
  summary: "The MCP server (Streamable HTTP, stateless): JSON-RPC in, JSON-RPC out",
  description:
    "Model Context Protocol over Streamable HTTP, without sessions: every POST carries one JSON-RPC " +
    "message and is answered with JSON; a batch is refused (400, JSON-RPC error -32600), as MCP " +
    "2025-06-18 has none. `Authorization: Bearer pak_…` only: the key's " +
    "scope and `mcpTools` decide which tools `tools/list` shows and `tools/call` runs. Each tool is " +
    "one operation of this API (see `GET /mcp/tools`), run with the key's rights and audited as it. " +
    "Requests must `Accept` both `application/json` and `text/event-stream`.",
  security: [{ apiKey: [] }],
  responses: {
    200: jsonContent(z.record(z.string(), z.unknown()), "The JSON-RPC response"),
    202: { description: "Notifications and responses only: accepted" },
    ...errorResponses(400, 401, 403, 413, 429),
    406: { description: "The request does not accept application/json and text/event-stream" },
    415: { description: "The body is not application/json" },
  },
});

/**
 * `tools` gives the resolved tools (resolved on first use, once every route is registered);
 * `run` makes a tool's REST request in this process as the calling key.
 */
export function mcpRoutes(
  tools: () => readonly McpTool[],
  run: (c: Context<AppEnv>, request: RestRequest) => Promise<Response>,
) {
  let summaries: z.infer<typeof ToolSummary>[] | undefined;
  return createRouter()
    .openapi(toolsRoute, (c) => {
      summaries ??= tools().map((tool) => ({
        name: tool.name,
        description: tool.description,
        readOnlyHint: tool.readOnly,
        destructiveHint: tool.destructive,
      }));
      return c.json({ tools: summaries }, 200);
    })
    .openapi(mcpRoute, async (c) => {
      const principal = requirePrincipal(c);
      if (principal.type !== "api_key") {
        throw new UnauthorizedError("the MCP server takes API keys only: Authorization: Bearer pak_…");
      }
      let body: unknown;
      if (hasJsonBody(c)) {
        try {
          body = await c.req.json();
        } catch {
          return Response.json(PARSE_ERROR, { status: 400 });
        }
      }
      if (Array.isArray(body)) return Response.json(BATCH_REFUSED, { status: 400 });
      const runAsKey: RunRestRequest = (request) => run(c, request);
      return answerMcp(c.req.raw, body, principal, tools(), runAsKey);
    });
}
