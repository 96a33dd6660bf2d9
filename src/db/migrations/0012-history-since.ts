import type { Kysely } from "kysely";

/**
 * Since when each project's workspace records its history (DESIGN §9): set when provisioning
 * installs it, or when a workspace made before history existed has it installed. Null: not yet.
 */
export function historySince() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable("projects").addColumn("history_since", "text").execute();
    },
  };
}
