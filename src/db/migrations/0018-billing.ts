import type { Kysely } from "kysely";

/**
 * Billing (DESIGN §11): an org's subscription (at most one; none on the default plan), the
 * checkouts it started, the invoices it paid or owes, the packs it bought (each adding to one
 * metric's limit for one period), its customer at the payment provider, and the provider events
 * already applied (each is applied once, however often it is delivered).
 */
export function billing() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("subscriptions")
        .addColumn("org_id", "text", (c) => c.primaryKey())
        .addColumn("plan_id", "text", (c) => c.notNull())
        .addColumn("interval", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("current_period_start", "text", (c) => c.notNull())
        .addColumn("current_period_end", "text", (c) => c.notNull())
        .addColumn("cancel_at_period_end", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("provider", "text", (c) => c.notNull())
        .addColumn("provider_subscription_id", "text")
        // The `created` time of the last provider event applied: an older one arriving late changes nothing.
        .addColumn("provider_event_at", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("subscriptions_provider_id")
        .on("subscriptions")
        .columns(["provider_subscription_id"])
        .unique()
        .execute();
      await db.schema
        .createTable("checkouts")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("plan_id", "text")
        .addColumn("interval", "text")
        .addColumn("pack_type", "text")
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("url", "text", (c) => c.notNull())
        .addColumn("provider", "text", (c) => c.notNull())
        .addColumn("provider_ref", "text")
        .addColumn("expires_at", "text", (c) => c.notNull())
        .addColumn("completed_at", "text")
        .addColumn("created_by", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("checkouts_org").on("checkouts").columns(["org_id", "created_at"]).execute();
      await db.schema
        .createTable("invoices")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("number", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("amount_cents", "bigint", (c) => c.notNull())
        .addColumn("currency", "text", (c) => c.notNull())
        .addColumn("period_start", "text", (c) => c.notNull())
        .addColumn("period_end", "text", (c) => c.notNull())
        .addColumn("lines", "text", (c) => c.notNull())
        .addColumn("provider_ref", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("invoices_org").on("invoices").columns(["org_id", "created_at"]).execute();
      await db.schema.createIndex("invoices_provider_ref").on("invoices").columns(["provider_ref"]).unique().execute();
      await db.schema
        .createTable("packs")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("type", "text", (c) => c.notNull())
        .addColumn("amount", "bigint", (c) => c.notNull())
        .addColumn("period_start", "text", (c) => c.notNull())
        .addColumn("period_end", "text", (c) => c.notNull())
        .addColumn("checkout_id", "text", (c) => c.notNull().unique())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("packs_org").on("packs").columns(["org_id", "period_end"]).execute();
      await db.schema
        .createTable("billing_customers")
        .addColumn("org_id", "text", (c) => c.primaryKey())
        .addColumn("provider", "text", (c) => c.notNull())
        .addColumn("customer_id", "text", (c) => c.notNull().unique())
        .execute();
      await db.schema
        .createTable("billing_events")
        .addColumn("provider", "text", (c) => c.notNull())
        .addColumn("event_id", "text", (c) => c.notNull())
        .addColumn("received_at", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("billing_events_pkey", ["provider", "event_id"])
        .execute();
    },
  };
}
