import type { Kysely } from "kysely";

/**
 * Workspace event dispatch: a hint per project that its outbox may hold events not yet turned
 * into deliveries (written before the workspace change, cleared once the outbox is empty), and
 * the exact request headers of each attempt, so a past delivery can be re-sent byte for byte.
 */
export function workspaceDispatch() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("workspace_outbox_hints")
        .addColumn("project_id", "text", (c) => c.primaryKey())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.alterTable("webhook_attempts").addColumn("request_headers", "text").execute();
    },
  };
}
