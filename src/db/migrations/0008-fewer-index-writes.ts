import type { Kysely } from "kysely";

/**
 * `webhook_deliveries_created` served only the retention job, yet every delivery wrote an entry
 * to it. Delivery ids begin with their creation time and sort by it (`newId`, `derivedId`), so
 * the retention job finds old deliveries by the primary key instead (`firstIdAt`).
 */
export function fewerIndexWrites() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.dropIndex("webhook_deliveries_created").execute();
    },
  };
}
