import type { z } from "@hono/zod-openapi";
import type { Selectable } from "kysely";
import { type Db, isUniqueViolation } from "../../../db/database.ts";
import type { SsoConfigsTable } from "../../../db/schema.ts";
import type { Deps } from "../../../deps.ts";
import { ConflictError, ForbiddenError, NotFoundError, UnauthorizedError, ValidationError } from "../../../errors.ts";
import { newId } from "../../../lib/ids.ts";
import { isMasked, maskSecret } from "../../../lib/mask.ts";
import { checkOutboundUrl } from "../../../lib/ssrf.ts";
import { randomToken, sha256Hex } from "../../../lib/tokens.ts";
import { recordAudit, recordAuditAs } from "../../audit/service.ts";
import type { OrgCtx } from "../../context.ts";
import { checkChallenge } from "../../domains/dns.ts";
import { authorize, inOrgTransaction } from "../../orgs/access.ts";
import { createIdentityAccount, rememberIdentity } from "../accounts.ts";
import { authorizationUrl, issuerConfig, newLoginSecrets, type OidcSettings, redeemCallback } from "./oidc.ts";
import { acceptSamlResponse, type SamlSettings, samlClient } from "./saml.ts";
import type { SsoConfigSchema, SsoInput } from "./schemas.ts";

type SsoRow = Selectable<SsoConfigsTable>;
type SsoConfig = z.infer<typeof SsoConfigSchema>;

/** The TXT record name that proves an e-mail domain for SSO. */
export const SSO_CHALLENGE_PREFIX = "_plinth-sso";
/** Config fields that are secrets: masked on read, kept when sent back masked. */
const SECRET_FIELDS = ["clientSecret"];
/**
 * The settings that say who the identity provider is. Changing any of them is changing whom the
 * org trusts to vouch for its people: the domain proof and every account link start over.
 */
const IDENTITY_FIELDS = {
  oidc: ["issuer", "clientId"],
  saml: ["entryPoint", "idpCert", "idpIssuer", "metadataXml"],
} as const;

/** Who the identity provider of these settings is (compared, never shown). */
function identityOf(type: "oidc" | "saml", settings: Record<string, unknown>): string {
  return JSON.stringify([type, ...IDENTITY_FIELDS[type].map((field) => settings[field] ?? null)]);
}

/** The org's IdP settings, as stored: sealed, for they hold the client secret (see SecretBox). */
const sealContext = (orgId: string) => `sso:${orgId}`;

function sealSettings(deps: Pick<Deps, "secrets">, orgId: string, settings: Record<string, unknown>): string {
  return deps.secrets.sealJson(settings, sealContext(orgId));
}

/** The org's IdP settings, opened. */
export function settingsOf<T = Record<string, unknown>>(deps: Pick<Deps, "secrets">, row: SsoRow): T {
  return deps.secrets.openJson<T>(row.config, sealContext(row.org_id), {} as T);
}

/** Where this deployment's SSO endpoints for org `slug` are. */
export function ssoUrls(deps: Pick<Deps, "config">, slug: string) {
  const base = `${deps.config.publicUrl}/api/auth/sso/${encodeURIComponent(slug)}`;
  return {
    loginUrl: base,
    redirectUri: `${base}/callback`,
    acsUrl: `${base}/acs`,
    entityId: `${base}/metadata`,
    metadataUrl: `${base}/metadata`,
  };
}

