import type { Kysely } from "kysely";

/**
 * Single sign-on's memory (DESIGN §12): the accounts an org's identity provider made (through
 * SSO or SCIM), which its SSO may sign in again without a proven domain; and the SAML assertions
 * already used to sign in (one-time assertion ids), kept until they expire.
 */
export function ssoIdentities() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("sso_identities")
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("account_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
        .addColumn("created_at", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("sso_identities_pkey", ["org_id", "account_id"])
        .execute();
      await db.schema
        .createTable("sso_assertions")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("expires_at", "text", (c) => c.notNull())
        .execute();
    },
  };
}
