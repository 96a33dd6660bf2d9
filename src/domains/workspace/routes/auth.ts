import { createRoute, z } from "@hono/zod-openapi";
import { anyone, createRouter, jsonBody, jsonContent } from "../../../http/router.ts";
import { SignedIn, SignInInput, SignUpInput } from "../schemas.ts";
import { signInUser, signOutUser, signUpUser } from "../users.ts";
import { errors, tags, usersOnly, type WorkspaceEnv, workspaceOf } from "./security.ts";

const signUp = createRoute({
  method: "post",
  path: "/auth/sign-up",
  tags,
  summary: "Create a workspace user; emits auth:signed_up",
  security: anyone,
  request: { body: jsonBody(SignUpInput) },
  responses: { 201: jsonContent(SignedIn, "The user and a token"), ...errors },
});

const signIn = createRoute({
  method: "post",
  path: "/auth/sign-in",
  tags,
  summary: "Sign a workspace user in; emits auth:signed_in",
  security: anyone,
  request: { body: jsonBody(SignInInput) },
  responses: { 200: jsonContent(SignedIn, "The user and a token"), ...errors },
});

const signOut = createRoute({
  method: "post",
  path: "/auth/sign-out",
  tags,
  summary: "End the calling user's session; emits auth:signed_out",
  security: usersOnly,
  responses: { 200: jsonContent(z.object({ ok: z.boolean() }), "Signed out"), ...errors },
});

/** Workspace users signing up, in and out. */
export function authRoutes() {
  return createRouter<WorkspaceEnv>()
    .openapi(signUp, async (c) => c.json(await signUpUser({ ctx: workspaceOf(c), input: c.req.valid("json") }), 201))
    .openapi(signIn, async (c) => {
      const ctx = workspaceOf(c);
      const input = c.req.valid("json");
      const signedIn = await ctx.runtime.signInFailures.attempt(c, ctx.project.id, input.email, () =>
        signInUser({ ctx, input }),
      );
      return c.json(signedIn, 200);
    })
    .openapi(signOut, async (c) => {
      await signOutUser({ ctx: workspaceOf(c) });
      return c.json({ ok: true }, 200);
    });
}
