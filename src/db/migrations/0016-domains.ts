import { type Kysely, sql } from "kysely";

/**
 * Custom domains (DESIGN §10): a project's hostnames, proven by a DNS TXT record. A hostname is
 * active on one project at most (a partial unique index, both dialects); pending ones are
 * re-checked when `next_check_at` comes.
 */
export function domains() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("domains")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("project_id", "text", (c) => c.notNull())
        .addColumn("hostname", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("token", "text", (c) => c.notNull())
        .addColumn("attempts", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("next_check_at", "text")
        .addColumn("last_checked_at", "text")
        .addColumn("verified_at", "text")
        .addColumn("error", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("domains_project_hostname")
        .on("domains")
        .columns(["project_id", "hostname"])
        .unique()
        .execute();
      await sql`create unique index domains_active_hostname on domains (hostname) where status = 'active'`.execute(db);
      await db.schema.createIndex("domains_next_check").on("domains").columns(["status", "next_check_at"]).execute();
    },
  };
}
