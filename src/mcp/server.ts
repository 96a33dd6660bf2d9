import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import type { ApiKeyPrincipal } from "../http/principal.ts";
import type { McpTool, RestRequest } from "./tools.ts";

/** Makes a tool's REST request as the key, in this process, and returns the route's answer. */
export type RunRestRequest = (request: RestRequest) => Promise<Response>;

const SERVER_INFO = { name: "plinth", title: "Plinth", version: "0.0.1" };
// Built once: the SDK would build an Ajv instance per server, and there is a server per request.
const validator = new AjvJsonSchemaValidator();

/**
 * Answers one MCP HTTP request (stateless Streamable HTTP: a server and a transport of its own,
 * answered as JSON) for an API key, which sees and calls only the tools its scope and `mcpTools`
 * allow. `body` is the parsed JSON-RPC message (never a batch: the route refuses those), or
 * undefined for the transport to refuse.
 *
 * The SDK's low-level `Server` rather than `McpServer`: the tools' JSON Schemas are computed once
 * from the OpenAPI document and each key sees its own subset, where `McpServer` would register
 * and convert every tool's zod schema again on every request.
 */
export async function answerMcp(
  request: Request,
  body: unknown,
  key: ApiKeyPrincipal,
  tools: readonly McpTool[],
  run: RunRestRequest,
): Promise<Response> {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: { listChanged: false } },
    instructions:
      `Plinth's control plane, acting as an API key of the organization '${key.org.slug}' (scope '${key.scope}'). ` +
      "Each tool is one REST operation of the Plinth API with that key's rights; get_org_overview is a good start.",
    jsonSchemaValidator: validator,
  });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: tools.filter((tool) => refusal(tool, key) === null).map(listing),
  }));
  server.setRequestHandler(CallToolRequestSchema, async ({ params }) => {
    const tool = tools.find((candidate) => candidate.name === params.name);
    if (!tool)
      return toolError(`there is no tool named '${params.name}'; tools/list names the tools this key may call`);
    const refused = refusal(tool, key);
    if (refused) return toolError(refused);
    const made = tool.request(params.arguments ?? {}, key.org.slug);
    if (Array.isArray(made)) {
      return toolError(`invalid arguments: ${made.map((fault) => `${fault.path} ${fault.message}`).join("; ")}`, {
        error: { code: "VALIDATION", message: "invalid arguments", details: made },
      });
    }
    return toolResult(await run(made));
  });
  const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true });
  await server.connect(transport);
  // Not closed afterwards: once the answer is out, the server and transport hold no timer or
  // pending request, and are collected. Closing them aborts the handler's signal and builds a
  // "connection closed" error per request.
  return transport.handleRequest(request, body === undefined ? {} : { parsedBody: body });
}

/** Why `key` may not call `tool`, or null when it may. */
function refusal(tool: McpTool, key: ApiKeyPrincipal): string | null {
  if (!tool.allows(key.scope)) {
    return `API key scope '${key.scope}' does not allow ${tool.name}${tool.readOnly ? "" : ": it changes data"}`;
  }
  const allowList = key.mcpTools;
  if (allowList && allowList.length > 0 && !allowList.includes(tool.name)) {
    return `${tool.name} is not in this API key's mcpTools allow-list`;
  }
  return null;
}

function listing(tool: McpTool): Tool {
  return {
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema,
    annotations: {
      readOnlyHint: tool.readOnly,
      destructiveHint: tool.destructive,
      idempotentHint: tool.idempotent,
      openWorldHint: false,
    },
  };
}

/** The route's answer as a tool result: its JSON as text and as structured content; an error envelope as a tool error. */
async function toolResult(response: Response): Promise<CallToolResult> {
  const text = await response.text();
  // Every answer of the API is a JSON object, or empty (204).
  const structured = (text ? JSON.parse(text) : { ok: true }) as Record<string, unknown>;
  if (response.ok) return { content: [{ type: "text", text: text || '{"ok":true}' }], structuredContent: structured };
  const error = (structured as { error?: { code?: string; message?: string; details?: unknown } }).error;
  return toolError(describeError(response.status, error), structured);
}

function describeError(
  status: number,
  error: { code?: string; message?: string; details?: unknown } | undefined,
): string {
  const message = error?.message ?? "the request failed";
  // Every field at fault; the message names the first already.
  const fields = Array.isArray(error?.details)
    ? (error.details as { path?: string; message?: string }[])
        .filter((issue) => issue.path !== undefined)
        .map((issue) => `${issue.path}: ${issue.message}`)
        .filter((issue) => !message.includes(issue))
    : [];
  const head = `${error?.code ?? "ERROR"} (HTTP ${status}): ${message}`;
  return fields.length > 0 ? `${head} (${fields.join("; ")})` : head;
}

function toolError(message: string, structured?: Record<string, unknown>): CallToolResult {
  return {
    isError: true,
    content: [{ type: "text", text: message }],
    ...(structured ? { structuredContent: structured } : {}),
  };
}