export function toSsoConfig(deps: Pick<Deps, "config" | "secrets">, slug: string, row: SsoRow): SsoConfig {
  const config = settingsOf(deps, row);
  const masked = Object.fromEntries(
    Object.entries(config).map(([key, value]) => [key, SECRET_FIELDS.includes(key) ? maskSecret(value) : value]),
  );
  return {
    type: row.type as "oidc" | "saml",
    enabled: Boolean(row.enabled),
    emailDomain: row.email_domain,
    defaultRole: row.default_role as SsoConfig["defaultRole"],
    config: masked,
    ...ssoUrls(deps, slug),
    domainVerification: row.email_domain
      ? {
          name: `${SSO_CHALLENGE_PREFIX}.${row.email_domain}`,
          value: `plinth-sso=${row.domain_token}`,
          verifiedAt: row.domain_verified_at,
        }
      : null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

async function findSso(deps: Deps, orgId: string): Promise<SsoRow | undefined> {
  return deps.db.selectFrom("sso_configs").selectAll().where("org_id", "=", orgId).executeTakeFirst();
}

export async function getSso({ ctx }: { ctx: OrgCtx }): Promise<{ sso: SsoConfig | null }> {
  authorize(ctx, "sso:manage");
  const row = await findSso(ctx.deps, ctx.org.id);
  return { sso: row ? toSsoConfig(ctx.deps, ctx.org.slug, row) : null };
}

const text = (value: unknown) => typeof value === "string" && value.trim() !== "";

/** The IdP settings of `type`, checked (422 naming `config.<field>`); masked secrets keep the stored ones. */
async function checkedConfig(
  deps: Deps,
  type: "oidc" | "saml",
  input: Record<string, unknown>,
  stored: Record<string, unknown>,
  enabled: boolean,
): Promise<Record<string, unknown>> {
  const config: Record<string, unknown> = { ...input };
  for (const field of SECRET_FIELDS) if (isMasked(config[field])) config[field] = stored[field];
  const issues: { path: string; message: string }[] = [];
  const need = (field: string) => {
    if (!text(config[field])) issues.push({ path: `config.${field}`, message: "is required" });
  };
  if (type === "oidc") {
    need("issuer");
    need("clientId");
    need("clientSecret");
    if (text(config.issuer)) {
      const refused = await checkOutboundUrl(String(config.issuer), {
        allowPrivate: deps.config.allowPrivateWebhookUrls,
      });
      if (refused) issues.push({ path: "config.issuer", message: refused });
      else if (!String(config.issuer).startsWith("https://") && !deps.config.allowPrivateWebhookUrls) {
        issues.push({ path: "config.issuer", message: "must be an https URL" });
      }
    }
    if (config.scopes !== undefined && !(Array.isArray(config.scopes) && config.scopes.every(text))) {
      issues.push({ path: "config.scopes", message: "must be a list of scope names" });
    }
  } else if (!text(config.metadataXml)) {
    need("entryPoint");
    need("idpCert");
    if (text(config.entryPoint) && !/^https?:\/\//.test(String(config.entryPoint))) {
      issues.push({ path: "config.entryPoint", message: "must be an http(s) URL" });
    }
  }
  // A disabled configuration may be saved half-done; an enabled one must work.
  const blocking = enabled ? issues : issues.filter((issue) => !issue.message.startsWith("is required"));
  if (blocking.length > 0) throw new ValidationError(blocking);
  for (const [key, value] of Object.entries(config)) {
    if (JSON.stringify(value)?.length > 100_000)
      throw new ValidationError([{ path: `config.${key}`, message: "is too large" }]);
  }
  return config;
}

/**
 * Sets the org's SSO (one per org). A new e-mail domain, or a new identity provider (another
 * type, issuer, client, certificate, entry point or metadata), must be proven again, under a new
 * TXT value, and forgets every account linked to the old provider. Re-pointing an enabled SSO is
 * for a signed-in owner only: an admin or a key could otherwise have an identity provider of
 * their own vouch for the owner.
 */
export async function putSso({
  ctx,
  input,
}: {
  ctx: OrgCtx;
  input: z.infer<typeof SsoInput>;
}): Promise<{ sso: SsoConfig }> {
  authorize(ctx, "sso:manage");
  const { deps } = ctx;
  const current = await findSso(deps, ctx.org.id);
  const stored = current ? settingsOf(deps, current) : {};
  const proposed = input.config ?? (current?.type === input.type ? stored : {});
  const identityChanged =
    current !== undefined && identityOf(current.type as "oidc" | "saml", stored) !== identityOf(input.type, proposed);
  if (identityChanged && current?.enabled && (ctx.principal.type !== "account" || ctx.role !== "owner")) {
    throw new ForbiddenError(
      "changing the identity provider of an enabled single sign-on needs a signed-in owner (API keys and admins may not): it decides who may sign in as the org's members",
    );
  }
  const enabled = input.enabled ?? (current ? Boolean(current.enabled) : true);
  const config = await checkedConfig(deps, input.type, proposed, current?.type === input.type ? stored : {}, enabled);
  const emailDomain = input.emailDomain === undefined ? (current?.email_domain ?? null) : input.emailDomain;
  const proofKept = current !== undefined && !identityChanged && emailDomain === current.email_domain;
  const forgetLinks = current !== undefined && !proofKept;
  const now = deps.clock.now().toISOString();
  const row: SsoRow = {
    org_id: ctx.org.id,
    type: input.type,
    enabled: enabled ? 1 : 0,
    email_domain: emailDomain,
    default_role: input.defaultRole ?? current?.default_role ?? "viewer",
    config: sealSettings(deps, ctx.org.id, config),
    domain_token: proofKept ? current.domain_token : randomToken("", 18),
    domain_verified_at: proofKept ? current.domain_verified_at : null,
    created_at: current?.created_at ?? now,
    updated_at: now,
  };
  await inOrgTransaction(ctx, async (trx) => {
    const { org_id: _, ...changes } = row;
    await trx
      .insertInto("sso_configs")
      .values(row)
      .onConflict((oc) => oc.column("org_id").doUpdateSet(changes))
      .execute();
    // Links were to the old provider, or for the old domain's people.
    if (forgetLinks) await trx.deleteFrom("sso_identities").where("org_id", "=", ctx.org.id).execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: current ? "sso.updated" : "sso.created",
      target: { type: "sso", id: ctx.org.id },
      data: { type: row.type, enabled, emailDomain, defaultRole: row.default_role, identityChanged },
    });
  });
  return { sso: toSsoConfig(deps, ctx.org.slug, row) };
}

