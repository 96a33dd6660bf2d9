import { createRoute } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { requireAccount } from "../../http/principal.ts";
import {
  authedErrors,
  createRouter,
  jsonBody,
  jsonContent,
  OkSchema,
  sessionOnly,
  sessionOrKey,
} from "../../http/router.ts";
import { callerCtx, orgCtx, requires } from "../../http/service-context.ts";
import { SlugParams } from "../orgs/schemas.ts";
import {
  AcceptInvitationInput,
  AcceptInvitationResponse,
  InviteInput,
  InviteResponse,
  MemberParams,
  MemberRoleInput,
  MembersResponse,
} from "./schemas.ts";
import {
  acceptInvitation,
  changeMemberRole,
  inviteMember,
  listMembers,
  removeMember,
  resendInvitation,
} from "./service.ts";

const tags = ["Members"];

const listMembersRoute = createRoute({
  method: "get",
  path: "/org/{slug}/members",
  tags,
  summary: "List members and pending invitations",
  security: sessionOrKey,
  request: { params: SlugParams },
  responses: { 200: jsonContent(MembersResponse, "Members and pending invitations"), ...authedErrors },
});

const changeRoleRoute = createRoute({
  method: "patch",
  path: "/org/{slug}/members/{id}",
  tags,
  summary: "Change a member's role (admin; owner to grant or remove owner)",
  security: sessionOrKey,
  request: { params: MemberParams, body: jsonBody(MemberRoleInput) },
  responses: { 200: jsonContent(OkSchema, "Role changed"), ...authedErrors },
});

const removeMemberRoute = createRoute({
  method: "delete",
  path: "/org/{slug}/members/{id}",
  tags,
  summary: "Remove a member, leave the org, or revoke a pending invitation",
  security: sessionOrKey,
  request: { params: MemberParams },
  responses: { 204: { description: "Removed" }, ...authedErrors },
});

const resendRoute = createRoute({
  method: "post",
  path: "/org/{slug}/members/{id}/resend",
  tags,
  summary: "Resend a pending invitation with a new token",
  security: sessionOrKey,
  request: { params: MemberParams },
  responses: { 200: jsonContent(OkSchema, "Sent"), ...authedErrors },
});

const inviteRoute = createRoute({
  method: "post",
  path: "/org/{slug}/invitations",
  tags,
  summary: "Invite someone by e-mail (admin); the accept link is sent by e-mail",
  security: sessionOrKey,
  request: { params: SlugParams, body: jsonBody(InviteInput) },
  responses: { 201: jsonContent(InviteResponse, "The invitation"), ...authedErrors },
});

const acceptRoute = createRoute({
  method: "post",
  path: "/invitations/accept",
  tags,
  summary: "Accept an invitation as the signed-in account it was sent to",
  security: sessionOnly,
  request: { body: jsonBody(AcceptInvitationInput) },
  responses: { 200: jsonContent(AcceptInvitationResponse, "Joined"), ...authedErrors },
});

export function memberRoutes(deps: Deps) {
  return createRouter()
    .openapi(listMembersRoute, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await listMembers({ ctx }), 200);
    })
    .openapi({ ...changeRoleRoute, middleware: requires(deps, "members:manage") }, async (c) => {
      const { slug, id } = c.req.valid("param");
      const ctx = await orgCtx(c, deps, slug);
      await changeMemberRole({ ctx, id, role: c.req.valid("json").role });
      return c.json({ ok: true }, 200);
    })
    .openapi(removeMemberRoute, async (c) => {
      const { slug, id } = c.req.valid("param");
      await removeMember({ ctx: await orgCtx(c, deps, slug), id });
      return c.body(null, 204);
    })
    .openapi({ ...resendRoute, middleware: requires(deps, "members:manage") }, async (c) => {
      const { slug, id } = c.req.valid("param");
      await resendInvitation({ ctx: await orgCtx(c, deps, slug), id });
      return c.json({ ok: true }, 200);
    })
    .openapi({ ...inviteRoute, middleware: requires(deps, "members:manage") }, async (c) => {
      const ctx = await orgCtx(c, deps, c.req.valid("param").slug);
      return c.json(await inviteMember({ ctx, input: c.req.valid("json") }), 201);
    })
    .openapi(acceptRoute, async (c) => {
      const account = requireAccount(c);
      const result = await acceptInvitation({ ctx: callerCtx(c, deps), account, token: c.req.valid("json").token });
      return c.json(result, 200);
    });
}
