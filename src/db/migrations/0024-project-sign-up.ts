import type { Kysely } from "kysely";

/** A project's workspace sign-up switch (DESIGN §16): `open` (every project so far) or `closed`. */
export function projectSignUp() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .alterTable("projects")
        .addColumn("sign_up", "text", (c) => c.notNull().defaultTo("open"))
        .execute();
    },
  };
}
