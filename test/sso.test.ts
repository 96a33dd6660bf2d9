import type { Server } from "node:http";
import Provider from "oidc-provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  call,
  createApiKey,
  expectError,
  expectValidation,
  ownerWithOrg,
  signUp,
  startApp,
  type TestApp,
  type TestUser,
  uniqueEmail,
} from "./harness.ts";
import { proveSsoDomain, startDns, type TestDns } from "./identity-kit.ts";
import { freePort } from "./ports.ts";

/**
 * Single sign-on (DESIGN §12): the configuration, and OIDC sign-in against a real OpenID provider
 * (the `oidc-provider` package) started here, its browser steps driven over HTTP: PKCE, state and
 * nonce, accounts made or linked by e-mail (of the org's proven domain only), membership with the
 * default role, refusals (replayed or forged state, a callback in another browser, e-mail outside
 * the domain, open redirects), domain proof over DNS, enforcement on password sign-in and the
 * owners' break-glass, the client secret sealed at rest.
 */

const CLIENT_ID = "plinth-test";
const CLIENT_SECRET = "a-client-secret-of-some-length";
/** The org's e-mail domain, proven by DNS early on. */
const DOMAIN = "corp.test";
/** A new address in the org's domain. */
const corpEmail = (label: string) => uniqueEmail(label).replace("@example.test", `@${DOMAIN}`);

/** A browser of sorts: a cookie jar per origin, redirects followed by hand. */
class Browser {
  private readonly jar = new Map<string, string>();

  /** Holds a cookie (`name=value`) as if a response had set it: a session signed in elsewhere. */
  adopt(cookie: string): void {
    const eq = cookie.indexOf("=");
    this.jar.set(cookie.slice(0, eq), cookie.slice(eq + 1));
  }

