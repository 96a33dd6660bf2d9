import { z } from "@hono/zod-openapi";
import { MCP_TOOL_NAMES } from "../../mcp/catalog.ts";
import { nameText } from "../fields.ts";

const KEY_SCOPES = ["full", "deploy", "read-only"] as const;

/** Keeps `expiresAt` representable; ten years is the longest lifetime a key may be given. */
const MAX_KEY_LIFETIME_DAYS = 3650;

export const ApiKeyInput = z
  .object({
    name: nameText(1, 60),
    scope: z.enum(KEY_SCOPES),
    expiresInDays: z.number().int().positive().max(MAX_KEY_LIFETIME_DAYS).optional(),
    // SPEC: "array of string (each max 80), max 64 items", each the name of a tool (DESIGN §13).
    mcpTools: z
      .array(
        z
          .string()
          .max(80)
          .refine((name) => MCP_TOOL_NAMES.has(name), "is not an MCP tool; GET /api/mcp/tools lists them"),
      )
      .max(64)
      .optional()
      .openapi({
        description:
          "Pins the key to these MCP tools (empty or absent: every tool its scope allows). One of: " +
          [...MCP_TOOL_NAMES].map((name) => `\`${name}\``).join(", "),
      }),
  })
  .openapi("ApiKeyInput");

export const ApiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    scope: z.enum(KEY_SCOPES),
    prefix: z.string().openapi({ description: "The first characters of the token, to recognise it" }),
    mcpTools: z.array(z.string()).nullable(),
    expiresAt: z.string().nullable(),
    lastUsedAt: z.string().nullable(),
    createdAt: z.string(),
    createdBy: z.string(),
  })
  .openapi("ApiKey");

export const CreatedApiKeyResponse = z.object({
  apiKey: ApiKeySchema,
  token: z.string().openapi({ description: "The `pak_` token. Shown once; only its SHA-256 is stored." }),
});

export const ApiKeysResponse = z.object({ apiKeys: z.array(ApiKeySchema) });

export const ApiKeyParams = z.object({
  slug: z.string().openapi({ param: { name: "slug", in: "path" } }),
  id: z.string().openapi({ param: { name: "id", in: "path" } }),
});
