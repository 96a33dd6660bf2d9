import * as client from "openid-client";
import type { Deps } from "../../../deps.ts";
import { UnauthorizedError } from "../../../errors.ts";
import { checkOutboundUrl } from "../../../lib/ssrf.ts";

/** What an org's OIDC settings hold (DESIGN §12). */
export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  scopes?: string[];
}

/** How long a discovered issuer's configuration is reused. */
const DISCOVERY_TTL_MS = 5 * 60_000;
const MAX_DISCOVERED = 1_000;
const discovered = new Map<string, { until: number; config: Promise<client.Configuration> }>();

/**
 * The issuer's configuration (its discovery document and keys), for this client: fetched once per
 * few minutes. An issuer on plain http is allowed only where private URLs are (local development
 * and tests: ALLOW_PRIVATE_WEBHOOK_URLS).
 */
export function issuerConfig(deps: Deps, settings: OidcSettings): Promise<client.Configuration> {
  const key = JSON.stringify([settings.issuer, settings.clientId, settings.clientSecret]);
  const now = Date.now();
  const known = discovered.get(key);
  if (known && known.until > now) return known.config;
  const insecure = deps.config.allowPrivateWebhookUrls && settings.issuer.startsWith("http://");
  const guarded = guardedFetch(deps);
  const config = client
    .discovery(new URL(settings.issuer), settings.clientId, settings.clientSecret, undefined, {
      timeout: 10,
      [client.customFetch]: guarded,
      ...(insecure ? { execute: [client.allowInsecureRequests] } : {}),
    })
    .then((discoveredConfig) => {
      // Every later request too: the token endpoint, the keys, userinfo.
      discoveredConfig[client.customFetch] = guarded;
      return discoveredConfig;
    })
    .catch((error: unknown) => {
      discovered.delete(key);
      deps.log.warn({ err: error, issuer: settings.issuer }, "sso: OIDC discovery failed");
      throw new UnauthorizedError("the identity provider could not be reached (OIDC discovery failed)");
    });
  if (discovered.size >= MAX_DISCOVERED) discovered.delete(discovered.keys().next().value as string);
  discovered.set(key, { until: now + DISCOVERY_TTL_MS, config });
  return config;
}

/**
 * `fetch` for the identity provider's endpoints, which an org admin chose: refused where the
 * address is private, loopback, link-local or metadata (unless ALLOW_PRIVATE_WEBHOOK_URLS), as
 * webhook URLs are. The name is resolved for the check and again by fetch, so a DNS answer that
 * changes in between is not caught (the webhook client checks at connect time; this one cannot).
 */
function guardedFetch(deps: Deps): client.CustomFetch {
  return async (url, options) => {
    const refused = await checkOutboundUrl(url, { allowPrivate: deps.config.allowPrivateWebhookUrls });
    if (refused) throw new Error(`refused to reach the identity provider: ${refused}`);
    return fetch(url, options as RequestInit);
  };
}

/** A login's secrets: state, nonce and the PKCE verifier, kept until its callback. */
export function newLoginSecrets() {
  return { state: client.randomState(), nonce: client.randomNonce(), codeVerifier: client.randomPKCECodeVerifier() };
}

export async function authorizationUrl(
  config: client.Configuration,
  settings: OidcSettings,
  redirectUri: string,
  secrets: { state: string; nonce: string; codeVerifier: string },
): Promise<string> {
  const scopes = new Set(["openid", "email", "profile", ...(settings.scopes ?? [])]);
  return client
    .buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: [...scopes].join(" "),
      code_challenge: await client.calculatePKCECodeChallenge(secrets.codeVerifier),
      code_challenge_method: "S256",
      state: secrets.state,
      nonce: secrets.nonce,
    })
    .toString();
}

/**
 * Redeems the callback's code (PKCE verifier, state and nonce checked; the ID token's signature,
 * issuer, audience and expiry checked by openid-client) and returns who signed in.
 */
export async function redeemCallback(
  config: client.Configuration,
  callbackUrl: URL,
  secrets: { state: string; nonce: string; codeVerifier: string },
): Promise<{ email: string; name: string | null }> {
  let claims: Record<string, unknown> | undefined;
  try {
    const tokens = await client.authorizationCodeGrant(config, callbackUrl, {
      pkceCodeVerifier: secrets.codeVerifier,
      expectedState: secrets.state,
      expectedNonce: secrets.nonce,
      idTokenExpected: true,
    });
    const idToken = tokens.claims();
    claims = idToken;
    // Providers that keep the scopes' claims out of the ID token (conforming to OIDC Core 5.4) give them at userinfo.
    if (idToken && typeof idToken.email !== "string") {
      claims = { ...(await client.fetchUserInfo(config, tokens.access_token, idToken.sub)), ...idToken };
    }
  } catch (error) {
    throw new UnauthorizedError(`single sign-on failed: ${(error as Error).message}`);
  }
  const email = typeof claims?.email === "string" ? claims.email.toLowerCase() : "";
  if (!email) throw new UnauthorizedError("single sign-on failed: the identity provider gave no e-mail");
  if (claims?.email_verified === false)
    throw new UnauthorizedError("single sign-on failed: the e-mail is not verified");
  const name = typeof claims?.name === "string" ? claims.name : null;
  return { email, name };
}
