import { type Kysely, sql } from "kysely";

/** Projects and their deploys; webhooks, their deliveries and attempts; integrations; notifications. */
export function projectsAndWebhooks() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("projects")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id"))
        .addColumn("slug", "text", (c) => c.notNull())
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("environment", "text", (c) => c.notNull())
        .addColumn("region", "text", (c) => c.notNull())
        .addColumn("db_type", "text", (c) => c.notNull())
        .addColumn("template", "text", (c) => c.notNull())
        .addColumn("template_version", "text", (c) => c.notNull())
        .addColumn("admin_token_hash", "text", (c) => c.notNull())
        .addColumn("failure_reason", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addColumn("deleted_at", "text")
        .addColumn("purge_after", "text")
        .addColumn("purged_at", "text")
        .execute();
      await db.schema
        .createIndex("projects_live_slug")
        .on("projects")
        .columns(["org_id", "slug"])
        .unique()
        .where(sql.ref("deleted_at"), "is", null)
        .execute();
      await db.schema.createIndex("projects_admin_token").on("projects").column("admin_token_hash").execute();

      await db.schema
        .createTable("deploys")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("project_id", "text", (c) => c.notNull().references("projects.id"))
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("from_version", "text")
        .addColumn("to_version", "text")
        .addColumn("error", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("finished_at", "text")
        .execute();
      await db.schema.createIndex("deploys_project").on("deploys").columns(["project_id", "created_at"]).execute();

      // Org webhooks and (later) workspace webhooks share one table and one delivery engine.
      await db.schema
        .createTable("webhooks")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id"))
        .addColumn("project_id", "text")
        .addColumn("name", "text")
        .addColumn("url", "text", (c) => c.notNull())
        .addColumn("events", "text", (c) => c.notNull())
        .addColumn("secret", "text")
        .addColumn("headers", "text")
        .addColumn("payload_fields", "text")
        .addColumn("active", "integer", (c) => c.notNull())
        .addColumn("consecutive_failures", "integer", (c) => c.notNull())
        .addColumn("last_failure_at", "text")
        .addColumn("disabled_reason", "text")
        .addColumn("created_by", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addColumn("deleted_at", "text")
        .execute();
      await db.schema.createIndex("webhooks_org").on("webhooks").columns(["org_id", "project_id"]).execute();

      await db.schema
        .createTable("webhook_deliveries")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("project_id", "text")
        .addColumn("target_type", "text", (c) => c.notNull())
        .addColumn("target_id", "text", (c) => c.notNull())
        .addColumn("event", "text", (c) => c.notNull())
        .addColumn("url", "text", (c) => c.notNull())
        .addColumn("body", "text", (c) => c.notNull())
        .addColumn("headers", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("attempts", "integer", (c) => c.notNull())
        .addColumn("last_status_code", "integer")
        .addColumn("last_error", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("webhook_deliveries_target")
        .on("webhook_deliveries")
        .columns(["target_id", "created_at"])
        .execute();
      await db.schema.createIndex("webhook_deliveries_created").on("webhook_deliveries").column("created_at").execute();

      await db.schema
        .createTable("webhook_attempts")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("delivery_id", "text", (c) => c.notNull())
        .addColumn("attempt", "integer", (c) => c.notNull())
        .addColumn("status_code", "integer")
        .addColumn("latency_ms", "integer", (c) => c.notNull())
        .addColumn("error", "text")
        .addColumn("response_body", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("webhook_attempts_delivery").on("webhook_attempts").column("delivery_id").execute();

      await db.schema
        .createTable("integrations")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id"))
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("config", "text", (c) => c.notNull())
        .addColumn("events", "text")
        .addColumn("created_by", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addColumn("deleted_at", "text")
        .execute();
      await db.schema.createIndex("integrations_org").on("integrations").column("org_id").execute();

      await db.schema
        .createTable("notifications")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("account_id", "text", (c) => c.notNull())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("title", "text", (c) => c.notNull())
        .addColumn("body", "text", (c) => c.notNull())
        .addColumn("data", "text")
        .addColumn("read_at", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("notifications_recipient")
        .on("notifications")
        .columns(["org_id", "account_id", "created_at"])
        .execute();
    },
  };
}
