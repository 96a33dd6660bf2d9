import { z } from "@hono/zod-openapi";

/** SPEC's SsoInput, with the role SSO-made members get. */
export const SsoInput = z
  .object({
    type: z.enum(["oidc", "saml"]),
    enabled: z.boolean().optional(),
    emailDomain: z
      .string()
      .trim()
      .toLowerCase()
      .regex(
        /^(?=.{3,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/,
        "must be a domain name (example.com)",
      )
      .nullable()
      .optional(),
    config: z
      .record(z.string(), z.unknown())
      .optional()
      .openapi({
        description:
          "OIDC: `{issuer, clientId, clientSecret, scopes?}` (discovery from the issuer). SAML: `{entryPoint, idpCert, idpIssuer?}` " +
          "or `{metadataXml}`. A secret sent back masked, as read, keeps the stored one.",
      }),
    defaultRole: z
      .enum(["admin", "developer", "viewer"])
      .optional()
      .openapi({ description: "Role of members SSO adds; default viewer" }),
  })
  .openapi("SsoInput");

export const SsoConfigSchema = z
  .object({
    type: z.enum(["oidc", "saml"]),
    enabled: z.boolean(),
    emailDomain: z.string().nullable(),
    defaultRole: z.enum(["admin", "developer", "viewer"]),
    config: z.record(z.string(), z.unknown()).openapi({ description: "As set, secrets masked" }),
    loginUrl: z
      .string()
      .openapi({ description: "Where a member starts signing in: redirects to the identity provider" }),
    redirectUri: z.string().openapi({ description: "OIDC: the redirect URI to register with the identity provider" }),
    acsUrl: z.string().openapi({ description: "SAML: the Assertion Consumer Service URL" }),
    entityId: z.string().openapi({ description: "SAML: this service provider's entity id" }),
    metadataUrl: z.string().openapi({ description: "SAML: this service provider's metadata XML" }),
    domainVerification: z
      .object({ name: z.string(), value: z.string(), verifiedAt: z.string().nullable() })
      .nullable()
      .openapi({ description: "The TXT record that proves emailDomain; enforced once verified" }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("SsoConfig");

export const SsoResponse = z.object({ sso: SsoConfigSchema.nullable() });

export const SsoLookupInput = z
  .object({ email: z.string().trim().toLowerCase().email().max(254) })
  .openapi("SsoLookupInput");
