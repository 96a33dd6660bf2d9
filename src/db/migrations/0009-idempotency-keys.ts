import type { Kysely } from "kysely";

/**
 * `Idempotency-Key` on POST: one row per caller and key (both hashed), holding a fingerprint of
 * the request, the mark of the request running under it and, once that has finished, its
 * response (encrypted with a key only the caller can derive). Rows are looked up by their
 * primary key and pruned by age.
 */
export function idempotencyKeys() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable("idempotency_keys")
        .addColumn("scope", "text", (c) => c.notNull())
        .addColumn("key", "text", (c) => c.notNull())
        .addColumn("fingerprint", "text", (c) => c.notNull())
        .addColumn("holder", "text", (c) => c.notNull())
        .addColumn("response", "text")
        .addColumn("locked_until", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("idempotency_keys_pkey", ["scope", "key"])
        .execute();
      await db.schema.createIndex("idempotency_keys_created").on("idempotency_keys").column("created_at").execute();
    },
  };
}
