import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Deps } from "../deps.ts";
import { passwordSignInRefused } from "../domains/identity/sso/service.ts";
import { ForbiddenError } from "../errors.ts";
import type { AppEnv } from "../http/context.ts";
import { codeOf, errorBody, statusOf } from "../http/envelope.ts";
import { anyone, createRouter, errorResponses, jsonBody, jsonContent, sessionOnly } from "../http/router.ts";
import type { SignInFailures } from "../http/sign-in-failures.ts";
import { type Auth, CLIENT_IP_HEADER } from "./better-auth.ts";
import type { ConsoleSessions } from "./console-sessions.ts";

const tags = ["Authentication"];

const AuthUserSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string(),
    emailVerified: z.boolean(),
    image: z.string().nullable().optional(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("AuthUser");

// Sign-up and sign-in are better-auth's, whose clients send more (`callbackURL`, or sign-up's
// fields again to sign in): unlike the rest of the API, other fields are taken and ignored.
const SignUpInput = z
  .looseObject({
    email: z.email().max(254),
    password: z.string().min(8).max(128),
    name: z.string().max(120).default(""),
  })
  .openapi("SignUpInput", { description: "Other fields are ignored" });

const SignInInput = z
  .looseObject({
    email: z.email().max(254),
    password: z.string().min(1).max(128),
    rememberMe: z.boolean().optional(),
  })
  .openapi("SignInInput", { description: "Other fields are ignored" });

const SignedInResponse = z.object({
  token: z.string().nullable(),
  user: AuthUserSchema,
  redirect: z.boolean().optional(),
});

const sessionCookieHeader = {
  "Set-Cookie": {
    description: "`<prefix>.session_token`, the session cookie",
    schema: { type: "string" as const },
  },
};

const signUpRoute = createRoute({
  method: "post",
  path: "/auth/sign-up/email",
  tags,
  summary: "Create an account with e-mail and password; signs it in",
  security: anyone,
  request: { body: jsonBody(SignUpInput) },
  responses: {
    200: { ...jsonContent(SignedInResponse, "Signed up and signed in"), headers: sessionCookieHeader },
    ...errorResponses(400, 403, 409, 413, 422, 429),
  },
});

const signInRoute = createRoute({
  method: "post",
  path: "/auth/sign-in/email",
  tags,
  summary: "Sign in with e-mail and password; sets the session cookie",
  security: anyone,
  request: { body: jsonBody(SignInInput) },
  responses: {
    200: { ...jsonContent(SignedInResponse, "Signed in"), headers: sessionCookieHeader },
    ...errorResponses(400, 401, 403, 413, 422, 429),
  },
});

const signOutRoute = createRoute({
  method: "post",
  path: "/auth/sign-out",
  tags,
  summary: "End the current session",
  security: sessionOnly,
  responses: {
    200: jsonContent(z.object({ success: z.boolean() }), "Signed out"),
    ...errorResponses(400, 401, 403, 413, 429),
  },
});

const getSessionRoute = createRoute({
  method: "get",
  path: "/auth/get-session",
  tags,
  summary: "The current session and its account, or null",
  // Anonymous callers are answered too (with null), hence the empty requirement.
  security: [{ sessionCookie: [] }, {}],
  responses: {
    200: jsonContent(
      z.object({ session: z.record(z.string(), z.unknown()), user: AuthUserSchema }).nullable(),
      "The session, or null when signed out",
    ),
    ...errorResponses(429),
  },
});

/**
 * Hands a request to better-auth with the body Plinth already validated, and puts its errors
 * into Plinth's envelope. An existing e-mail at sign-up is a 409 here (better-auth says 422), and
 * so is a sign-up that lost a race for its e-mail: better-auth found no account, then the
 * database's unique index refused the insert (`FAILED_TO_CREATE_USER`), which `taken` confirms.
 */
async function forward(
  c: Context<AppEnv>,
  auth: Auth,
  body?: unknown,
  taken?: () => Promise<boolean>,
  reshape?: (answer: string) => string,
): Promise<Response> {
  const headers = new Headers(c.req.raw.headers);
  headers.delete("content-length");
  const clientIp = c.get("clientIp");
  if (clientIp) headers.set(CLIENT_IP_HEADER, clientIp);
  else headers.delete(CLIENT_IP_HEADER);
  if (body !== undefined) headers.set("content-type", "application/json");
  const response = await auth.handler(
    new Request(c.req.url, {
      method: c.req.method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    }),
  );
  const passHeaders: Record<string, string | string[]> = {};
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) passHeaders["Set-Cookie"] = cookies;
  if (response.ok) {
    passHeaders["Content-Type"] = "application/json";
    const answer = await response.text();
    return c.body(reshape ? reshape(answer) : answer, response.status as ContentfulStatusCode, passHeaders);
  }
  const problem = (await response.json().catch(() => ({}))) as { code?: string; message?: string };
  const exists =
    problem.code?.startsWith("USER_ALREADY_EXISTS") ||
    (problem.code === "FAILED_TO_CREATE_USER" && taken !== undefined && (await taken()));
  const code = exists ? "CONFLICT" : codeOf(response.status);
  const message = exists
    ? "an account with this e-mail already exists"
    : (problem.message ?? "authentication failed").replace(/\.$/, "").toLowerCase();
  const details = problem.code ? { reason: problem.code } : undefined;
  return c.json(errorBody(code, message, details, c.get("requestId")), statusOf(code), passHeaders);
}

