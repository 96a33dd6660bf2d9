import { z } from "@hono/zod-openapi";
import { httpUrl, jsonObject, oneLine, pageQuery } from "../fields.ts";
import { breakerState, DeliverySchema } from "../webhooks/schemas.ts";
import { MAX_CUSTOM_HEADER_BYTES } from "./hooks.ts";

/** Request and response schemas of the workspace API (routes.ts). */

// `projectId` is part of the server URL (`/w/{projectId}/api`), not of these paths.
export const CollectionP = z.object({ collection: z.string().openapi({ param: { name: "collection", in: "path" } }) });
export const ItemP = CollectionP.extend({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });
export const IdP = z.object({ id: z.string().openapi({ param: { name: "id", in: "path" } }) });

export const CollectionSchema = z
  .object({ slug: z.string(), name: z.string(), createdAt: z.string() })
  .openapi("WorkspaceCollection");
export const CollectionInput = z
  .object({
    slug: z
      .string()
      .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, "1–63 of a-z, 0-9, '-' or '_', starting with a letter or digit"),
    name: z.string().min(1).max(120).optional(),
  })
  .openapi("WorkspaceCollectionInput");
export const ItemSchema = z
  .object({ id: z.string(), createdAt: z.string(), updatedAt: z.string() })
  .catchall(z.unknown())
  .openapi("WorkspaceItem", { description: "The item's data plus id, createdAt and updatedAt" });
export const ItemInput = jsonObject().openapi("WorkspaceItemInput");
export const Page = z.object(pageQuery(50, 500));

/**
 * Header names up to 100 characters. Names and values share MAX_CUSTOM_HEADER_BYTES, which hooks.ts
 * checks; one value may take nearly all of it (a long bearer token).
 */
const headerMap = z.record(z.string().min(1).max(100), z.string().max(MAX_CUSTOM_HEADER_BYTES));
export const HookSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    url: z.string(),
    events: z.array(z.string()),
    headers: z.record(z.string(), z.string()).openapi({
      description:
        "Custom headers, each value masked: `••••` and its last four characters (of four or fewer, `••••` alone)",
    }),
    payloadFields: z.array(z.string()).nullable(),
    hasSecret: z.boolean(),
    ...breakerState,
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("WorkspaceWebhook");
const hookFields = {
  name: z.string().min(1).max(100),
  url: httpUrl,
  events: z.array(z.string().min(1).max(200)).min(1).max(50),
  secret: z.string().min(1).max(200).nullable().optional(),
  headers: headerMap.nullable().optional(),
  payloadFields: z.array(z.string().min(1).max(200)).max(100).nullable().optional(),
};
export const HookInput = z.object(hookFields).openapi("WorkspaceWebhookInput");
export const HookUpdate = z
  .object({
    name: hookFields.name.optional(),
    url: hookFields.url.optional().openapi({
      description: "A new url needs `headers` again, in full (or null), when the webhook has any (422)",
    }),
    events: hookFields.events.optional(),
    secret: hookFields.secret,
    headers: hookFields.headers.openapi({
      description:
        "Replaces the custom headers. A value sent back masked, as read, keeps the one stored under that " +
        "name; not when `url` changes, which needs every value again (422 naming `headers.<name>`)",
    }),
    payloadFields: hookFields.payloadFields,
    active: z.boolean().optional(),
  })
  .openapi("WorkspaceWebhookUpdate");
export const oneHook = z.object({ webhook: HookSchema });
export const oneDelivery = z.object({ delivery: DeliverySchema });

export const SignUpInput = z
  .object({ email: z.email().max(254), password: z.string().min(8).max(128) })
  .openapi("WorkspaceCredentials");
/**
 * Sign-in holds no password policy: a wrong password is 401 whatever its length, so that only
 * the answer to a right one differs (the policy is sign-up's).
 */
export const SignInInput = SignUpInput.extend({ password: z.string().min(1).max(128) }).openapi("WorkspaceSignIn");
export const UserSchema = z
  .object({ id: z.string(), email: z.string(), createdAt: z.string(), updatedAt: z.string() })
  .openapi("WorkspaceUser");
export const SignedIn = z.object({
  user: UserSchema,
  token: z.string().openapi({ description: "`wsu_…` bearer token" }),
});
export const FileSchema = z
  .object({ id: z.string(), name: z.string(), contentType: z.string(), size: z.number().int(), createdAt: z.string() })
  .openapi("WorkspaceFile");
// Declared with plain JSON schemas, not zod: the body is streamed to disk, never parsed in memory.
export const uploadBody = {
  required: true,
  content: {
    "multipart/form-data": {
      schema: { type: "object" as const, properties: { file: { type: "string" as const, format: "binary" } } },
    },
    // A raw body of any type (named by ?name=); the type is kept and served back.
    "*/*": { schema: { type: "string" as const, format: "binary" } },
  },
};
export const FileQuery = z.object({
  name: oneLine(z.string().min(1).max(255)).optional().openapi({ description: "Name of a raw upload" }),
});
