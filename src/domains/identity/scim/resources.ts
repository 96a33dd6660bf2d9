/** SCIM 2.0 wire shapes (RFC 7643/7644): schema URNs, errors, list responses and the discovery documents. */

export const USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User";
export const GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group";
export const LIST_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
export const ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error";
export const PATCH_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
export const SCIM_CONTENT_TYPE = "application/scim+json";

export type ScimType =
  | "invalidFilter"
  | "tooMany"
  | "uniqueness"
  | "mutability"
  | "invalidSyntax"
  | "invalidPath"
  | "noTarget"
  | "invalidValue";

/** An error a SCIM client is answered with, in SCIM's own body (RFC 7644 §3.12). */
export class ScimError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly scimType?: ScimType,
  ) {
    super(message);
  }

  body() {
    return {
      schemas: [ERROR_SCHEMA],
      status: String(this.status),
      ...(this.scimType ? { scimType: this.scimType } : {}),
      detail: this.message,
    };
  }
}

export function listResponse<T>(resources: T[], total: number, startIndex: number) {
  return {
    schemas: [LIST_SCHEMA],
    totalResults: total,
    startIndex,
    itemsPerPage: resources.length,
    Resources: resources,
  };
}

export function serviceProviderConfig(baseUrl: string) {
  return {
    schemas: ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
    documentationUri: "https://github.com/plinth/plinth#scim",
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: 200 },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: false },
    authenticationSchemes: [
      {
        type: "oauthbearertoken",
        name: "Bearer token",
        description: "The org's SCIM token (`scim_…`), minted by an admin: POST /api/org/{slug}/scim/token",
        primary: true,
      },
    ],
    meta: { resourceType: "ServiceProviderConfig", location: `${baseUrl}/ServiceProviderConfig` },
  };
}

export function resourceTypes(baseUrl: string) {
  return [
    {
      schemas: ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"],
      id: "User",
      name: "User",
      endpoint: "/Users",
      description: "An org member",
      schema: USER_SCHEMA,
      meta: { resourceType: "ResourceType", location: `${baseUrl}/ResourceTypes/User` },
    },
    {
      schemas: ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"],
      id: "Group",
      name: "Group",
      endpoint: "/Groups",
      description: "A role (admin, developer or viewer) and the members who hold it",
      schema: GROUP_SCHEMA,
      meta: { resourceType: "ResourceType", location: `${baseUrl}/ResourceTypes/Group` },
    },
  ];
}

const attribute = (name: string, type: string, extra: Record<string, unknown> = {}) => ({
  name,
  type,
  multiValued: false,
  required: false,
  caseExact: false,
  mutability: "readWrite",
  returned: "default",
  uniqueness: "none",
  ...extra,
});

export function schemas(baseUrl: string) {
  return [
    {
      id: USER_SCHEMA,
      name: "User",
      description: "An org member",
      attributes: [
        attribute("userName", "string", { required: true, uniqueness: "server" }),
        attribute("name", "complex", {
          subAttributes: [
            attribute("formatted", "string"),
            attribute("givenName", "string"),
            attribute("familyName", "string"),
          ],
        }),
        attribute("displayName", "string"),
        attribute("emails", "complex", {
          multiValued: true,
          subAttributes: [attribute("value", "string"), attribute("type", "string"), attribute("primary", "boolean")],
        }),
        attribute("active", "boolean"),
        attribute("externalId", "string", { caseExact: true }),
        attribute("groups", "complex", { multiValued: true, mutability: "readOnly" }),
      ],
      meta: { resourceType: "Schema", location: `${baseUrl}/Schemas/${USER_SCHEMA}` },
    },
    {
      id: GROUP_SCHEMA,
      name: "Group",
      description: "A role: its displayName is admin, developer or viewer",
      attributes: [
        attribute("displayName", "string", { required: true, uniqueness: "server" }),
        attribute("members", "complex", {
          multiValued: true,
          subAttributes: [attribute("value", "string", { mutability: "immutable" }), attribute("display", "string")],
        }),
        attribute("externalId", "string", { caseExact: true }),
      ],
      meta: { resourceType: "Schema", location: `${baseUrl}/Schemas/${GROUP_SCHEMA}` },
    },
  ];
}
