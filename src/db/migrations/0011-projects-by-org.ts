import { type Kysely, sql } from "kysely";

/**
 * An org's live projects in the order they are listed (`GET /org/{slug}/projects`, paged), so a
 * page of an org with thousands of projects reads that page and not the whole org.
 */
export function projectsByOrg() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createIndex("projects_live_by_org")
        .on("projects")
        .columns(["org_id", "created_at", "id"])
        .where(sql.ref("deleted_at"), "is", null)
        .execute();
    },
  };
}
