import { z } from "@hono/zod-openapi";

export const DomainInput = z
  .object({
    hostname: z.string().min(3).max(253).openapi({
      description: "A DNS name of two or more labels, ASCII (punycode for IDNs)",
      example: "app.example.com",
    }),
  })
  .openapi("DomainInput");

export const DomainSchema = z
  .object({
    id: z.string().openapi({ example: "dom_01jx0000000000000000000000" }),
    projectId: z.string(),
    hostname: z.string(),
    status: z.enum(["pending", "active", "failed"]),
    verification: z
      .object({ type: z.literal("TXT"), name: z.string(), value: z.string() })
      .openapi({ description: "The DNS TXT record that proves the domain is yours" }),
    target: z
      .object({ type: z.literal("CNAME"), value: z.string() })
      .openapi({ description: "Where the domain should point (PUBLIC_URL's host)" }),
    lastCheckedAt: z.string().nullable(),
    verifiedAt: z.string().nullable(),
    error: z.string().nullable().openapi({ description: "What the last look-up found, while not verified" }),
    createdAt: z.string(),
  })
  .openapi("Domain");

export const DomainResponse = z.object({ domain: DomainSchema }).openapi("DomainResponse");
export const DomainList = z.object({ domains: z.array(DomainSchema) }).openapi("DomainList");

export const DomainParams = z.object({
  slug: z.string().openapi({ param: { name: "slug", in: "path" } }),
  projectSlug: z.string().openapi({ param: { name: "projectSlug", in: "path" } }),
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "dom_01jx0000000000000000000000" }),
});

export const DomainCheckQuery = z.object({
  domain: z
    .string()
    .max(253)
    .openapi({ description: "The host a TLS certificate is asked for", example: "app.example.com" }),
});
