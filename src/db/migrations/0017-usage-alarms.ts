import type { Kysely } from "kysely";

/**
 * Usage (DESIGN §10): one row per project and UTC day, with the org and slug copied in so that
 * the history outlives the project's deletion and purge; requests are added to it, d1 and r2 are
 * the latest measurement of the day (`measured_at` null: none yet). Alarms: per org, a metric and
 * a threshold, and when they last fired.
 */
export function usageAndAlarms() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("usage_daily")
        .addColumn("date", "text", (c) => c.notNull())
        .addColumn("project_id", "text", (c) => c.notNull())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("project_slug", "text", (c) => c.notNull())
        .addColumn("requests", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("d1", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("r2", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("measured_at", "text")
        .addPrimaryKeyConstraint("usage_daily_pkey", ["date", "project_id"])
        .execute();
      await db.schema.createIndex("usage_daily_org").on("usage_daily").columns(["org_id", "date"]).execute();
      await db.schema
        .createTable("alarms")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("metric", "text", (c) => c.notNull())
        .addColumn("threshold_pct", "integer", (c) => c.notNull())
        .addColumn("last_fired_at", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("alarms_org_metric")
        .on("alarms")
        .columns(["org_id", "metric", "threshold_pct"])
        .unique()
        .execute();
    },
  };
}
