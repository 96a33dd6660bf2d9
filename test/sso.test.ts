import type { Server } from "node:http";
import dns2 from "dns2";
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
import { freePort } from "./ports.ts";

/**
 * Single sign-on (DESIGN §12): the configuration, and OIDC sign-in against a real OpenID provider
 * (the `oidc-provider` package) started here, its browser steps driven over HTTP: PKCE, state and
 * nonce, accounts made or linked by e-mail, membership with the default role, refusals (replayed
 * or forged state, e-mail outside the domain, open redirects), domain proof over DNS, enforcement
 * on password sign-in and the owners' break-glass.
 */

const CLIENT_ID = "plinth-test";
const CLIENT_SECRET = "a-client-secret-of-some-length";

/** A browser of sorts: a cookie jar per origin, redirects followed by hand. */
class Browser {
  private readonly jar = new Map<string, string>();

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
  let dns: ReturnType<typeof dns2.createServer>;
  const txt = new Map<string, string[]>();
  /** The login the provider's login page is given. */
  let loginAs = "";

  const asOwner = (method: string, path: string, body?: unknown) =>
    call(app, method, `/org/${slug}${path}`, { cookie: owner.cookie, body });

  /** Signs in through the org's SSO as `email`: returns the callback's answer. */
  async function ssoLogin(email: string, returnTo?: string, browser = new Browser()) {
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
    const callback = await browser.walk(authorize.toString(), callbackPrefix, async (url, html) => {
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
    const answer = await browser.get(callback.replace(app.config.publicUrl, app.url));
    return { answer, callback };
  }

  const cookieOf = (response: Response) => response.headers.get("set-cookie")?.split(";")[0] ?? "";

  beforeAll(async () => {
    dns = dns2.createServer({
      udp: true,
      handle: (request, send) => {
        const response = dns2.Packet.createResponseFromRequest(request);
        const name = request.questions[0]?.name ?? "";
        const records = txt.get(name);
        if (!records) response.header.rcode = 3;
        for (const data of records ?? []) {
          response.answers.push({
            name,
            type: dns2.Packet.TYPE.TXT,
            class: dns2.Packet.CLASS.IN,
            ttl: 1,
            data,
          } as never);
        }
        send(response);
      },
    });
    const dnsPort = await freePort();
    await dns.listen({ udp: { port: dnsPort, address: "127.0.0.1" } });
    app = await startApp({
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      RATE_LIMIT_PER_MINUTE: "1000000",
      AUTH_RATE_LIMIT_PER_MINUTE: "1000000",
      DNS_SERVERS: `127.0.0.1:${dnsPort}`,
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
    it("signs a new person in: account made, member with the default role, session cookie, back to returnTo", async () => {
      const email = uniqueEmail("federated");
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

    it("signs in again an account it made; refuses another existing account until the domain is proven", async () => {
      const email = uniqueEmail("returning");
      expect((await ssoLogin(email)).answer.status).toBe(302);
      const again = await ssoLogin(email);
      expect(again.answer.status).toBe(302);
      expect((await call(app, "GET", "/account", { cookie: cookieOf(again.answer) })).status).toBe(200);
      const memberships = (await asOwner("GET", "/members")).body.members.filter(
        (m: { email: string }) => m.email === email,
      );
      expect(memberships).toHaveLength(1);

      // Someone's own account (a password, other orgs): an identity provider's word is not enough.
      const person = await signUp(app);
      const refused = await ssoLogin(person.email);
      expect(refused.answer.status).toBe(401);
      expect(refused.answer.headers.get("set-cookie")).toBeNull();
      expect(((await refused.answer.json()) as any).error.message).toMatch(/prove the e-mail's domain/);
      expect(
        (await asOwner("GET", "/members")).body.members.some((m: { email: string }) => m.email === person.email),
      ).toBe(false);
    });

    it("signs in an account SCIM provisioned for the org, without a proven domain", async () => {
      const token = (await asOwner("POST", "/scim/token")).body.token;
      const email = uniqueEmail("provisioned");
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
      const { answer, callback } = await ssoLogin(uniqueEmail("replay"));
      expect(answer.status).toBe(302);
      const replayed = await fetch(callback.replace(app.config.publicUrl, app.url), { redirect: "manual" });
      expect(replayed.status).toBe(401);
      expect(replayed.headers.get("set-cookie")).toBeNull();
      const forged = new URL(callback.replace(app.config.publicUrl, app.url));
      forged.searchParams.set("state", "forged-state");
      const refused = await fetch(forged, { redirect: "manual" });
      expect(refused.status).toBe(401);
      expect(refused.headers.get("set-cookie")).toBeNull();
    });

    it("never redirects off this service, whatever returnTo says", async () => {
      for (const returnTo of [
        "//evil.example/steal",
        "https://evil.example/",
        "/\\evil.example",
        "javascript:alert(1)",
      ]) {
        const { answer } = await ssoLogin(uniqueEmail("redirect"), returnTo);
        expect(answer.status).toBe(302);
        expect(answer.headers.get("location")).toBe("/");
      }
    });

    it("refuses an e-mail outside emailDomain, and a suspended member", async () => {
      const current = (await asOwner("GET", "/sso")).body.sso;
      expect(
        (
          await asOwner("PUT", "/sso", {
            type: "oidc",
            enabled: true,
            config: current.config,
            emailDomain: "corp.test",
          })
        ).status,
      ).toBe(200);
      const { answer } = await ssoLogin(uniqueEmail("outsider"));
      expect(answer.status).toBe(401);
      expect(answer.headers.get("set-cookie")).toBeNull();
      expect(((await answer.json()) as any).error.message).toMatch(/not an address of corp\.test/);

      const inside = `insider-${Date.now()}@corp.test`;
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
    it("proves the domain by DNS, then sends its people to SSO; owners keep their password", async () => {
      const sso = (await asOwner("GET", "/sso")).body.sso;
      expect(sso.domainVerification).toMatchObject({ name: "_plinth-sso.corp.test", verifiedAt: null });
      expectError(await call(app, "POST", "/auth/sso/lookup", { body: { email: "a@corp.test" } }), 404);
      // Not published yet: 409 saying so.
      const early = await asOwner("POST", "/sso/verify-domain");
      expectError(early, 409);
      expect(early.body.error.message).toMatch(/no TXT record/);
      txt.set("_plinth-sso.corp.test", [sso.domainVerification.value]);
      const verified = await asOwner("POST", "/sso/verify-domain");
      expect(verified.status, JSON.stringify(verified.body)).toBe(200);
      expect(verified.body.sso.domainVerification.verifiedAt).toBeTruthy();

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
      // Now the domain is proven, SSO signs that existing account in (linking it).
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