export async function deleteSso({ ctx }: { ctx: OrgCtx }): Promise<{ ok: true }> {
  authorize(ctx, "sso:manage");
  await inOrgTransaction(ctx, async (trx) => {
    const removed = await trx.deleteFrom("sso_configs").where("org_id", "=", ctx.org.id).executeTakeFirst();
    if (Number(removed.numDeletedRows) === 0) throw new NotFoundError("the org has no SSO configuration");
    await trx.deleteFrom("sso_identities").where("org_id", "=", ctx.org.id).execute();
    await recordAudit(trx, ctx, { orgId: ctx.org.id, action: "sso.deleted", target: { type: "sso", id: ctx.org.id } });
  });
  return { ok: true };
}

/**
 * Looks the domain's `_plinth-sso` TXT record up now; once found, password sign-in for the domain
 * is refused (owners excepted), and links other orgs' identity providers hold to accounts of the
 * domain are dropped: the domain's people are this org's to vouch for now.
 */
export async function verifySsoDomain({ ctx }: { ctx: OrgCtx }): Promise<{ sso: SsoConfig }> {
  authorize(ctx, "sso:manage");
  const { deps } = ctx;
  const row = await findSso(deps, ctx.org.id);
  if (!row) throw new NotFoundError("the org has no SSO configuration");
  if (!row.email_domain) throw new ConflictError("set emailDomain first");
  if (row.domain_verified_at) return { sso: toSsoConfig(deps, ctx.org.slug, row) };
  const name = `${SSO_CHALLENGE_PREFIX}.${row.email_domain}`;
  const result = await checkChallenge(deps.config, name, `plinth-sso=${row.domain_token}`);
  if (!result.ok) throw new ConflictError(`the domain is not verified: ${result.error}`);
  const claimed = await deps.db
    .selectFrom("sso_configs")
    .select("org_id")
    .where("email_domain", "=", row.email_domain)
    .where("domain_verified_at", "is not", null)
    .where("org_id", "!=", ctx.org.id)
    .executeTakeFirst();
  if (claimed) throw new ConflictError(`${row.email_domain} is verified by another organization`);
  const now = deps.clock.now().toISOString();
  await inOrgTransaction(ctx, async (trx) => {
    await trx
      .updateTable("sso_configs")
      .set({ domain_verified_at: now, updated_at: now })
      .where("org_id", "=", ctx.org.id)
      .where("domain_token", "=", row.domain_token)
      .execute();
    await trx
      .deleteFrom("sso_identities")
      .where("org_id", "!=", ctx.org.id)
      .where("account_id", "in", (eb) =>
        eb.selectFrom("users").select("id").where("email", "like", `%@${row.email_domain}`),
      )
      .execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "sso.domain_verified",
      target: { type: "sso", id: ctx.org.id },
      data: { emailDomain: row.email_domain },
    });
  });
  return { sso: toSsoConfig(deps, ctx.org.slug, { ...row, domain_verified_at: now, updated_at: now }) };
}

