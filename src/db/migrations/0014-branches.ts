import type { Kysely } from "kysely";

/**
 * Branches (DESIGN §9): a copy of a project's workspace with a workspace, an id and an admin
 * token of its own. Names are unique per project; a project's branches are listed newest first.
 */
export function branches() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("branches")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("pr_number", "integer")
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("admin_token_hash", "text", (c) => c.notNull())
        .addColumn("source_timestamp", "text", (c) => c.notNull())
        .addColumn("error", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("branches_name").on("branches").columns(["project_id", "name"]).unique().execute();
    },
  };
}
