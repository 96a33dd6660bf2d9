import { SAML, ValidateInResponseTo } from "@node-saml/node-saml";
import { DOMParser } from "@xmldom/xmldom";

/** What checking a SAMLResponse needs: the identity provider's side and this service's. */
export interface SamlCheckInput {
  idp: { entryPoint: string; certs: string[]; issuer?: string };
  acsUrl: string;
  entityId: string;
  samlResponse: string;
}

/** Who signed in, from a response whose signature, audience, time window and addressing held. */
export interface SamlPerson {
  email: string;
  name: string | null;
  assertionId: string;
  notOnOrAfter: string | null;
  /** The AuthnRequest the response answers (SP-initiated), for the caller to check and spend. */
  inResponseTo: string | null;
}

/** Clock skew between this service and the identity provider that is tolerated. */
const CLOCK_SKEW_MS = 60_000;

const EMAIL_ATTRIBUTES = [
  "email",
  "mail",
  "urn:oid:0.9.2342.19200300.100.1.3",
  "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
];

/** A check that failed: its message is safe to show (it becomes the 401's). */
export class SamlRefusal extends Error {}

/**
 * Checks a POSTed SAMLResponse, with no I/O (it runs on a thread of its own: XML signature
 * checking is CPU-bound and, in node-saml's XPath dependency, superlinear in the element count):
 * the signature (of the assertion, by the IdP's certificate: node-saml reads only what the
 * signature covers, so wrapped or commented content cannot stand in), issuer, audience, time
 * window, the response's Destination and the assertion's Recipient (this ACS). InResponseTo is
 * returned, not checked: the requests this service made are in the database.
 */
export async function checkSamlResponse(input: SamlCheckInput): Promise<SamlPerson> {
  const saml = new SAML({
    callbackUrl: input.acsUrl,
    entryPoint: input.idp.entryPoint,
    issuer: input.entityId,
    audience: input.entityId,
    idpCert: input.idp.certs,
    ...(input.idp.issuer ? { idpIssuer: input.idp.issuer } : {}),
    wantAssertionsSigned: true,
    wantAuthnResponseSigned: false,
    acceptedClockSkewMs: CLOCK_SKEW_MS,
    validateInResponseTo: ValidateInResponseTo.never,
  });
  let profile: Awaited<ReturnType<SAML["validatePostResponseAsync"]>>["profile"];
  try {
    ({ profile } = await saml.validatePostResponseAsync({ SAMLResponse: input.samlResponse }));
  } catch (error) {
    throw new SamlRefusal((error as Error).message);
  }
  if (!profile) throw new SamlRefusal("no assertion");
  const doc = new DOMParser().parseFromString(profile.getSamlResponseXml?.() ?? "", "text/xml");
  const destination = doc.documentElement?.getAttribute("Destination");
  if (destination && destination !== input.acsUrl)
    throw new SamlRefusal("the response is addressed to another service");
  const assertion = (profile.getAssertion?.() as { Assertion?: Record<string, unknown> } | undefined)?.Assertion;
  const attributes = (assertion?.$ ?? {}) as { ID?: string };
  const subject = JSON.stringify(assertion?.Subject ?? "");
  const recipients = subject.match(/"Recipient":"([^"]*)"/g) ?? [];
  if (recipients.some((recipient) => recipient !== `"Recipient":"${input.acsUrl}"`)) {
    throw new SamlRefusal("the assertion is addressed to another service");
  }
  if (!attributes.ID) throw new SamlRefusal("the assertion has no ID");
  // The response's InResponseTo, else the (signed) subject confirmation's; both must agree.
  const answered = doc.documentElement?.getAttribute("InResponseTo") || null;
  const confirmed = [...subject.matchAll(/"InResponseTo":"([^"]*)"/g)].map((match) => match[1] as string);
  if (answered && confirmed.some((id) => id !== answered)) {
    throw new SamlRefusal("InResponseTo does not match the subject confirmation's");
  }
  const raw = EMAIL_ATTRIBUTES.map((name) => profile?.[name]).find((value) => typeof value === "string") as
    | string
    | undefined;
  const email = (raw ?? (profile.nameID?.includes("@") ? profile.nameID : "")).trim().toLowerCase();
  if (!email) throw new SamlRefusal("the assertion gives no e-mail");
  const notOnOrAfter = JSON.stringify(assertion?.Conditions ?? "").match(/"NotOnOrAfter":"([^"]*)"/)?.[1] ?? null;
  const name = typeof profile.displayName === "string" ? profile.displayName : null;
  return { email, name, assertionId: attributes.ID, notOnOrAfter, inResponseTo: answered ?? confirmed[0] ?? null };
}
