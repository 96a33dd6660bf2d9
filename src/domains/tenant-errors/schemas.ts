import { z } from "@hono/zod-openapi";
import { pageQuery } from "../fields.ts";

export const TENANT_ERRORS_LIMIT = 50;
export const TENANT_ERRORS_MAX_LIMIT = 500;

export const TenantErrorQuery = z.object({
  ...pageQuery(TENANT_ERRORS_LIMIT, TENANT_ERRORS_MAX_LIMIT),
  status: z.string().optional().openapi({ description: "`4xx`, `5xx`, or one status code (`404`)", example: "4xx" }),
  since: z
    .string()
    .optional()
    .openapi({ description: "Only errors at or after this instant: ISO-8601 or Unix milliseconds" }),
  authenticated: z
    .enum(["true", "false"])
    .optional()
    .openapi({ description: "Only errors of requests with (`true`) or without (`false`) valid workspace credentials" }),
});

export const TenantErrorSchema = z
  .object({
    id: z.string().openapi({ example: "ter_01jx0000000000000000000000" }),
    at: z.string().openapi({ description: "ISO-8601" }),
    method: z.string(),
    path: z.string().openapi({ description: "The request's path, without its query" }),
    status: z.number().int(),
    code: z.string().openapi({ description: "The error envelope's code (`NOT_FOUND`, `VALIDATION`, …)" }),
    message: z.string(),
    requestId: z.string().nullable().openapi({ description: "The request's `X-Request-Id`" }),
    authenticated: z.boolean().openapi({
      description:
        "Whether the request carried valid workspace credentials; the newest 20 errors without them are kept per project, apart from the others",
    }),
  })
  .openapi("TenantError");

export const TenantErrorList = z.object({ errors: z.array(TenantErrorSchema) }).openapi("TenantErrorList");
