import { type Kysely, sql } from "kysely";
import type { Dialect } from "../database.ts";

/**
 * PostgreSQL: a delivery's row is written twice, inserted pending and updated with its attempt's
 * outcome a few milliseconds later. Pages kept half empty let that update put the new version
 * beside the old one (a HOT update), so none of the table's three indexes gets a new entry, and
 * the old version is pruned in place. The heap is no larger for it: without room on the page,
 * every update left a dead copy elsewhere until VACUUM. SQLite updates rows in place.
 */
export function leanDeliveries(dialect: Dialect) {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      if (dialect !== "postgres") return;
      await sql`alter table webhook_deliveries set (fillfactor = 50)`.execute(db);
    },
  };
}
