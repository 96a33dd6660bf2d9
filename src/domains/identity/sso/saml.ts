import { type CacheProvider, SAML, ValidateInResponseTo } from "@node-saml/node-saml";
import { DOMParser } from "@xmldom/xmldom";
import type { Deps } from "../../../deps.ts";
import { PayloadTooLargeError, UnauthorizedError, UnavailableError } from "../../../errors.ts";
import { sibling, ThreadBusyError, ThreadRefusal, ThreadTimeoutError, ThreadWorker } from "../../../lib/threads.ts";
import type { SamlCheckInput, SamlPerson } from "./saml-check.ts";

/** What an org's SAML settings hold (DESIGN §12): the IdP's endpoint and certificate, or its metadata. */
export interface SamlSettings {
  entryPoint?: string;
  idpCert?: string;
  idpIssuer?: string;
  metadataXml?: string;
}

/** How long an AuthnRequest may wait for its response. */
const REQUEST_TTL_MS = 10 * 60_000;
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

/** node-saml for what this service sends: AuthnRequests (their ids kept, see `requestCache`) and its metadata. */
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
    validateInResponseTo: ValidateInResponseTo.ifPresent,
    requestIdExpirationPeriodMs: REQUEST_TTL_MS,
    cacheProvider: requestCache(deps, orgId),
    disableRequestedAuthnContext: true,
    identifierFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
    signatureAlgorithm: "sha256",
  });
}

/** The largest SAMLResponse taken, decoded: a real one is a few KB (Entra's with many groups, tens). */
export const MAX_SAML_RESPONSE_BYTES = 128 * 1024;
/** The most elements a SAMLResponse may hold: node-saml's checks cost the square of it. */
export const MAX_SAML_ELEMENTS = 1_000;

/** Checks run one at a time on a thread of their own, each for at most 5 s (see `checkSamlResponse`). */
const checker = new ThreadWorker<SamlCheckInput, SamlPerson>(sibling(import.meta.url, "saml-thread-entry"), "saml", {
  timeoutMs: 5_000,
  maxWaiting: 32,
});

/**
 * Refuses, within a look at its bytes, a response no identity provider sends: over
 * MAX_SAML_RESPONSE_BYTES decoded, or over MAX_SAML_ELEMENTS elements (the start tags counted).
 */
function assertSamlResponseSize(samlResponse: string): void {
  if (samlResponse.length > Math.ceil((MAX_SAML_RESPONSE_BYTES * 4) / 3) + 4) {
    throw new PayloadTooLargeError(`the SAMLResponse is over ${MAX_SAML_RESPONSE_BYTES} bytes`);
  }
  const xml = Buffer.from(samlResponse, "base64");
  let elements = 0;
  for (let at = xml.indexOf(LT); at !== -1; at = xml.indexOf(LT, at + 1)) {
    if (startsName(xml[at + 1]) && ++elements > MAX_SAML_ELEMENTS) {
      throw new PayloadTooLargeError(`the SAMLResponse holds more than ${MAX_SAML_ELEMENTS} elements`);
    }
  }
}

const LT = 0x3c;

/** Whether a byte after `<` starts an element's name (not `/`, `!` or `?`: an end tag, a comment, a declaration). */
function startsName(byte: number | undefined): boolean {
  if (byte === undefined) return false;
  const letter = byte | 0x20;
  return (letter >= 0x61 && letter <= 0x7a) || byte === 0x5f || byte === 0x3a || byte >= 0x80;
}

/**
 * Checks a POSTed SAMLResponse (`checkSamlResponse`, on the SAML thread) and, when it answers an
 * AuthnRequest, that this service sent that request, unanswered until now (it is spent here).
 * Returns who signed in. Whether the assertion was used before is the caller's to check.
 */
export async function acceptSamlResponse(
  deps: Deps,
  orgId: string,
  settings: SamlSettings,
  urls: { acsUrl: string; entityId: string },
  samlResponse: string,
): Promise<SamlPerson> {
  assertSamlResponseSize(samlResponse);
  let person: SamlPerson;
  try {
    person = await checker.run({ idp: idpOf(settings), ...urls, samlResponse });
  } catch (error) {
    if (error instanceof ThreadBusyError) throw new UnavailableError("single sign-on is busy: try again shortly");
    if (error instanceof ThreadRefusal) throw new UnauthorizedError(`single sign-on failed: ${error.message}`);
    if (error instanceof ThreadTimeoutError)
      throw new UnauthorizedError("single sign-on failed: the response took too long to check");
    throw error;
  }
  if (person.inResponseTo) {
    const cache = requestCache(deps, orgId);
    const sent = await cache.getAsync(person.inResponseTo);
    await cache.removeAsync(person.inResponseTo);
    if (!sent) throw new UnauthorizedError("single sign-on failed: InResponseTo is not valid");
  }
  deps.log.debug({ assertionId: person.assertionId }, "sso: SAML assertion accepted");
  return person;
}
