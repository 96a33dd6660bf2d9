import { type Kysely, sql } from "kysely";
import type { Dialect } from "../database.ts";

/**
 * Accounts (better-auth's tables, in each dialect's native date/boolean types), organizations,
 * memberships, invitations, API keys, the audit log and shared rate-limit counters.
 */
export function foundation(dialect: Dialect) {
  const timestamp = dialect === "postgres" ? sql`timestamptz` : sql`text`;
  const boolean = dialect === "postgres" ? sql`boolean` : sql`integer`;

  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("users")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("email", "text", (c) => c.notNull().unique())
        .addColumn("email_verified", boolean, (c) => c.notNull())
        .addColumn("image", "text")
        .addColumn("created_at", timestamp, (c) => c.notNull())
        .addColumn("updated_at", timestamp, (c) => c.notNull())
        .addColumn("title", "text")
        .addColumn("timezone", "text")
        .addColumn("preferences", "text")
        .execute();

      await db.schema
        .createTable("sessions")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("user_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
        .addColumn("token", "text", (c) => c.notNull().unique())
        .addColumn("expires_at", timestamp, (c) => c.notNull())
        .addColumn("ip_address", "text")
        .addColumn("user_agent", "text")
        .addColumn("created_at", timestamp, (c) => c.notNull())
        .addColumn("updated_at", timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex("sessions_user_id").on("sessions").column("user_id").execute();

      await db.schema
        .createTable("auth_accounts")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("account_id", "text", (c) => c.notNull())
        .addColumn("provider_id", "text", (c) => c.notNull())
        .addColumn("user_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
        .addColumn("access_token", "text")
        .addColumn("refresh_token", "text")
        .addColumn("id_token", "text")
        .addColumn("access_token_expires_at", timestamp)
        .addColumn("refresh_token_expires_at", timestamp)
        .addColumn("scope", "text")
        .addColumn("password", "text")
        .addColumn("created_at", timestamp, (c) => c.notNull())
        .addColumn("updated_at", timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex("auth_accounts_user_id").on("auth_accounts").column("user_id").execute();

      await db.schema
        .createTable("verifications")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("identifier", "text", (c) => c.notNull())
        .addColumn("value", "text", (c) => c.notNull())
        .addColumn("expires_at", timestamp, (c) => c.notNull())
        .addColumn("created_at", timestamp, (c) => c.notNull())
        .addColumn("updated_at", timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex("verifications_identifier").on("verifications").column("identifier").execute();

      await db.schema
        .createTable("orgs")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("slug", "text", (c) => c.notNull())
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("plan_id", "text", (c) => c.notNull())
        .addColumn("residency", "text", (c) => c.notNull())
        .addColumn("default_region", "text", (c) => c.notNull())
        .addColumn("ip_allowlist", "text", (c) => c.notNull())
        .addColumn("webhook_url", "text")
        .addColumn("webhook_secret", "text")
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("purpose", "text")
        .addColumn("team_size", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addColumn("deleted_at", "text")
        .execute();
      // Slugs are unique among live orgs only: a deleted org's slug can be taken again.
      await db.schema
        .createIndex("orgs_live_slug")
        .on("orgs")
        .column("slug")
        .unique()
        .where(sql.ref("deleted_at"), "is", null)
        .execute();

      await db.schema
        .createTable("memberships")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("account_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
        .addColumn("role", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addUniqueConstraint("memberships_org_account", ["org_id", "account_id"])
        .execute();
      await db.schema.createIndex("memberships_account_id").on("memberships").column("account_id").execute();

      await db.schema
        .createTable("invitations")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("email", "text", (c) => c.notNull())
        .addColumn("role", "text", (c) => c.notNull())
        .addColumn("token_hash", "text", (c) => c.notNull().unique())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("invited_by", "text")
        .addColumn("expires_at", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addColumn("accepted_at", "text")
        .execute();
      // At most one pending invitation per address and org.
      await db.schema
        .createIndex("invitations_pending_email")
        .on("invitations")
        .columns(["org_id", "email"])
        .unique()
        .where(sql.ref("status"), "=", "pending")
        .execute();

      await db.schema
        .createTable("api_keys")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("scope", "text", (c) => c.notNull())
        .addColumn("prefix", "text", (c) => c.notNull())
        .addColumn("token_hash", "text", (c) => c.notNull().unique())
        .addColumn("mcp_tools", "text")
        .addColumn("expires_at", "text")
        .addColumn("last_used_at", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("created_by", "text", (c) => c.notNull())
        .addColumn("revoked_at", "text")
        .execute();
      await db.schema.createIndex("api_keys_org_id").on("api_keys").column("org_id").execute();

      await db.schema
        .createTable("audit_events")
        .addColumn("id", "text", (c) => c.primaryKey())
        // Null for account-level events (an account editing its own profile).
        .addColumn("org_id", "text")
        .addColumn("action", "text", (c) => c.notNull())
        .addColumn("actor_type", "text", (c) => c.notNull())
        .addColumn("actor_id", "text", (c) => c.notNull())
        .addColumn("actor_email", "text")
        .addColumn("target_type", "text", (c) => c.notNull())
        .addColumn("target_id", "text", (c) => c.notNull())
        .addColumn("data", "text")
        .addColumn("ip", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("audit_events_org_created")
        .on("audit_events")
        .columns(["org_id", "created_at"])
        .execute();

      await db.schema
        .createTable("rate_limits")
        .addColumn("bucket", "text", (c) => c.notNull())
        .addColumn("window_start", "integer", (c) => c.notNull())
        .addColumn("hits", "integer", (c) => c.notNull())
        .addPrimaryKeyConstraint("rate_limits_pk", ["bucket", "window_start"])
        .execute();
    },
  };
}
