import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { inflateRawSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SignedXml } from "xml-crypto";
import {
  addMember,
  call,
  createApiKey,
  createOrg,
  expectError,
  type Mailbox,
  ownerWithOrg,
  signUp,
  startApp,
  startMailbox,
  type TestApp,
  type TestUser,
} from "./harness.ts";
import { proveSsoDomain, startDns, type TestDns } from "./identity-kit.ts";

/**
 * SAML sign-in (DESIGN §12) against responses this test builds and signs as an identity provider
 * would (its key and certificate made by openssl here): SP- and IdP-initiated logins, SP metadata,
 * and the attacks a service provider must refuse: unsigned, signed by another key, tampered,
 * expired, wrong audience, wrong destination or recipient, replayed, unknown InResponseTo, an XML
 * comment inside the NameID, and signature wrapping; a response built to be costly to parse;
 * re-pointing the SSO at another identity provider to take the owner's account (issue 31).
 */

const IDP = "https://idp.saml.test/metadata";
const DOMAIN = "saml.test";

interface Keys {
  key: string;
  cert: string;
}

function makeKeys(dir: string, name: string): Keys {
  const key = path.join(dir, `${name}.key`);
  const cert = path.join(dir, `${name}.crt`);
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "2",
      "-subj",
      `/CN=${name}`,
    ],
    {
      stdio: "ignore",
    },
  );
  return { key: readFileSync(key, "utf8"), cert: readFileSync(cert, "utf8") };
}

const iso = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();
const id = () => `_${randomBytes(16).toString("hex")}`;

interface AssertionOptions {
  email: string;
  acsUrl: string;
  audience: string;
  recipient?: string;
  notBefore?: string;
  notOnOrAfter?: string;
  inResponseTo?: string;
  assertionId?: string;
  /** Raw XML for the NameID's content (comments, say). */
  nameIdXml?: string;
}

function assertionXml(options: AssertionOptions): string {
  const now = iso(0);
  const notOnOrAfter = options.notOnOrAfter ?? iso(5 * 60_000);
  const inResponseTo = options.inResponseTo ? ` InResponseTo="${options.inResponseTo}"` : "";
  return (
    `<saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${options.assertionId ?? id()}" Version="2.0" IssueInstant="${now}">` +
    `<saml:Issuer>${IDP}</saml:Issuer>` +
    "<saml:Subject>" +
    `<saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">${options.nameIdXml ?? options.email}</saml:NameID>` +
    `<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData NotOnOrAfter="${notOnOrAfter}" Recipient="${options.recipient ?? options.acsUrl}"${inResponseTo}/></saml:SubjectConfirmation>` +
    "</saml:Subject>" +
    `<saml:Conditions NotBefore="${options.notBefore ?? iso(-60_000)}" NotOnOrAfter="${notOnOrAfter}"><saml:AudienceRestriction><saml:Audience>${options.audience}</saml:Audience></saml:AudienceRestriction></saml:Conditions>` +
    `<saml:AuthnStatement AuthnInstant="${now}" SessionIndex="${id()}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>` +
    "</saml:Assertion>"
  );
}

function sign(xml: string, keys: Keys): string {
  const signer = new SignedXml({
    privateKey: keys.key,
    publicCert: keys.cert,
    canonicalizationAlgorithm: "http://www.w3.org/2001/10/xml-exc-c14n#",
    signatureAlgorithm: "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
  });
  signer.addReference({
    xpath: "//*[local-name(.)='Assertion']",
    transforms: ["http://www.w3.org/2000/09/xmldsig#enveloped-signature", "http://www.w3.org/2001/10/xml-exc-c14n#"],
    digestAlgorithm: "http://www.w3.org/2001/04/xmlenc#sha256",
  });
  signer.computeSignature(xml, { location: { reference: "//*[local-name(.)='Issuer']", action: "after" } });
  return signer.getSignedXml();
}

function responseXml(assertion: string, destination: string, inResponseTo?: string): string {
  const irt = inResponseTo ? ` InResponseTo="${inResponseTo}"` : "";
  return (
    `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${id()}" Version="2.0" IssueInstant="${iso(0)}" Destination="${destination}"${irt}>` +
    `<saml:Issuer>${IDP}</saml:Issuer>` +
    '<samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>' +
    assertion +
    "</samlp:Response>"
  );
}

const encode = (xml: string) => Buffer.from(xml, "utf8").toString("base64");
const readJson = async (response: Response): Promise<any> => response.json();