/** The enabled SSO whose proven e-mail domain is the e-mail's, with its org's slug. */
export async function ssoForEmail(deps: Deps, email: string) {
  const domain = email.slice(email.lastIndexOf("@") + 1).toLowerCase();
  if (!domain) return undefined;
  return deps.db
    .selectFrom("sso_configs")
    .innerJoin("orgs", "orgs.id", "sso_configs.org_id")
    .select(["orgs.id as org_id", "orgs.slug"])
    .where("sso_configs.email_domain", "=", domain)
    .where("sso_configs.enabled", "=", 1)
    .where("sso_configs.domain_verified_at", "is not", null)
    .where("orgs.deleted_at", "is", null)
    .executeTakeFirst();
}

/** `POST /api/auth/sso/lookup`: where a person of this e-mail signs in (404 unless its domain is an enabled, proven SSO's). */
export async function lookupSso(deps: Deps, email: string): Promise<{ url: string }> {
  const found = await ssoForEmail(deps, email);
  if (!found) throw new NotFoundError("no single sign-on for this e-mail's domain");
  return { url: ssoUrls(deps, found.slug).loginUrl };
}

/** Whether the org's identity provider is linked to the account (see `sso_identities`). */
async function isLinked(db: Db, orgId: string, accountId: string): Promise<boolean> {
  const link = await db
    .selectFrom("sso_identities")
    .select("account_id")
    .where("org_id", "=", orgId)
    .where("account_id", "=", accountId)
    .executeTakeFirst();
  return link !== undefined;
}

/** Roles whose accounts SSO signs in only once they linked it themselves (see `joinBySso`). */
const GUARDED_ROLES = ["owner", "admin"];

/**
 * Whether password sign-in is refused for `email`: its domain is an enabled SSO's, proven, and
 * the account is not an owner of that org (owners keep their password: the break-glass) nor an
 * admin who has not linked the SSO yet (SSO would refuse them until they do, from a password
 * session: see `joinBySso`).
 */
export async function passwordSignInRefused(deps: Deps, email: string): Promise<{ slug: string } | null> {
  const found = await ssoForEmail(deps, email);
  if (!found) return null;
  const member = await deps.db
    .selectFrom("memberships")
    .innerJoin("users", "users.id", "memberships.account_id")
    .select(["memberships.role", "users.id as account_id"])
    .where("memberships.org_id", "=", found.org_id)
    .where("users.email", "=", email.toLowerCase())
    .executeTakeFirst();
  if (member?.role === "owner") return null;
  if (member?.role === "admin" && !(await isLinked(deps.db, found.org_id, member.account_id))) return null;
  return { slug: found.slug };
}

/** How long an OIDC login may take, from the redirect to the callback. */
const LOGIN_TTL_MS = 10 * 60_000;

/**
 * A return path on this service: `value` resolved against PUBLIC_URL must keep its origin (and not
 * start `//`, which a browser reads as another host). Anything else, and any whitespace, control
 * character or backslash (which browsers drop or read as `/`), is `/`.
 */
