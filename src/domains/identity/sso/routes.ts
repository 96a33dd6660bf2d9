import { createRoute, z } from "@hono/zod-openapi";
import { getCookie } from "hono/cookie";
import type { Auth } from "../../../auth/better-auth.ts";
import { startSsoSession } from "../../../auth/sso-session.ts";
import type { Deps } from "../../../deps.ts";
import {
  anyone,
  authedErrors,
  createRouter,
  errorResponses,
  jsonBody,
  jsonContent,
  OkSchema,
  sessionOrKey,
} from "../../../http/router.ts";
import { orgCtx, requires } from "../../../http/service-context.ts";
import { SlugParams } from "../../orgs/schemas.ts";
import { SsoInput, SsoLookupInput, SsoResponse } from "./schemas.ts";
import {
  completeSamlLogin,
  completeSsoLogin,
  deleteSso,
  getSso,
  lookupSso,
  putSso,
  samlMetadata,
  startSsoLogin,
  verifySsoDomain,
} from "./service.ts";

const tags = ["Single sign-on"];
const LoginParams = z.object({ orgSlug: z.string().openapi({ param: { name: "orgSlug", in: "path" } }) });

const routes = {
  get: createRoute({
    method: "get",
    path: "/org/{slug}/sso",
    tags,
    summary: "The org's single sign-on configuration, secrets masked (admin)",
    security: sessionOrKey,
    request: { params: SlugParams },
    responses: { 200: jsonContent(SsoResponse, "The configuration, or null"), ...authedErrors },
  }),
  put: createRoute({
    method: "put",
    path: "/org/{slug}/sso",
    tags,
    summary: "Set the org's single sign-on (OIDC or SAML) (admin)",
    description:
      "A new emailDomain, or a new identity provider (type, issuer, clientId, certificate, entry point or metadata), must be " +
      "proven again (POST …/sso/verify-domain, a new TXT value) before single sign-on signs anyone in, and forgets every " +
      "account linked to the previous provider. Changing the identity provider of an enabled configuration is for a " +
      "signed-in owner only (403 for admins and API keys).",
    security: sessionOrKey,
    request: { params: SlugParams, body: jsonBody(SsoInput) },
    responses: { 200: jsonContent(SsoResponse, "The configuration"), ...authedErrors },
  }),
  remove: createRoute({
    method: "delete",
    path: "/org/{slug}/sso",
    tags,
    summary: "Remove the org's single sign-on (admin)",
    security: sessionOrKey,
    request: { params: SlugParams },
    responses: { 200: jsonContent(OkSchema, "Removed"), ...authedErrors },
  }),
  verify: createRoute({
    method: "post",
    path: "/org/{slug}/sso/verify-domain",
    tags,
    summary: "Look the `_plinth-sso.<emailDomain>` TXT record up now (admin)",
    description:
      "Once proven, password sign-in for the domain is 403 pointing to single sign-on, except for the org's owners. " +
      "409 while the record is not found (the message says what was).",
    security: sessionOrKey,
    request: { params: SlugParams },
    responses: { 200: jsonContent(SsoResponse, "The configuration, domain verified"), ...authedErrors },
  }),
  login: createRoute({
    method: "get",
    path: "/auth/sso/{orgSlug}",
    tags,
    summary: "Start single sign-on: 302 to the identity provider (OIDC: state, nonce and PKCE S256)",
    description:
      "OIDC sets a short-lived HttpOnly cookie that binds the login to this browser: the callback refuses (401) without it. " +
      "Started from a signed-in session, the login may link that account (an owner's or admin's must be linked so).",
    security: anyone,
    request: {
      params: LoginParams,
      query: z.object({
        returnTo: z.string().max(2048).optional().openapi({ description: "A path here to land on after" }),
      }),
    },
    responses: { 302: { description: "To the identity provider" }, ...errorResponses(404, 409, 401, 429) },
  }),
  callback: createRoute({
    method: "get",
    path: "/auth/sso/{orgSlug}/callback",
    tags,
    summary: "The OIDC redirect URI: signs the person in (the session cookie) and 302s to returnTo",
    description:
      "401 unless the browser holds the cookie its login's start set, the e-mail is in the org's proven emailDomain, " +
      "and (for an existing owner or admin of the org) the account linked single sign-on from its own session.",
    security: anyone,
    request: { params: LoginParams },
    responses: { 302: { description: "Signed in" }, ...errorResponses(401, 404, 429) },
  }),
  acs: createRoute({
    method: "post",
    path: "/auth/sso/{orgSlug}/acs",
    tags,
    summary: "The SAML Assertion Consumer Service (HTTP-POST: SAMLResponse, RelayState): signs the person in and 302s",
    description:
      "SP- and IdP-initiated. The assertion must be signed by the IdP's certificate, for this audience and ACS, within its " +
      "time window, and unused; otherwise 401 and no session.",
    security: anyone,
    request: { params: LoginParams },
    responses: { 302: { description: "Signed in" }, ...errorResponses(401, 404, 413, 429) },
  }),
  metadata: createRoute({
    method: "get",
    path: "/auth/sso/{orgSlug}/metadata",
    tags,
    summary: "This service provider's SAML metadata XML (entity id, ACS URL)",
    security: anyone,
    request: { params: LoginParams },
    responses: {
      200: { description: "SAML metadata", content: { "application/samlmetadata+xml": { schema: z.string() } } },
      ...errorResponses(404, 429),
    },
  }),
  lookup: createRoute({
    method: "post",
    path: "/auth/sso/lookup",
    tags,
    summary: "Where a person signs in: the login URL of the enabled, proven SSO of the e-mail's domain",
    security: anyone,
    request: { body: jsonBody(SsoLookupInput) },
    responses: {
      200: jsonContent(z.object({ url: z.string() }), "The login URL"),
      ...errorResponses(400, 404, 413, 422, 429),
    },
  }),
};

