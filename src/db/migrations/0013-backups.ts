import type { Kysely } from "kysely";

/**
 * Backups (DESIGN §9): one row per snapshot of a project's workspace. The snapshot itself lives
 * beside the workspace (a SQLite file under DATA_DIR/backups, or a PostgreSQL schema `bk_<id>`),
 * with hard links to the file bytes it lists. Listed newest first per project; auto backups are
 * found by expiry.
 */
export function backups() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("backups")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("project_id", "text", (c) => c.notNull())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("size_bytes", "bigint")
        .addColumn("template_version", "text", (c) => c.notNull())
        .addColumn("error", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("completed_at", "text")
        .addColumn("expires_at", "text")
        .addColumn("restored_at", "text")
        .execute();
      await db.schema.createIndex("backups_project").on("backups").columns(["project_id", "id"]).execute();
      await db.schema.createIndex("backups_expiry").on("backups").column("expires_at").execute();
    },
  };
}