/** Whether an account holds `email` (better-auth stores e-mails in lower case). */
async function emailTaken(deps: Deps, email: string): Promise<boolean> {
  const row = await deps.db
    .selectFrom("users")
    .select("id")
    .where("email", "=", email.toLowerCase())
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * SIGNUP (DESIGN §16): `open` lets anyone create an account; `invite` only an e-mail with a
 * pending invitation (it can then accept it); `closed` nobody. Existing accounts sign in either
 * way, and single sign-on and SCIM, which an org's own identity provider drives, are not sign-up.
 */
async function assertSignUpOpen(deps: Deps, email: string): Promise<void> {
  const mode = deps.config.signUp;
  if (mode === "open") return;
  if (mode === "invite") {
    const invited = await deps.db
      .selectFrom("invitations")
      .select("id")
      .where("email", "=", email.trim().toLowerCase())
      .where("status", "=", "pending")
      .where("expires_at", ">", deps.clock.now().toISOString())
      .executeTakeFirst();
    if (invited) return;
    throw new ForbiddenError("sign-up is by invitation only on this server: ask an organization's admin to invite you");
  }
  throw new ForbiddenError("sign-up is closed on this server");
}

/** Where failed console sign-ins are counted (workspaces count theirs per project). */
const CONSOLE = "console";

export function authRoutes(deps: Deps, auth: Auth, sessions: ConsoleSessions, signInFailures: SignInFailures) {
  return createRouter()
    .openapi(signUpRoute, async (c) => {
      const { email, password, name } = c.req.valid("json");
      await assertSignUpOpen(deps, email);
      return forward(c, auth, { email, password, name }, () => emailTaken(deps, email)) as never;
    })
    .openapi(signInRoute, async (c) => {
      const { email, password, rememberMe } = c.req.valid("json");
      const input = { email, password, ...(rememberMe === undefined ? {} : { rememberMe }) };
      // An e-mail of a domain an org has proven for its single sign-on signs in there (owners excepted: the break-glass).
      const sso = await passwordSignInRefused(deps, input.email);
      if (sso) {
        throw new ForbiddenError(
          `this e-mail's organization signs in with single sign-on: ${deps.config.publicUrl}/api/auth/sso/${sso.slug}`,
        );
      }
      // better-auth answers 401 to a wrong password and to an unknown e-mail alike.
      return signInFailures.attempt(
        c,
        CONSOLE,
        input.email,
        () => forward(c, auth, input),
        (response) => response.status === 401,
      ) as never;
    })
    .openapi(signOutRoute, async (c) => {
      const answer = await forward(c, auth, {});
      // Only once better-auth has deleted it: forgotten before, a request in between would read it back.
      sessions.forget(c);
      return answer as never;
    })
    .openapi(getSessionRoute, (c) => forward(c, auth, undefined, undefined, withoutSessionToken) as never);
}

/**
 * The session as better-auth reads it, less its token: that is the cookie's secret, which
 * HttpOnly keeps from the page's scripts, and no read hands a secret back after it is issued.
 */
function withoutSessionToken(answer: string): string {
  const read = JSON.parse(answer) as { session?: Record<string, unknown> } | null;
  if (read?.session) delete read.session.token;
  return JSON.stringify(read);
}
