import type { Kysely } from "kysely";

/**
 * Tenant errors of requests without valid workspace credentials (DESIGN §10) are flagged
 * (`authenticated` 0; 1 for the rest, rows recorded before included) and kept apart, the newest
 * 20 per project: the index serves that trim and the 10,000 of the others.
 */
export function tenantErrorsAuthenticated() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .alterTable("tenant_errors")
        .addColumn("authenticated", "integer", (c) => c.notNull().defaultTo(1))
        .execute();
      await db.schema
        .createIndex("tenant_errors_project_authenticated")
        .on("tenant_errors")
        .columns(["project_id", "authenticated", "id"])
        .execute();
    },
  };
}