describe("SAML single sign-on", () => {
  let app: TestApp;
  let owner: TestUser;
  let slug: string;
  let idp: Keys;
  let attacker: Keys;
  let dir: string;
  let acsUrl: string;
  let entityId: string;
  let dns: TestDns;
  let mailbox: Mailbox;

  const asOwner = (method: string, p: string, body?: unknown) =>
    call(app, method, `/org/${slug}${p}`, { cookie: owner.cookie, body });

  /** POSTs a response to the ACS as the browser would, from the IdP's auto-submitting form. */
  const post = (samlResponse: string, relayState?: string, orgSlug = slug) =>
    fetch(`${app.url}/api/auth/sso/${orgSlug}/acs`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        SAMLResponse: samlResponse,
        ...(relayState ? { RelayState: relayState } : {}),
      }).toString(),
    });

  const signedResponse = (options: Partial<AssertionOptions> & { email: string }, keys = idp, destination = acsUrl) =>
    encode(
      responseXml(
        sign(assertionXml({ acsUrl, audience: entityId, ...options }), keys),
        destination,
        options.inResponseTo,
      ),
    );

  const emailOf = async (response: Response) => {
    const cookie = response.headers.get("set-cookie")?.split(";")[0];
    if (!cookie) return null;
    const account = await call(app, "GET", "/account", { cookie });
    return (account.body.account ?? account.body).email as string;
  };

  const isMember = async (email: string) =>
    (await asOwner("GET", "/members")).body.members.some((m: { email: string }) => m.email === email);

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "plinth-saml-"));
    idp = makeKeys(dir, "idp");
    attacker = makeKeys(dir, "attacker");
    dns = await startDns();
    mailbox = await startMailbox();
    app = await startApp({
      RATE_LIMIT_PER_MINUTE: "1000000",
      AUTH_RATE_LIMIT_PER_MINUTE: "1000000",
      DNS_SERVERS: dns.servers,
      SMTP_URL: mailbox.url,
    });
    ({ owner, slug } = await ownerWithOrg(app, "SAML Org"));
    const put = await asOwner("PUT", "/sso", {
      type: "saml",
      enabled: true,
      emailDomain: DOMAIN,
      config: { entryPoint: "https://idp.saml.test/sso", idpCert: idp.cert, idpIssuer: IDP },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    ({ acsUrl, entityId } = put.body.sso);
    await proveSsoDomain(app, owner.cookie, slug, dns);
  });
  afterAll(async () => {
    await app?.close();
    await dns?.close();
    await mailbox?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("publishes this service provider's metadata at metadataUrl", async () => {
    const res = await fetch(`${app.url}/api/auth/sso/${slug}/metadata`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/samlmetadata+xml");
    const xml = await res.text();
    expect(xml).toContain(`entityID="${entityId}"`);
    expect(xml).toContain(`Location="${acsUrl}"`);
  });

  it("signs in SP-initiated: AuthnRequest by redirect, response to it, back to returnTo", async () => {
    const start = await fetch(`${app.url}/api/auth/sso/${slug}?returnTo=/settings`, { redirect: "manual" });
    expect(start.status).toBe(302);
    const location = new URL(start.headers.get("location") as string);
    expect(location.origin + location.pathname).toBe("https://idp.saml.test/sso");
    const request = inflateRawSync(
      Buffer.from(location.searchParams.get("SAMLRequest") as string, "base64"),
    ).toString();
    const requestId = /ID="([^"]+)"/.exec(request)?.[1] as string;
    expect(request).toContain(`AssertionConsumerServiceURL="${acsUrl}"`);
    const relayState = location.searchParams.get("RelayState") as string;
    const email = `sp-${Date.now()}@${DOMAIN}`;
    const answer = await post(signedResponse({ email, inResponseTo: requestId }), relayState);
    expect(answer.status, await answer.clone().text()).toBe(302);
    expect(answer.headers.get("location")).toBe("/settings");
    expect(await emailOf(answer)).toBe(email);
    expect(await isMember(email)).toBe(true);
    // The same request cannot be answered twice.
    const again = await post(signedResponse({ email, inResponseTo: requestId }), relayState);
    expect(again.status).toBe(401);
  });

  it("signs in IdP-initiated; an IdP's RelayState never leads off this service", async () => {
    const email = `idp-${Date.now()}@${DOMAIN}`;
    const answer = await post(signedResponse({ email }), "https://evil.example/steal");
    expect(answer.status, await answer.clone().text()).toBe(302);
    expect(answer.headers.get("location")).toBe("/");
    expect(await emailOf(answer)).toBe(email);
  });

  it("refuses a replayed assertion", async () => {
    const response = signedResponse({ email: `replay-${Date.now()}@${DOMAIN}` });
    expect((await post(response)).status).toBe(302);
    const replayed = await post(response);
    expect(replayed.status).toBe(401);
    expect(replayed.headers.get("set-cookie")).toBeNull();
  });

  it("refuses unsigned, foreign-signed, tampered, expired, early, misaddressed and unsolicited responses", async () => {
    const victim = `victim-${Date.now()}@${DOMAIN}`;
    const refused: [string, string][] = [
      ["unsigned", encode(responseXml(assertionXml({ email: victim, acsUrl, audience: entityId }), acsUrl))],
      ["signed by another key", signedResponse({ email: victim }, attacker)],
      [
        "tampered after signing",
        encode(
          responseXml(
            sign(assertionXml({ email: `someone@${DOMAIN}`, acsUrl, audience: entityId }), idp),
            acsUrl,
          ).replace(`someone@${DOMAIN}`, victim),
        ),
      ],
      ["expired", signedResponse({ email: victim, notBefore: iso(-3_600_000), notOnOrAfter: iso(-1_800_000) })],
      ["not yet valid", signedResponse({ email: victim, notBefore: iso(3_600_000), notOnOrAfter: iso(7_200_000) })],
      ["for another audience", signedResponse({ email: victim, audience: "https://other-sp.example/metadata" })],
      ["to another destination", signedResponse({ email: victim }, idp, "https://other-sp.example/acs")],
      ["for another recipient", signedResponse({ email: victim, recipient: "https://other-sp.example/acs" })],
      ["answering a request never made", signedResponse({ email: victim, inResponseTo: "_never-sent" })],
      ["outside the e-mail domain", signedResponse({ email: `someone@elsewhere.test` })],
      ["not base64 XML", "bm90IHhtbA=="],
    ];
    for (const [label, response] of refused) {
      const answer = await post(response);
      expect(answer.status, `${label}: ${await answer.clone().text()}`).toBe(401);
      expect(answer.headers.get("set-cookie"), label).toBeNull();
    }
    expect(await isMember(victim)).toBe(false);
    const missing = await fetch(`${app.url}/api/auth/sso/${slug}/acs`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "",
    });
    expect(missing.status).toBe(401);
  });

  it("reads the whole NameID: an XML comment cannot shorten it to someone else's address", async () => {
    // The IdP vouches for victim@saml.test.evil.test; the comment, outside what is signed
    // (canonical XML drops comments), would make a naive reader see victim@saml.test.
    const victim = `victim${Date.now()}@${DOMAIN}`;
    const signed = sign(assertionXml({ email: `${victim}.evil.test`, acsUrl, audience: entityId }), idp);
    const commented = signed.replace(`${victim}.evil.test`, `${victim}<!---->.evil.test`);
    const answer = await post(encode(responseXml(commented, acsUrl)));
    if (answer.status === 302) expect(await emailOf(answer)).toBe(`${victim}.evil.test`);
    else expect(answer.status).toBe(401);
    expect(await isMember(victim)).toBe(false);
  });

  it("is not fooled by signature wrapping: only what the signature covers is read", async () => {
    const victim = `wrapped${Date.now()}@${DOMAIN}`;
    const attackerEmail = `attacker${Date.now()}@${DOMAIN}`;
    const genuine = sign(assertionXml({ email: attackerEmail, acsUrl, audience: entityId }), idp);
    const forged = assertionXml({ email: victim, acsUrl, audience: entityId });
    // XSW: the forged assertion first, the signed one moved inside it (and, in a second try, after it).
    const inside = forged.replace("</saml:Subject>", `</saml:Subject><saml:Advice>${genuine}</saml:Advice>`);
    for (const body of [responseXml(inside, acsUrl), responseXml(forged + genuine, acsUrl)]) {
      const answer = await post(encode(body));
      if (answer.status === 302) expect(await emailOf(answer)).toBe(attackerEmail);
      else expect(answer.status).toBe(401);
    }
    expect(await isMember(victim)).toBe(false);
  });

  it("takes the identity provider's metadata XML instead of its endpoint and certificate", async () => {
    const certBody = idp.cert.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
    const metadataXml =
      `<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="${IDP}">` +
      '<md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">' +
      `<md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${certBody}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>` +
      '<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://idp.saml.test/from-metadata"/>' +
      "</md:IDPSSODescriptor></md:EntityDescriptor>";
    const before = (await asOwner("GET", "/sso")).body.sso.domainVerification;
    const put = await asOwner("PUT", "/sso", {
      type: "saml",
      enabled: true,
      emailDomain: DOMAIN,
      config: { metadataXml },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    // Another way to name the identity provider is a change of it: the domain is proven anew.
    expect(put.body.sso.domainVerification.verifiedAt).toBeNull();
    expect(put.body.sso.domainVerification.value).not.toBe(before.value);
    await proveSsoDomain(app, owner.cookie, slug, dns);
    const start = await fetch(`${app.url}/api/auth/sso/${slug}`, { redirect: "manual" });
    expect(start.status).toBe(302);
    expect(start.headers.get("location")).toMatch(/^https:\/\/idp\.saml\.test\/from-metadata\?SAMLRequest=/);
    const email = `metadata-${Date.now()}@${DOMAIN}`;
    const answer = await post(signedResponse({ email }));
    expect(answer.status, await answer.clone().text()).toBe(302);
    expect(await emailOf(answer)).toBe(email);
  });

  it("refuses a response built to be costly to parse at a look at it, and keeps serving meanwhile (#1)", async () => {
    // ~100 KB of 16,000 empty elements: node-saml's XPath would spend seconds on it before any signature check.
    const hostile = encode(
      `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" ID="${id()}">${"<x/>".repeat(16_000)}</samlp:Response>`,
    );
    const answers = await Promise.all([1, 2, 3, 4].map(() => post(hostile)));
    const health = await fetch(`${app.url}/api/health`);
    expect(health.status).toBe(200);
    for (const answer of answers) {
      const body = await readJson(answer);
      expect(answer.status, JSON.stringify(body)).toBe(413);
      expect(body.error).toMatchObject({
        code: "PAYLOAD_TOO_LARGE",
        message: expect.stringMatching(/more than 1000 elements/),
      });
      expect(answer.headers.get("set-cookie")).toBeNull();
    }
    // Too many bytes, however few elements.
    const padded = encode(
      `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" ID="${"a".repeat(200_000)}"/>`,
    );
    expect((await post(padded)).status).toBe(413);
    // Under both caps, a forged response is checked (off the API's thread) and refused as any other.
    const heavy = encode(
      responseXml(assertionXml({ email: `heavy@${DOMAIN}`, acsUrl, audience: entityId }), acsUrl).replace(
        "<samlp:Status>",
        `${"<x/>".repeat(900)}<samlp:Status>`,
      ),
    );
    expect((await post(heavy)).status).toBe(401);
    // And a genuine one still signs in.
    const email = `after-flood-${Date.now()}@${DOMAIN}`;
    const genuine = await post(signedResponse({ email }));
    expect(genuine.status, await genuine.clone().text()).toBe(302);
    expect(await emailOf(genuine)).toBe(email);
  });

  describe("re-pointing single sign-on to take the owner's account (#2)", () => {
    const ACME = "acme.test";
    let boss: TestUser;
    let acme: string;
    let acmeAcs: string;
    let acmeEntity: string;
    let admin: TestUser;
    const asBoss = (method: string, p: string, body?: unknown) =>
      call(app, method, `/org/${acme}${p}`, { cookie: boss.cookie, body });
    /** A response for Acme's service provider, signed with `keys`. */
    const acmeResponse = (email: string, keys = idp, inResponseTo?: string) =>
      encode(
        responseXml(
          sign(assertionXml({ email, acsUrl: acmeAcs, audience: acmeEntity, inResponseTo }), keys),
          acmeAcs,
          inResponseTo,
        ),
      );
    const samlConfig = (keys: Keys) => ({
      entryPoint: "https://idp.saml.test/sso",
      idpCert: keys.cert,
      idpIssuer: IDP,
    });

    beforeAll(async () => {
      boss = await signUp(app, `boss-${Date.now()}@${ACME}`);
      acme = (await createOrg(app, boss, "Acme")).slug;
      const put = await asBoss("PUT", "/sso", {
        type: "saml",
        enabled: true,
        emailDomain: ACME,
        config: samlConfig(idp),
      });
      expect(put.status, JSON.stringify(put.body)).toBe(200);
      ({ acsUrl: acmeAcs, entityId: acmeEntity } = put.body.sso);
      await proveSsoDomain(app, boss.cookie, acme, dns);
      ({ user: admin } = await addMember(app, mailbox, boss, acme, "admin"));
    });

    it("refuses an admin, or a full key, pointing the enabled SSO at an identity provider of their own", async () => {
      const key = await createApiKey(app, boss, acme, "full");
      for (const as of [{ cookie: admin.cookie }, { token: key.token }]) {
        const refused = await call(app, "PUT", `/org/${acme}/sso`, {
          ...as,
          body: { type: "saml", enabled: true, emailDomain: ACME, config: samlConfig(attacker) },
        });
        expectError(refused, 403, "FORBIDDEN");
        expect(refused.body.error.message).toMatch(/signed-in owner/);
      }
      const sso = (await asBoss("GET", "/sso")).body.sso;
      expect(sso.config.idpCert).toBe(idp.cert);
      expect(sso.domainVerification.verifiedAt).toBeTruthy();
      const forged = await post(acmeResponse(boss.email, attacker), undefined, acme);
      expect(forged.status).toBe(401);
      expect(forged.headers.get("set-cookie")).toBeNull();
    });

    it("signs no owner or admin in until they link it from their own session", async () => {
      const refused = await post(acmeResponse(boss.email), undefined, acme);
      expect(refused.status).toBe(401);
      expect(refused.headers.get("set-cookie")).toBeNull();
      expect((await readJson(refused)).error.message).toMatch(/links single sign-on first/);
      // The owner, signed in with a password, starts single sign-on: the login links their account.
      const start = await fetch(`${app.url}/api/auth/sso/${acme}`, {
        redirect: "manual",
        headers: { cookie: boss.cookie },
      });
      const location = new URL(start.headers.get("location") as string);
      const request = inflateRawSync(
        Buffer.from(location.searchParams.get("SAMLRequest") as string, "base64"),
      ).toString();
      const requestId = /ID="([^"]+)"/.exec(request)?.[1] as string;
      const linked = await post(
        acmeResponse(boss.email, idp, requestId),
        location.searchParams.get("RelayState") as string,
        acme,
      );
      expect(linked.status, await linked.clone().text()).toBe(302);
      expect(await emailOf(linked)).toBe(boss.email);
      // Linked: the identity provider signs them in from now on, from any browser.
      expect(await emailOf(await post(acmeResponse(boss.email), undefined, acme))).toBe(boss.email);
      // Anyone else of the domain is signed in (made) as ever.
      const carol = `carol-${Date.now()}@${ACME}`;
      expect(await emailOf(await post(acmeResponse(carol), undefined, acme))).toBe(carol);
    });

    it("proves the domain anew, under a new TXT value, and forgets every link when the owner re-points it", async () => {
      const before = (await asBoss("GET", "/sso")).body.sso.domainVerification;
      const repointed = await asBoss("PUT", "/sso", {
        type: "saml",
        enabled: true,
        emailDomain: ACME,
        config: samlConfig(attacker),
      });
      expect(repointed.status, JSON.stringify(repointed.body)).toBe(200);
      const proof = repointed.body.sso.domainVerification;
      expect(proof.verifiedAt).toBeNull();
      expect(proof.value).not.toBe(before.value);
      // The record the owner left published proves nothing now.
      expectError(await asBoss("POST", "/sso/verify-domain"), 409);
      const unproven = await post(acmeResponse(`dave-${Date.now()}@${ACME}`, attacker), undefined, acme);
      expect(unproven.status).toBe(401);
      expect((await readJson(unproven)).error.message).toMatch(/not verified for this organization/);
      await proveSsoDomain(app, boss.cookie, acme, dns);
      // The owner's link was to the old provider: the new one must be linked again.
      const owner = await post(acmeResponse(boss.email, attacker), undefined, acme);
      expect(owner.status).toBe(401);
      expect(owner.headers.get("set-cookie")).toBeNull();
      const erin = `erin-${Date.now()}@${ACME}`;
      expect(await emailOf(await post(acmeResponse(erin, attacker), undefined, acme))).toBe(erin);
    });
  });

  it("drops the links other orgs hold to a domain's accounts when an org proves it (#3)", async () => {
    // A link an identity provider was given before links needed a proven domain.
    const zeta = `zed-${Date.now()}@zeta.test`;
    const person = await signUp(app, zeta);
    const { db } = app.server.deps;
    const samlOrg = await db.selectFrom("orgs").select("id").where("slug", "=", slug).executeTakeFirstOrThrow();
    await db
      .insertInto("sso_identities")
      .values({ org_id: samlOrg.id, account_id: person.accountId, created_at: new Date().toISOString() })
      .execute();
    const links = () =>
      db.selectFrom("sso_identities").select("org_id").where("account_id", "=", person.accountId).execute();
    expect(await links()).toHaveLength(1);
    const other = await ownerWithOrg(app, "Zeta");
    const put = await call(app, "PUT", `/org/${other.slug}/sso`, {
      cookie: other.owner.cookie,
      body: { type: "saml", enabled: false, emailDomain: "zeta.test" },
    });
    expect(put.status).toBe(200);
    await proveSsoDomain(app, other.owner.cookie, other.slug, dns);
    expect(await links()).toEqual([]);
  });
});
