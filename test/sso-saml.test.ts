import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { inflateRawSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SignedXml } from "xml-crypto";
import { call, ownerWithOrg, startApp, type TestApp, type TestUser } from "./harness.ts";

/**
 * SAML sign-in (DESIGN §12) against responses this test builds and signs as an identity provider
 * would (its key and certificate made by openssl here): SP- and IdP-initiated logins, SP metadata,
 * and the attacks a service provider must refuse: unsigned, signed by another key, tampered,
 * expired, wrong audience, wrong destination or recipient, replayed, unknown InResponseTo, an XML
 * comment inside the NameID, and signature wrapping.
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

describe("SAML single sign-on", () => {
  let app: TestApp;
  let owner: TestUser;
  let slug: string;
  let idp: Keys;
  let attacker: Keys;
  let dir: string;
  let acsUrl: string;
  let entityId: string;

  const asOwner = (method: string, p: string, body?: unknown) =>
    call(app, method, `/org/${slug}${p}`, { cookie: owner.cookie, body });

  /** POSTs a response to the ACS as the browser would, from the IdP's auto-submitting form. */
  const post = (samlResponse: string, relayState?: string) =>
    fetch(`${app.url}/api/auth/sso/${slug}/acs`, {
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
    app = await startApp({ RATE_LIMIT_PER_MINUTE: "1000000", AUTH_RATE_LIMIT_PER_MINUTE: "1000000" });
    ({ owner, slug } = await ownerWithOrg(app, "SAML Org"));
    const put = await asOwner("PUT", "/sso", {
      type: "saml",
      enabled: true,
      emailDomain: DOMAIN,
      config: { entryPoint: "https://idp.saml.test/sso", idpCert: idp.cert, idpIssuer: IDP },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    ({ acsUrl, entityId } = put.body.sso);
  });
  afterAll(async () => {
    await app?.close();
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
    const put = await asOwner("PUT", "/sso", {
      type: "saml",
      enabled: true,
      emailDomain: DOMAIN,
      config: { metadataXml },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const start = await fetch(`${app.url}/api/auth/sso/${slug}`, { redirect: "manual" });
    expect(start.status).toBe(302);
    expect(start.headers.get("location")).toMatch(/^https:\/\/idp\.saml\.test\/from-metadata\?SAMLRequest=/);
    const email = `metadata-${Date.now()}@${DOMAIN}`;
    const answer = await post(signedResponse({ email }));
    expect(answer.status, await answer.clone().text()).toBe(302);
    expect(await emailOf(answer)).toBe(email);
  });
});