/** How long the cookie binding an OIDC login to its browser lives (the login's own lifetime). */
const LOGIN_COOKIE_SECONDS = 600;

export function ssoRoutes(deps: Deps, auth: Auth) {
  const bindingCookieName = `${deps.config.cookiePrefix}.sso_login`;
  const secure = deps.config.publicUrl.startsWith("https://") ? "; Secure" : "";
  // HttpOnly, and SameSite=Lax: sent on the identity provider's top-level redirect back, never on a cross-site POST.
  const bindingCookie = (orgSlug: string, value: string, maxAge: number) =>
    `${bindingCookieName}=${value}; Path=/api/auth/sso/${encodeURIComponent(orgSlug)}; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure}`;
  return createRouter()
    .openapi({ ...routes.get, middleware: requires(deps, "sso:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await getSso({ ctx: await orgCtx(c, deps, slug) }), 200);
    })
    .openapi({ ...routes.put, middleware: requires(deps, "sso:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await putSso({ ctx: await orgCtx(c, deps, slug), input: c.req.valid("json") }), 200);
    })
    .openapi({ ...routes.remove, middleware: requires(deps, "sso:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await deleteSso({ ctx: await orgCtx(c, deps, slug) }), 200);
    })
    .openapi({ ...routes.verify, middleware: requires(deps, "sso:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await verifySsoDomain({ ctx: await orgCtx(c, deps, slug) }), 200);
    })
    .openapi(routes.login, async (c) => {
      const { orgSlug } = c.req.valid("param");
      const principal = c.get("principal");
      const start = await startSsoLogin(
        deps,
        orgSlug,
        c.req.valid("query").returnTo,
        principal?.type === "account" ? principal.accountId : null,
      );
      if (start.binding) c.header("Set-Cookie", bindingCookie(orgSlug, start.binding, LOGIN_COOKIE_SECONDS));
      return c.redirect(start.url, 302);
    })
    .openapi(routes.callback, async (c) => {
      const { orgSlug } = c.req.valid("param");
      // The URL the identity provider redirected to, as registered (PUBLIC_URL), with its query.
      const callback = new URL(`${deps.config.publicUrl}/api/auth/sso/${encodeURIComponent(orgSlug)}/callback`);
      callback.search = new URL(c.req.url).search;
      const binding = getCookie(c, bindingCookieName);
      const { accountId, returnTo } = await completeSsoLogin(deps, orgSlug, callback, binding);
      const cookie = await startSsoSession(deps, auth, accountId, {
        ip: c.get("clientIp"),
        userAgent: c.req.header("user-agent"),
      });
      c.header("Set-Cookie", bindingCookie(orgSlug, "", 0), { append: true });
      c.header("Set-Cookie", cookie, { append: true });
      return c.redirect(returnTo, 302);
    })
    .openapi(routes.acs, async (c) => {
      const { orgSlug } = c.req.valid("param");
      const form = await c.req.parseBody();
      const text = (value: unknown) => (typeof value === "string" ? value : undefined);
      const { accountId, returnTo } = await completeSamlLogin(deps, orgSlug, {
        SAMLResponse: text(form.SAMLResponse),
        RelayState: text(form.RelayState),
      });
      const cookie = await startSsoSession(deps, auth, accountId, {
        ip: c.get("clientIp"),
        userAgent: c.req.header("user-agent"),
      });
      c.header("Set-Cookie", cookie);
      return c.redirect(returnTo, 302);
    })
    .openapi(routes.metadata, async (c) => {
      const xml = await samlMetadata(deps, c.req.valid("param").orgSlug);
      return c.body(xml, 200, { "content-type": "application/samlmetadata+xml" });
    })
    .openapi(routes.lookup, async (c) => c.json(await lookupSso(deps, c.req.valid("json").email), 200));
}
