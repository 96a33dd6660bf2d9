import type { Kysely } from "kysely";

/**
 * Each attempt records where it was sent, so a manual retry re-sends the request to that address
 * and not to one its webhook was moved to since (the request's custom headers were meant for the
 * first). Attempts recorded before have none; their delivery's `url`, where the webhook pointed
 * when the delivery was made, stands in.
 */
export function attemptUrls() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable("webhook_attempts").addColumn("url", "text").execute();
    },
  };
}
