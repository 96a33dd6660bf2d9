import type { Kysely } from "kysely";

/**
 * Identity hardening (issue 31): SCIM invites people outside the org's proven domain instead of
 * enrolling them, so an invitation can stand for a SCIM user (the membership id it will become,
 * the identity provider's externalId and display name, whether it is to start suspended); a
 * membership keeps the display name the identity provider sends (an account's own name is its
 * holder's); an SSO login remembers the account whose session started it (linking).
 */
export function identityConsent() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable("memberships").addColumn("display_name", "text").execute();
      for (const column of ["scim_member_id", "scim_external_id", "display_name", "member_status"]) {
        await db.schema.alterTable("invitations").addColumn(column, "text").execute();
      }
      await db.schema
        .createIndex("invitations_scim_member")
        .on("invitations")
        .columns(["org_id", "scim_member_id"])
        .execute();
      await db.schema.alterTable("sso_logins").addColumn("account_id", "text").execute();
    },
  };
}
