import type { Kysely } from "kysely";

/** The durable job queue and the cluster-wide schedule of recurring jobs. */
export function jobs() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("jobs")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("payload", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("attempts", "integer", (c) => c.notNull())
        .addColumn("max_attempts", "integer", (c) => c.notNull())
        .addColumn("timeout_ms", "integer", (c) => c.notNull())
        .addColumn("run_at", "text", (c) => c.notNull())
        .addColumn("lease_until", "text")
        .addColumn("locked_by", "text")
        .addColumn("last_error", "text")
        .addColumn("idempotency_key", "text", (c) => c.unique())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addColumn("finished_at", "text")
        .execute();
      // Due work is found by (status, run_at); expired leases by (status, lease_until).
      await db.schema.createIndex("jobs_due").on("jobs").columns(["status", "run_at"]).execute();
      await db.schema.createIndex("jobs_lease").on("jobs").columns(["status", "lease_until"]).execute();

      await db.schema
        .createTable("job_schedules")
        .addColumn("name", "text", (c) => c.primaryKey())
        .addColumn("next_run_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .execute();
    },
  };
}
