import { type Kysely, sql } from "kysely";
import type { Dialect } from "../database.ts";

/**
 * Fewer index writes per webhook delivery on PostgreSQL (SQLite is left as it is):
 *
 * - A delivery's row is written twice, inserted pending and updated with its attempt's outcome a
 *   few milliseconds later. Pages kept half empty let that update put the new version beside the
 *   old one (a HOT update), so none of the table's three indexes gets a new entry, and the old
 *   version is pruned in place. The heap is no larger for it: without room on the page, every
 *   update leaves a dead copy elsewhere until VACUUM.
 * - Most jobs (every delivery's) have no idempotency key; a unique index over the keys alone
 *   spares each of them an entry. Enqueues name it with `on conflict (idempotency_key) where
 *   idempotency_key is not null`, which SQLite's full unique index also answers.
 */
export function leanDeliveries(dialect: Dialect) {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      if (dialect !== "postgres") return;
      await sql`alter table webhook_deliveries set (fillfactor = 50)`.execute(db);
      await sql`create unique index jobs_idempotency_key on jobs (idempotency_key) where idempotency_key is not null`.execute(
        db,
      );
      await sql`alter table jobs drop constraint jobs_idempotency_key_key`.execute(db);
    },
  };
}
