import { z } from "@hono/zod-openapi";
import { ROLES } from "../orgs/access.ts";

const INVITABLE_ROLES = ["admin", "developer", "viewer"] as const;

export const MemberParams = z.object({
  slug: z.string().openapi({ param: { name: "slug", in: "path" } }),
  id: z
    .string()
    .openapi({ param: { name: "id", in: "path" }, description: "A member id (`mem_…`) or invitation id (`inv_…`)" }),
});

export const MemberSchema = z
  .object({
    id: z.string(),
    accountId: z.string().nullable(),
    email: z.string(),
    name: z.string().nullable(),
    role: z.enum(ROLES),
    status: z.enum(["active", "suspended", "invited", "expired"]),
    joinedAt: z.string().nullable(),
    invitedAt: z.string().nullable(),
    expiresAt: z.string().nullable(),
  })
  .openapi("Member");

export const MembersResponse = z.object({ members: z.array(MemberSchema) });

export const MemberRoleInput = z.object({ role: z.enum(ROLES) }).openapi("MemberRoleInput");

export const InviteInput = z
  .object({
    email: z.email().max(254),
    role: z.enum(INVITABLE_ROLES),
  })
  .openapi("InviteInput");

export const InviteResponse = z.object({
  invite: z.object({
    id: z.string(),
    email: z.string(),
    role: z.enum(INVITABLE_ROLES),
    status: z.string(),
    expiresAt: z.string(),
  }),
});

export const AcceptInvitationInput = z.object({ token: z.string().min(1) }).openapi("AcceptInvitationInput");

export const AcceptInvitationResponse = z.object({ orgSlug: z.string() });
