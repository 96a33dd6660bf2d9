import type { Kysely } from "kysely";

/**
 * SCIM provisioning (DESIGN §12): a membership can be suspended (kept and listed, no access) and
 * carries the identity provider's `externalId`; an org has at most one SCIM token (its hash), and
 * the groups its identity provider made, each named after a role.
 */
export function scim() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .alterTable("memberships")
        .addColumn("status", "text", (c) => c.notNull().defaultTo("active"))
        .execute();
      await db.schema.alterTable("memberships").addColumn("scim_external_id", "text").execute();
      await db.schema
        .createTable("scim_tokens")
        .addColumn("org_id", "text", (c) => c.primaryKey())
        .addColumn("token_hash", "text", (c) => c.notNull().unique())
        .addColumn("created_by", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createTable("scim_groups")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("display_name", "text", (c) => c.notNull())
        .addColumn("external_id", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addUniqueConstraint("scim_groups_org_name", ["org_id", "display_name"])
        .execute();
    },
  };
}
