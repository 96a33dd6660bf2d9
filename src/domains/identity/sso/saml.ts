import { type CacheProvider, SAML, ValidateInResponseTo } from "@node-saml/node-saml";
import { DOMParser } from "@xmldom/xmldom";
import type { Deps } from "../../../deps.ts";
import { UnauthorizedError } from "../../../errors.ts";

/** What an org's SAML settings hold (DESIGN §12): the IdP's endpoint and certificate, or its metadata. */
export interface SamlSettings {
  entryPoint?: string;
  idpCert?: string;
  idpIssuer?: string;
  metadataXml?: string;
}

/** How long an AuthnRequest may wait for its response. */
const REQUEST_TTL_MS = 10 * 60_000;
/** Clock skew between this service and the identity provider that is tolerated. */
const CLOCK_SKEW_MS = 60_000;
const MD = "urn:oasis:names:tc:SAML:2.0:metadata";
const DS = "http://www.w3.org/2000/09/xmldsig#";

/** The IdP's sign-in endpoint (HTTP-Redirect binding) and signing certificates, from settings or metadata. */
export function idpOf(settings: SamlSettings): { entryPoint: string; certs: string[]; issuer?: string } {
  if (settings.metadataXml) {
    const doc = new DOMParser().parseFromString(settings.metadataXml, "text/xml");
    const services = Array.from(doc.getElementsByTagNameNS(MD, "SingleSignOnService"));
    const redirect =
      services.find((service) => service.getAttribute("Binding")?.endsWith("HTTP-Redirect")) ?? services[0];
    const certs = Array.from(doc.getElementsByTagNameNS(DS, "X509Certificate"))
      .map((node) => (node.textContent ?? "").replace(/\s+/g, ""))
      .filter(Boolean);
    const entity = doc.getElementsByTagNameNS(MD, "EntityDescriptor")[0];
    const entryPoint = redirect?.getAttribute("Location");
    if (!entryPoint || certs.length === 0)
      throw new UnauthorizedError("the SAML metadata names no sign-in endpoint or certificate");
    return { entryPoint, certs, issuer: entity?.getAttribute("entityID") ?? undefined };
  }
  if (!settings.entryPoint || !settings.idpCert) throw new UnauthorizedError("the SAML configuration is incomplete");
  return {
    entryPoint: settings.entryPoint,
    certs: [settings.idpCert],
    ...(settings.idpIssuer ? { issuer: settings.idpIssuer } : {}),
  };
}

/**
 * The AuthnRequest ids this service sent, kept in the database (`sso_logins`) so that a
 * response answering one (InResponseTo) is accepted by whichever process gets it, once.
 */
function requestCache(deps: Deps, orgId: string): CacheProvider {
  const key = (id: string) => `saml:${id}`;
  return {
    async saveAsync(id, value) {
      const now = deps.clock.now();
      await deps.db
        .insertInto("sso_logins")
        .values({
          state: key(id),
          org_id: orgId,
          nonce: value,
          code_verifier: "",
          return_to: "/",
          expires_at: new Date(now.getTime() + REQUEST_TTL_MS).toISOString(),
        })
        .onConflict((oc) => oc.column("state").doNothing())
        .execute();
      return { value, createdAt: now.getTime() };
    },
    async getAsync(id) {
      const row = await deps.db
        .selectFrom("sso_logins")
        .select(["nonce", "expires_at"])
        .where("state", "=", key(id))
        .where("org_id", "=", orgId)
        .executeTakeFirst();
      return row && row.expires_at > deps.clock.now().toISOString() ? row.nonce : null;
    },
    async removeAsync(id) {
      if (id === null) return null;
      await deps.db.deleteFrom("sso_logins").where("state", "=", key(id)).execute();
      return id;
    },
  };
}

export function samlClient(
  deps: Deps,
  orgId: string,
  settings: SamlSettings,
  urls: { acsUrl: string; entityId: string },
): SAML {
  const idp = idpOf(settings);
  return new SAML({
    callbackUrl: urls.acsUrl,
    entryPoint: idp.entryPoint,
    issuer: urls.entityId,
    audience: urls.entityId,
    idpCert: idp.certs,
    ...(idp.issuer ? { idpIssuer: idp.issuer } : {}),
    wantAssertionsSigned: true,
    wantAuthnResponseSigned: false,
    acceptedClockSkewMs: CLOCK_SKEW_MS,
    validateInResponseTo: ValidateInResponseTo.ifPresent,
    requestIdExpirationPeriodMs: REQUEST_TTL_MS,
    cacheProvider: requestCache(deps, orgId),
    disableRequestedAuthnContext: true,
    identifierFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
    signatureAlgorithm: "sha256",
  });
}

const EMAIL_ATTRIBUTES = [
  "email",
  "mail",
  "urn:oid:0.9.2342.19200300.100.1.3",
  "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
];

/**
 * Checks a POSTed SAMLResponse: the signature (of the assertion, by the IdP's certificate: node-saml
 * reads only what the signature covers, so wrapped or commented content cannot stand in), issuer,
 * audience, time window, InResponseTo when present, the response's Destination and the
 * assertion's Recipient (this ACS), and that the assertion is seen for the first time. Returns who
 * signed in.
 */
export async function acceptSamlResponse(
  deps: Deps,
  saml: SAML,
  samlResponse: string,
  acsUrl: string,
): Promise<{ email: string; name: string | null; assertionId: string; notOnOrAfter: string | null }> {
  let profile: Awaited<ReturnType<SAML["validatePostResponseAsync"]>>["profile"];
  try {
    ({ profile } = await saml.validatePostResponseAsync({ SAMLResponse: samlResponse }));
  } catch (error) {
    throw new UnauthorizedError(`single sign-on failed: ${(error as Error).message}`);
  }
  if (!profile) throw new UnauthorizedError("single sign-on failed: no assertion");
  const doc = new DOMParser().parseFromString(profile.getSamlResponseXml?.() ?? "", "text/xml");
  const destination = doc.documentElement?.getAttribute("Destination");
  if (destination && destination !== acsUrl) {
    throw new UnauthorizedError("single sign-on failed: the response is addressed to another service");
  }
  const assertion = (profile.getAssertion?.() as { Assertion?: Record<string, unknown> } | undefined)?.Assertion;
  const attributes = (assertion?.$ ?? {}) as { ID?: string };
  const recipients = JSON.stringify(assertion?.Subject ?? "").match(/"Recipient":"([^"]*)"/g) ?? [];
  if (recipients.some((recipient) => recipient !== `"Recipient":"${acsUrl}"`)) {
    throw new UnauthorizedError("single sign-on failed: the assertion is addressed to another service");
  }
  if (!attributes.ID) throw new UnauthorizedError("single sign-on failed: the assertion has no ID");
  const raw = EMAIL_ATTRIBUTES.map((name) => profile?.[name]).find((value) => typeof value === "string") as
    | string
    | undefined;
  const email = (raw ?? (profile.nameID?.includes("@") ? profile.nameID : "")).trim().toLowerCase();
  if (!email) throw new UnauthorizedError("single sign-on failed: the assertion gives no e-mail");
  const notOnOrAfter = JSON.stringify(assertion?.Conditions ?? "").match(/"NotOnOrAfter":"([^"]*)"/)?.[1] ?? null;
  const name = typeof profile.displayName === "string" ? profile.displayName : null;
  deps.log.debug({ assertionId: attributes.ID }, "sso: SAML assertion accepted");
  return { email, name, assertionId: attributes.ID, notOnOrAfter };
}
