import type { Kysely } from "kysely";

/**
 * Attempts at integration deliveries recorded the request's headers, which carry the provider's
 * credentials (Datadog's API key, a GitHub token). Attempts no longer keep them; this clears
 * those already kept. Integration deliveries are never replayed, so nothing needs the headers.
 */
export function forgetIntegrationCredentials() {
  return {
    // biome-ignore lint/suspicious/noExplicitAny: migrations run against the schema as it was then
    async up(db: Kysely<any>): Promise<void> {
      await db
        .updateTable("webhook_attempts")
        .set({ request_headers: null })
        .where(
          "delivery_id",
          "in",
          db.selectFrom("webhook_deliveries").select("id").where("target_type", "=", "integration"),
        )
        .execute();
    },
  };
}