export function safeReturnPath(publicUrl: string, value: string | undefined): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (value === undefined || !value.startsWith("/") || /[\s\u0000-\u001f\u007f-\u009f\\]/.test(value)) return "/";
  let url: URL;
  try {
    url = new URL(value, publicUrl);
  } catch {
    return "/";
  }
  const path = `${url.pathname}${url.search}${url.hash}`;
  if (url.origin !== new URL(publicUrl).origin || path.startsWith("//")) return "/";
  return path.slice(0, 2048);
}

/** The SSO of the live org `slug` (404 without one); `enabled`: only an enabled one. */
async function ssoOfSlug(deps: Deps, slug: string, { enabled }: { enabled: boolean }): Promise<SsoRow> {
  let query = deps.db
    .selectFrom("sso_configs")
    .innerJoin("orgs", "orgs.id", "sso_configs.org_id")
    .selectAll("sso_configs")
    .where("orgs.slug", "=", slug)
    .where("orgs.deleted_at", "is", null);
  if (enabled) query = query.where("sso_configs.enabled", "=", 1);
  const row = await query.executeTakeFirst();
  if (!row) throw new NotFoundError("this organization has no single sign-on");
  return row;
}

const enabledSso = (deps: Deps, slug: string) => ssoOfSlug(deps, slug, { enabled: true });

/**
 * What binds an OIDC login to the browser that started it: a hash of its state, kept in a
 * short-lived cookie, so a callback carried to another browser (login CSRF) is refused.
 */
export function browserBindingOf(state: string): string {
  return sha256Hex(`sso-login:${state}`);
}

/** A login's start: where to send the browser, and (OIDC) the value of its binding cookie. */
export interface SsoLoginStart {
  url: string;
  binding: string | null;
}

/**
 * `GET /api/auth/sso/{orgSlug}`: where to send the browser (the IdP), the login's secrets kept
 * until its callback, with the account whose session started it (`startedBy`), if any.
 */
export async function startSsoLogin(
  deps: Deps,
  slug: string,
  returnTo: string | undefined,
  startedBy: string | null,
): Promise<SsoLoginStart> {
  const row = await enabledSso(deps, slug);
  if (row.type === "saml") return { url: await startSamlLogin(deps, slug, row, returnTo, startedBy), binding: null };
  const settings = settingsOf<OidcSettings>(deps, row);
  const config = await issuerConfig(deps, settings);
  const secrets = newLoginSecrets();
  const now = deps.clock.now();
  await deps.db.deleteFrom("sso_logins").where("expires_at", "<", now.toISOString()).execute();
  await deps.db
    .insertInto("sso_logins")
    .values({
      state: secrets.state,
      org_id: row.org_id,
      nonce: secrets.nonce,
      code_verifier: secrets.codeVerifier,
      return_to: safeReturnPath(deps.config.publicUrl, returnTo),
      expires_at: new Date(now.getTime() + LOGIN_TTL_MS).toISOString(),
      account_id: startedBy,
    })
    .execute();
  return {
    url: await authorizationUrl(config, settings, ssoUrls(deps, slug).redirectUri, secrets),
    binding: browserBindingOf(secrets.state),
  };
}

/**
 * The OIDC callback: it must come to the browser that started the login (`binding`, its cookie);
 * the login's state is taken (once), the code redeemed and the ID token checked; then
 * `joinBySso`. Returns the account and where to send the browser.
 */
export async function completeSsoLogin(
  deps: Deps,
  slug: string,
  callbackUrl: URL,
  binding: string | undefined,
): Promise<{ accountId: string; returnTo: string }> {
  const row = await enabledSso(deps, slug);
  const state = callbackUrl.searchParams.get("state") ?? "";
  if (!binding || binding !== browserBindingOf(state)) {
    throw new UnauthorizedError(
      "single sign-on failed: this browser did not start this sign-in (start again from the sign-in page)",
    );
  }
  const login = await deps.db
    .deleteFrom("sso_logins")
    .where("state", "=", state)
    .where("org_id", "=", row.org_id)
    .returningAll()
    .executeTakeFirst();
  if (!login || login.expires_at <= deps.clock.now().toISOString()) {
    throw new UnauthorizedError("single sign-on failed: unknown or expired login (start again)");
  }
  const settings = settingsOf<OidcSettings>(deps, row);
  const config = await issuerConfig(deps, settings);
  const person = await redeemCallback(config, callbackUrl, {
    state: login.state,
    nonce: login.nonce,
    codeVerifier: login.code_verifier,
  });
  const accountId = await joinBySso(deps, row, person, login.account_id);
  return { accountId, returnTo: login.return_to };
}