  async get(url: string, init: RequestInit = {}): Promise<Response> {
    const cookies = [...this.jar.entries()].map(([name, value]) => `${name}=${value}`).join("; ");
    const response = await fetch(url, {
      ...init,
      redirect: "manual",
      headers: { ...(init.headers as Record<string, string>), ...(cookies ? { cookie: cookies } : {}) },
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const eq = pair?.indexOf("=") ?? -1;
      if (pair && eq > 0) this.jar.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    return response;
  }

  /** Follows redirects while they stay off `stopAt`; returns the first location under it. */
  async walk(
    start: string,
    stopAt: string,
    onPage: (url: string, html: string) => Promise<string | null>,
  ): Promise<string> {
    let url = start;
    for (let step = 0; step < 20; step++) {
      if (url.startsWith(stopAt)) return url;
      const response = await this.get(url);
      const location = response.headers.get("location");
      if (location) {
        url = new URL(location, url).toString();
        continue;
      }
      const next = await onPage(url, await response.text());
      if (!next) throw new Error(`stuck at ${url} (${response.status})`);
      url = next;
    }
    throw new Error("too many steps");
  }
}

describe("single sign-on", () => {
  let app: TestApp;
  let owner: TestUser;
  let slug: string;
  let provider: Provider;
  let providerServer: Server;
  let issuer: string;
  let dns: TestDns;
  /** The login the provider's login page is given. */
  let loginAs = "";

  const asOwner = (method: string, path: string, body?: unknown) =>
    call(app, method, `/org/${slug}${path}`, { cookie: owner.cookie, body });

  /** Walks a login through the provider as `email`, up to (not into) the callback: returns its URL. */
  async function ssoCallbackUrl(email: string, returnTo: string | undefined, browser: Browser): Promise<string> {
    loginAs = email;
    const start = await browser.get(
      `${app.url}/api/auth/sso/${slug}${returnTo !== undefined ? `?returnTo=${encodeURIComponent(returnTo)}` : ""}`,
    );
    expect(start.status, await start.clone().text()).toBe(302);
    const authorize = new URL(start.headers.get("location") as string);
    expect(authorize.origin).toBe(new URL(issuer).origin);
    expect(authorize.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorize.searchParams.get("state")).toBeTruthy();
    expect(authorize.searchParams.get("nonce")).toBeTruthy();
    const callbackPrefix = `${app.config.publicUrl}/api/auth/sso/${slug}/callback`;
    return browser.walk(authorize.toString(), callbackPrefix, async (url, html) => {
      const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
      const prompt = /name="prompt" value="(\w+)"/.exec(html)?.[1];
      if (!action || !prompt) return null;
      const form = new URLSearchParams({ prompt, ...(prompt === "login" ? { login: loginAs, password: "any" } : {}) });
      const posted = await browser.get(new URL(action, url).toString(), {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: form.toString(),
      });
      return new URL(posted.headers.get("location") as string, url).toString();
    });
  }

  /** Signs in through the org's SSO as `email`: returns the callback's answer. */
  async function ssoLogin(email: string, returnTo?: string, browser = new Browser()) {
    const callback = await ssoCallbackUrl(email, returnTo, browser);
    const answer = await browser.get(callback.replace(app.config.publicUrl, app.url));
    return { answer, callback };
  }

  const cookieOf = (response: Response) =>
    response.headers
      .getSetCookie()
      .find((line) => line.startsWith("plinth.session_token="))
      ?.split(";")[0] ?? "";

  beforeAll(async () => {
    dns = await startDns();
    app = await startApp({
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      RATE_LIMIT_PER_MINUTE: "1000000",
      AUTH_RATE_LIMIT_PER_MINUTE: "1000000",
      DNS_SERVERS: dns.servers,
    });
    ({ owner, slug } = await ownerWithOrg(app, "Federated Org"));

    const port = await freePort();
    issuer = `http://127.0.0.1:${port}`;
    provider = new Provider(issuer, {
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          redirect_uris: [`${app.config.publicUrl}/api/auth/sso/${slug}/callback`],
          grant_types: ["authorization_code"],
          response_types: ["code"],
        },
      ],
      claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
      findAccount: async (_ctx, sub) => ({
        accountId: sub,
        claims: async () => ({ sub, email: sub, email_verified: true, name: `SSO ${sub.split("@")[0]}` }),
      }),
      cookies: { keys: ["oidc-provider-test-key"] },
      features: { devInteractions: { enabled: true } },
    });
    providerServer = provider.listen(port);
  });
  afterAll(async () => {
    await new Promise((resolve) => providerServer?.close(resolve));
    await app?.close();
    await dns?.close();
  });

  describe("configuration", () => {
    it("starts with none; refuses an incomplete enabled OIDC config naming the field", async () => {
      expect((await asOwner("GET", "/sso")).body).toEqual({ sso: null });
      expectValidation(
        await asOwner("PUT", "/sso", { type: "oidc", enabled: true, config: { clientId: "x" } }),
        "config.issuer",
      );
      expectValidation(
        await asOwner("PUT", "/sso", { type: "oidc", config: { issuer: "http://x", clientId: "x" } }),
        "config.clientSecret",
      );
      expectValidation(await asOwner("PUT", "/sso", { type: "ldap" }), "type");
      expectValidation(await asOwner("PUT", "/sso", { type: "oidc", emailDomain: "not a domain" }), "emailDomain");
      expectValidation(
        await asOwner("PUT", "/sso", { type: "saml", enabled: true, config: { entryPoint: "ftp://x" } }),
        "config.entryPoint",
      );
    });

    it("saves OIDC with the URLs an IdP admin needs, the secret masked (and kept when sent back masked)", async () => {
      const res = await asOwner("PUT", "/sso", {
        type: "oidc",
        enabled: true,
        config: { issuer, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const base = `${app.config.publicUrl}/api/auth/sso/${slug}`;
      expect(res.body.sso).toMatchObject({
        type: "oidc",
        enabled: true,
        emailDomain: null,
        defaultRole: "viewer",
        loginUrl: base,
        redirectUri: `${base}/callback`,
        acsUrl: `${base}/acs`,
        metadataUrl: `${base}/metadata`,
        domainVerification: null,
        config: { issuer, clientId: CLIENT_ID, clientSecret: "••••ngth" },
      });
      expect(JSON.stringify((await asOwner("GET", "/sso")).body)).not.toContain(CLIENT_SECRET);
      // Sent back as read: the secret stays.
      const again = await asOwner("PUT", "/sso", {
        type: "oidc",
        enabled: true,
        config: res.body.sso.config,
        defaultRole: "developer",
      });
      expect(again.status, JSON.stringify(again.body)).toBe(200);
      const audit = (await asOwner("GET", "/audit?action=sso.*")).body.events.map((e: { action: string }) => e.action);
      expect(audit).toEqual(["sso.updated", "sso.created"]);
      expect(JSON.stringify((await asOwner("GET", "/audit?action=sso.*")).body)).not.toContain(CLIENT_SECRET);
    });

    it("keeps the client secret sealed at rest (#13)", async () => {
      const row = await app.server.deps.db
        .selectFrom("sso_configs")
        .select("config")
        .where("org_id", "=", (await asOwner("GET", "/overview")).body.org.id)
        .executeTakeFirstOrThrow();
      expect(row.config).toMatch(/^enc:v1:/);
      expect(row.config).not.toContain(CLIENT_SECRET);
      expect(row.config).not.toContain(CLIENT_ID);
    });

    it("lets only a signed-in owner re-point an enabled SSO; a full key may change the rest (#2)", async () => {
      const key = await createApiKey(app, owner, slug, "full");
      const current = (await asOwner("GET", "/sso")).body.sso;
      for (const config of [
        { ...current.config, issuer: `${issuer}/elsewhere` },
        { ...current.config, clientId: "another-client" },
      ]) {
        const refused = await call(app, "PUT", `/org/${slug}/sso`, {
          token: key.token,
          body: { type: "oidc", enabled: true, config },
        });
        expectError(refused, 403, "FORBIDDEN");
        expect(refused.body.error.message).toMatch(/signed-in owner/);
      }
      expectError(
        await call(app, "PUT", `/org/${slug}/sso`, { token: key.token, body: { type: "saml", enabled: true } }),
        403,
      );
      expect((await asOwner("GET", "/sso")).body.sso.config).toEqual(current.config);
      const allowed = await call(app, "PUT", `/org/${slug}/sso`, {
        token: key.token,
        body: { type: "oidc", enabled: true, config: current.config, defaultRole: "developer" },
      });
      expect(allowed.status, JSON.stringify(allowed.body)).toBe(200);
    });

    it("is for admins: viewers 403, other orgs' keys 404, deploy keys 403", async () => {
      const other = await ownerWithOrg(app, "Other SSO Org");
      const key = await createApiKey(app, other.owner, other.slug, "full");
      expectError(await call(app, "GET", `/org/${slug}/sso`, { token: key.token }), 404);
      const deploy = await createApiKey(app, owner, slug, "deploy");
      expectError(await call(app, "PUT", `/org/${slug}/sso`, { token: deploy.token, body: { type: "oidc" } }), 403);
      const stranger = await signUp(app);
      expectError(await call(app, "GET", `/org/${slug}/sso`, { cookie: stranger.cookie }), 404);
    });
  });

  describe("OIDC sign-in", () => {
    it("signs nobody in until the org proves its e-mail domain; makes no account meanwhile (#3)", async () => {
      // No emailDomain: an identity provider may not vouch for an address the org does not own.
      const squatted = uniqueEmail("squatted");
      const first = await ssoLogin(squatted);
      expect(first.answer.status).toBe(401);
      expect(first.answer.headers.get("set-cookie") ?? "").not.toContain("session_token");
      expect(((await first.answer.json()) as any).error.message).toMatch(
        /this e-mail's domain is not verified for this organization/,
      );
      // Its holder can still sign up: nothing was made in their name.
      const holder = await signUp(app, squatted);
      expect((await call(app, "GET", "/orgs", { cookie: holder.cookie })).body.orgs).toEqual([]);

      // The domain named, not yet proven: still refused.
      const current = (await asOwner("GET", "/sso")).body.sso;
      const named = await asOwner("PUT", "/sso", { type: "oidc", config: current.config, emailDomain: DOMAIN });
      expect(named.status, JSON.stringify(named.body)).toBe(200);
      expect(named.body.sso.domainVerification).toMatchObject({ name: `_plinth-sso.${DOMAIN}`, verifiedAt: null });
      expect((await ssoLogin(corpEmail("early"))).answer.status).toBe(401);
      const early = await asOwner("POST", "/sso/verify-domain");
      expectError(early, 409);
      expect(early.body.error.message).toMatch(/no TXT record/);
      await proveSsoDomain(app, owner.cookie, slug, dns);
    });

    it("signs a new person in: account made, member with the default role, session cookie, back to returnTo", async () => {
      const email = corpEmail("federated");
      const { answer } = await ssoLogin(email, "/projects?tab=all");
      expect(answer.status, await answer.clone().text()).toBe(302);
      expect(answer.headers.get("location")).toBe("/projects?tab=all");
      const cookie = cookieOf(answer);
      expect(cookie).toMatch(/^plinth\.session_token=/);
      const account = await call(app, "GET", "/account", { cookie });
      expect(account.status).toBe(200);
      expect(account.body.account ?? account.body).toMatchObject({ email });
      const member = (await asOwner("GET", "/members")).body.members.find((m: { email: string }) => m.email === email);
      expect(member).toMatchObject({ role: "developer", status: "active" });
      expect((await call(app, "GET", `/org/${slug}/overview`, { cookie })).status).toBe(200);
      const audit = (await asOwner("GET", "/audit?action=member.joined_by_sso")).body.events;
      expect(audit[0]).toMatchObject({ data: { email, role: "developer" } });
    });

    it("signs in again an account it made, links an existing one of the domain, never one outside it", async () => {
      const email = corpEmail("returning");
      expect((await ssoLogin(email)).answer.status).toBe(302);
      const again = await ssoLogin(email);
      expect(again.answer.status).toBe(302);
      expect((await call(app, "GET", "/account", { cookie: cookieOf(again.answer) })).status).toBe(200);
      const memberships = (await asOwner("GET", "/members")).body.members.filter(
        (m: { email: string }) => m.email === email,
      );
      expect(memberships).toHaveLength(1);

      // An account of the proven domain with a password: the org holds the domain, so SSO links it.
      const employee = await signUp(app, corpEmail("employee"));
      const linked = await ssoLogin(employee.email);
      expect(linked.answer.status).toBe(302);
      expect((await call(app, "GET", "/account", { cookie: cookieOf(linked.answer) })).body.account).toMatchObject({
        email: employee.email,
      });

      // Someone's own account elsewhere: an identity provider's word is not enough.
      const person = await signUp(app);
      const refused = await ssoLogin(person.email);
      expect(refused.answer.status).toBe(401);
      expect(refused.answer.headers.get("set-cookie")).toBeNull();
      expect(((await refused.answer.json()) as any).error.message).toMatch(/not an address of corp\.test/);
      expect(
        (await asOwner("GET", "/members")).body.members.some((m: { email: string }) => m.email === person.email),
      ).toBe(false);
    });

    it("signs in an account SCIM provisioned for the org's domain", async () => {
      const token = (await asOwner("POST", "/scim/token")).body.token;
      const email = corpEmail("provisioned");
      const provisioned = await call(app, "POST", `/scim/v2/${slug}/Users`, {
        rawBody: JSON.stringify({ userName: email, name: { givenName: "Pro", familyName: "Visioned" } }),
        headers: { authorization: `Bearer ${token}`, "content-type": "application/scim+json" },
      });
      expect(provisioned.status).toBe(201);
      const { answer } = await ssoLogin(email);
      expect(answer.status, await answer.clone().text()).toBe(302);
      const account = await call(app, "GET", "/account", { cookie: cookieOf(answer) });
      expect(account.body.account ?? account.body).toMatchObject({ email });
      const memberships = (await asOwner("GET", "/members")).body.members.filter(
        (m: { email: string }) => m.email === email,
      );
      expect(memberships).toHaveLength(1);
    });

    it("refuses a replayed or forged callback with 401 and no session", async () => {
      const browser = new Browser();
      const { answer, callback } = await ssoLogin(corpEmail("replay"), undefined, browser);
      expect(answer.status).toBe(302);
      const replayed = await browser.get(callback.replace(app.config.publicUrl, app.url));
      expect(replayed.status).toBe(401);
      expect(replayed.headers.get("set-cookie") ?? "").not.toContain("session_token");
      const forged = new URL(callback.replace(app.config.publicUrl, app.url));
      forged.searchParams.set("state", "forged-state");
      const refused = await browser.get(forged.toString());
      expect(refused.status).toBe(401);
      expect(refused.headers.get("set-cookie") ?? "").not.toContain("session_token");
    });

    it("binds a login to the browser that started it: a callback carried to another browser is refused (#10)", async () => {
      // The attacker starts a login and stops before the callback; the victim's browser is sent to it.
      const email = corpEmail("csrf");
      const callback = await ssoCallbackUrl(email, undefined, new Browser());
      const victim = new Browser();
      const carried = await victim.get(callback.replace(app.config.publicUrl, app.url));
      expect(carried.status).toBe(401);
      expect(carried.headers.get("set-cookie") ?? "").not.toContain("session_token");
      expect(((await carried.json()) as any).error.message).toMatch(/did not start this sign-in/);
      // The start set the binding: HttpOnly, SameSite=Lax, short-lived, for the org's SSO paths.
      const start = await fetch(`${app.url}/api/auth/sso/${slug}`, { redirect: "manual" });
      const binding = start.headers.getSetCookie().find((line) => line.startsWith("plinth.sso_login=")) ?? "";
      expect(binding).toMatch(/HttpOnly/);
      expect(binding).toMatch(/SameSite=Lax/);
      expect(binding).toMatch(new RegExp(`Path=/api/auth/sso/${slug}`));
      expect(binding).toMatch(/Max-Age=600/);
    });

    it("never redirects off this service, whatever returnTo says (#5)", async () => {
      for (const returnTo of [
        "//evil.example/steal",
        "https://evil.example/",
        "/\\evil.example",
        "javascript:alert(1)",
        "/\t/evil.example/x",
        "/\n/evil.example/x",
        "/ /evil.example/x",
        "/.//evil.example/x",
        "/%2F/evil.example",
      ]) {
        const { answer } = await ssoLogin(corpEmail("redirect"), returnTo);
        expect(answer.status).toBe(302);
        const location = answer.headers.get("location") as string;
        // Resolved as a browser would, against the service: never another origin.
        expect(new URL(location, app.config.publicUrl).origin, `${JSON.stringify(returnTo)} → ${location}`).toBe(
          new URL(app.config.publicUrl).origin,
        );
        expect(location.startsWith("//")).toBe(false);
      }
      const { answer } = await ssoLogin(corpEmail("redirect"), "/orgs/acme?tab=members#top");
      expect(answer.headers.get("location")).toBe("/orgs/acme?tab=members#top");
    });

    it("refuses an e-mail outside emailDomain, and a suspended member", async () => {
      const { answer } = await ssoLogin(uniqueEmail("outsider"));
      expect(answer.status).toBe(401);
      expect(answer.headers.get("set-cookie")).toBeNull();
      expect(((await answer.json()) as any).error.message).toMatch(/not an address of corp\.test/);

      const inside = corpEmail("insider");
      expect((await ssoLogin(inside)).answer.status).toBe(302);
      const token = (await asOwner("POST", "/scim/token")).body.token;
      const member = (await asOwner("GET", "/members")).body.members.find((m: { email: string }) => m.email === inside);
      const suspended = await call(app, "PATCH", `/scim/v2/${slug}/Users/${member.id}`, {
        rawBody: JSON.stringify({ Operations: [{ op: "replace", value: { active: false } }] }),
        headers: { authorization: `Bearer ${token}`, "content-type": "application/scim+json" },
      });
      expect(suspended.status).toBe(200);
      expect((await ssoLogin(inside)).answer.status).toBe(401);
    });

    it("404s an org without enabled SSO", async () => {
      const res = await fetch(`${app.url}/api/auth/sso/no-such-org`, { redirect: "manual" });
      expect(res.status).toBe(404);
    });
  });

  describe("domain proof and enforcement", () => {
    it("sends the proven domain's people to SSO; owners keep their password", async () => {
      expect((await call(app, "POST", "/auth/sso/lookup", { body: { email: "Someone@CORP.test" } })).body).toEqual({
        url: `${app.config.publicUrl}/api/auth/sso/${slug}`,
      });
      expectError(await call(app, "POST", "/auth/sso/lookup", { body: { email: "a@elsewhere.test" } }), 404);
      expectValidation(await call(app, "POST", "/auth/sso/lookup", { body: { email: "nope" } }), "email");

      // A person of the domain with a password: refused, pointed to SSO.
      const password = "correct-horse-battery-staple";
      const employee = `employee-${Date.now()}@corp.test`;
      const signUpRes = await call(app, "POST", "/auth/sign-up/email", {
        body: { email: employee, password, name: "Employee" },
        headers: { origin: app.url },
      });
      expect(signUpRes.status).toBe(200);
      const refused = await call(app, "POST", "/auth/sign-in/email", {
        body: { email: employee, password },
        headers: { origin: app.url },
      });
      expectError(refused, 403);
      expect(refused.body.error.message).toContain(`/api/auth/sso/${slug}`);
      // SSO signs that existing account in (linking it).
      const linked = await ssoLogin(employee);
      expect(linked.answer.status).toBe(302);
      const account = await call(app, "GET", "/account", { cookie: cookieOf(linked.answer) });
      expect(account.body.account ?? account.body).toMatchObject({ email: employee });

      // An owner of the org whose e-mail is in the domain still signs in with a password (break-glass).
      const ownerEmail = `owner-${Date.now()}@corp.test`;
      const breakGlass = await signUp(app, ownerEmail);
      // Made a second owner directly: what matters here is the sign-in rule.
      const deps = app.server.deps;
      const org = await deps.db.selectFrom("orgs").select("id").where("slug", "=", slug).executeTakeFirstOrThrow();
      const at = new Date().toISOString();
      await deps.db
        .insertInto("memberships")
        .values({
          id: `mem_${"0".repeat(26)}1`,
          org_id: org.id,
          account_id: breakGlass.accountId,
          role: "owner",
          created_at: at,
          updated_at: at,
        })
        .execute();
      const owners = await call(app, "POST", "/auth/sign-in/email", {
        body: { email: ownerEmail, password: "correct-horse-battery" },
        headers: { origin: app.url },
      });
      expect(owners.status, JSON.stringify(owners.body)).toBe(200);
      // …and SSO does not sign that owner in: they never linked it from their own session (#2).
      const unlinked = await ssoLogin(ownerEmail);
      expect(unlinked.answer.status).toBe(401);
      expect(((await unlinked.answer.json()) as any).error.message).toMatch(/links single sign-on first/);
      // Started from the owner's own session, the same login links it; then it signs them in anywhere.
      const own = new Browser();
      own.adopt(breakGlass.cookie);
      expect((await ssoLogin(ownerEmail, undefined, own)).answer.status).toBe(302);
      expect((await ssoLogin(ownerEmail)).answer.status).toBe(302);
    });

    it("removes SSO, which lifts the enforcement", async () => {
      expect((await asOwner("DELETE", "/sso")).body).toEqual({ ok: true });
      expect((await asOwner("GET", "/sso")).body).toEqual({ sso: null });
      expectError(await asOwner("DELETE", "/sso"), 404);
      expectError(await call(app, "POST", "/auth/sso/lookup", { body: { email: "a@corp.test" } }), 404);
    });
  });
});

describe("single sign-on on a deployment that refuses private addresses", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it("refuses an OIDC issuer on plain http or a private address, naming config.issuer", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Careful Org");
    for (const issuer of [
      "http://idp.example.com",
      "https://127.0.0.1:8443",
      "https://169.254.169.254",
      "https://10.1.2.3",
    ]) {
      const res = await call(app, "PUT", `/org/${slug}/sso`, {
        cookie: owner.cookie,
        body: { type: "oidc", enabled: true, config: { issuer, clientId: "c", clientSecret: "s" } },
      });
      expectValidation(res, "config.issuer");
    }
    expect((await call(app, "GET", `/org/${slug}/sso`, { cookie: owner.cookie })).body).toEqual({ sso: null });
  });
});
