import type { Kysely } from "kysely";

/**
 * Single sign-on (DESIGN §12): an org's SSO configuration (OIDC or SAML; its e-mail domain and
 * the TXT token that proves it), and the logins under way (an OIDC login's state, nonce and PKCE
 * verifier, kept until its callback, for whichever process serves that).
 */
export function sso() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("sso_configs")
        .addColumn("org_id", "text", (c) => c.primaryKey())
        .addColumn("type", "text", (c) => c.notNull())
        .addColumn("enabled", "integer", (c) => c.notNull())
        .addColumn("email_domain", "text")
        .addColumn("default_role", "text", (c) => c.notNull())
        .addColumn("config", "text", (c) => c.notNull())
        .addColumn("domain_token", "text", (c) => c.notNull())
        .addColumn("domain_verified_at", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("sso_configs_domain").on("sso_configs").columns(["email_domain"]).execute();
      await db.schema
        .createTable("sso_logins")
        .addColumn("state", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("nonce", "text", (c) => c.notNull())
        .addColumn("code_verifier", "text", (c) => c.notNull())
        .addColumn("return_to", "text", (c) => c.notNull())
        .addColumn("expires_at", "text", (c) => c.notNull())
        .execute();
    },
  };
}