/** 401 unless the e-mail is in the org's e-mail domain, and the org has proven that domain. */
function assertProvenAddress(sso: SsoRow, email: string): void {
  if (sso.email_domain && !email.endsWith(`@${sso.email_domain}`)) {
    throw new UnauthorizedError(`single sign-on failed: ${email} is not an address of ${sso.email_domain}`);
  }
  if (!sso.email_domain || !sso.domain_verified_at) {
    throw new UnauthorizedError(
      "single sign-on failed: this e-mail's domain is not verified for this organization (an admin sets emailDomain and proves it with POST /api/org/{slug}/sso/verify-domain)",
    );
  }
}

/**
 * The account of the e-mail as a member of the org. SSO vouches only for addresses of the
 * domain the org has proven (it holds that domain's DNS, and so its mail): otherwise any org's
 * identity provider could assert anyone's address and take, or squat, their account. An account
 * of that domain is made when there is none, else linked; but an existing owner or admin of the
 * org is signed in only once linked, and links only from a login its own session started (a new
 * identity provider forgets every link), so re-pointing SSO cannot hand their account over. A
 * suspended member is refused.
 */
async function joinBySso(
  deps: Deps,
  sso: SsoRow,
  person: { email: string; name: string | null },
  startedBy: string | null,
): Promise<string> {
  assertProvenAddress(sso, person.email);
  const orgId = sso.org_id;
  const role = sso.default_role;
  const now = deps.clock.now();
  return deps.db.transaction().execute(async (trx) => {
    let account = await trx.selectFrom("users").select("id").where("email", "=", person.email).executeTakeFirst();
    const membership = account
      ? await trx
          .selectFrom("memberships")
          .select(["id", "status", "role"])
          .where("org_id", "=", orgId)
          .where("account_id", "=", account.id)
          .executeTakeFirst()
      : undefined;
    if (membership?.status === "suspended") {
      throw new UnauthorizedError("single sign-on failed: your membership of this organization is suspended");
    }
    if (account && !(await isLinked(trx, orgId, account.id))) {
      if (membership && GUARDED_ROLES.includes(membership.role) && startedBy !== account.id) {
        throw new UnauthorizedError(
          `single sign-on failed: an ${membership.role} of this organization links single sign-on first: sign in with your password, then open this sign-in page again`,
        );
      }
      await rememberIdentity(trx, deps, orgId, account.id);
    }
    if (!account) {
      // The identity provider vouched for an address of the org's proven domain.
      const name = person.name ?? person.email.split("@")[0] ?? person.email;
      account = {
        id: await createIdentityAccount(trx, deps, orgId, { email: person.email, name, emailVerified: true }),
      };
    }
    if (!membership) {
      const id = newId("mem", now);
      await trx
        .insertInto("memberships")
        .values({
          id,
          org_id: orgId,
          account_id: account.id,
          role,
          created_at: now.toISOString(),
          updated_at: now.toISOString(),
        })
        .execute();
      await recordAuditAs(trx, deps, { type: "account", id: account.id, email: person.email }, null, {
        orgId,
        action: "member.joined_by_sso",
        target: { type: "member", id },
        data: { email: person.email, role },
      });
    }
    return account.id;
  });
}

/**
 * SAML, SP-initiated: an AuthnRequest by the HTTP-Redirect binding; RelayState names the login,
 * kept here with its return path and the account whose session started it.
 */
