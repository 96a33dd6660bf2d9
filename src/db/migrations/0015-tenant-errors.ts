import type { Kysely } from "kysely";

/**
 * Tenant errors (DESIGN §10): the workspace API's answers of status 400 and above, per project,
 * read newest first (ids sort by time) and kept 7 days, 10,000 per project at most.
 */
export function tenantErrors() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("tenant_errors")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("project_id", "text", (c) => c.notNull())
        .addColumn("at", "text", (c) => c.notNull())
        .addColumn("method", "text", (c) => c.notNull())
        .addColumn("path", "text", (c) => c.notNull())
        .addColumn("status", "integer", (c) => c.notNull())
        .addColumn("code", "text", (c) => c.notNull())
        .addColumn("message", "text", (c) => c.notNull())
        .addColumn("request_id", "text")
        .execute();
      await db.schema.createIndex("tenant_errors_project").on("tenant_errors").columns(["project_id", "id"]).execute();
      await db.schema.createIndex("tenant_errors_at").on("tenant_errors").column("at").execute();
    },
  };
}
