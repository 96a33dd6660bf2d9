import type { Kysely } from "kysely";

/**
 * Due jobs by kind: workers claim batchable kinds (webhook deliveries) many at a time and other
 * kinds one per free slot, each read in `run_at` order from this index. It replaces
 * (status, run_at) and (status, lease_until): every index on `jobs` is written on each enqueue,
 * claim and settle.
 */
export function jobKinds() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createIndex("jobs_due_kind").on("jobs").columns(["status", "kind", "run_at"]).execute();
      await db.schema.dropIndex("jobs_due").execute();
      // Lapsed leases are looked for among running jobs (few: those in flight), by this index's
      // status prefix; (status, lease_until) cost a write on every claim and settle.
      await db.schema.dropIndex("jobs_lease").execute();
    },
  };
}