async function startSamlLogin(
  deps: Deps,
  slug: string,
  row: SsoRow,
  returnTo: string | undefined,
  startedBy: string | null,
): Promise<string> {
  const saml = samlClient(deps, row.org_id, settingsOf<SamlSettings>(deps, row), ssoUrls(deps, slug));
  const relayState = randomToken("", 18);
  const now = deps.clock.now();
  await deps.db.deleteFrom("sso_logins").where("expires_at", "<", now.toISOString()).execute();
  await deps.db
    .insertInto("sso_logins")
    .values({
      state: `relay:${relayState}`,
      org_id: row.org_id,
      nonce: "",
      code_verifier: "",
      return_to: safeReturnPath(deps.config.publicUrl, returnTo),
      expires_at: new Date(now.getTime() + LOGIN_TTL_MS).toISOString(),
      account_id: startedBy,
    })
    .execute();
  return saml.getAuthorizeUrlAsync(relayState, undefined, {});
}

/**
 * The SAML ACS (HTTP-POST binding), SP- or IdP-initiated: the response is checked
 * (`acceptSamlResponse`: size first, then off this thread), its assertion may be used once; then
 * as OIDC, `joinBySso`. RelayState leads back only to a return path this service stored (an
 * IdP's own RelayState leads to `/`).
 */
export async function completeSamlLogin(
  deps: Deps,
  slug: string,
  form: { SAMLResponse?: string; RelayState?: string },
): Promise<{ accountId: string; returnTo: string }> {
  const row = await enabledSso(deps, slug);
  if (row.type !== "saml") throw new NotFoundError("this organization does not sign in with SAML");
  if (!form.SAMLResponse) throw new UnauthorizedError("single sign-on failed: no SAMLResponse");
  const urls = ssoUrls(deps, slug);
  const person = await acceptSamlResponse(
    deps,
    row.org_id,
    settingsOf<SamlSettings>(deps, row),
    urls,
    form.SAMLResponse,
  );
  const now = deps.clock.now();
  const kept = new Date(Math.max(now.getTime() + LOGIN_TTL_MS, Date.parse(person.notOnOrAfter ?? "") || 0));
  try {
    await deps.db.deleteFrom("sso_assertions").where("expires_at", "<", now.toISOString()).execute();
    await deps.db
      .insertInto("sso_assertions")
      .values({ id: `${row.org_id} ${person.assertionId}`, org_id: row.org_id, expires_at: kept.toISOString() })
      .execute();
  } catch (error) {
    if (isUniqueViolation(error)) throw new UnauthorizedError("single sign-on failed: this assertion was used already");
    throw error;
  }
  const relay = form.RelayState
    ? await deps.db
        .deleteFrom("sso_logins")
        .where("state", "=", `relay:${form.RelayState}`)
        .where("org_id", "=", row.org_id)
        .returning(["return_to", "account_id"])
        .executeTakeFirst()
    : undefined;
  const accountId = await joinBySso(deps, row, person, relay?.account_id ?? null);
  return { accountId, returnTo: relay?.return_to ?? "/" };
}

/** This service provider's SAML metadata (entity id, ACS), for the identity provider's admin. */
export async function samlMetadata(deps: Deps, slug: string): Promise<string> {
  // Enabled or not: the identity provider's admin needs it before the first sign-in.
  const row = await ssoOfSlug(deps, slug, { enabled: false });
  if (row.type !== "saml") throw new NotFoundError("this organization does not sign in with SAML");
  return samlClient(
    deps,
    row.org_id,
    settingsOf<SamlSettings>(deps, row),
    ssoUrls(deps, slug),
  ).generateServiceProviderMetadata(null, null);
}

/** Seals SSO settings stored unsealed or under a previous key (start-up; see SecretBox). */
export async function resealSsoSecrets(deps: Deps): Promise<void> {
  const rows = await deps.db.selectFrom("sso_configs").selectAll().execute();
  for (const row of rows) {
    if (!deps.secrets.needsResealing(row.config)) continue;
    // Only if unchanged since read: a concurrent PUT has sealed its own value.
    await deps.db
      .updateTable("sso_configs")
      .set({ config: sealSettings(deps, row.org_id, settingsOf(deps, row)) })
      .where("org_id", "=", row.org_id)
      .where("config", "=", row.config)
      .execute();
  }
}
