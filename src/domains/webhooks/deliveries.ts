import type { z } from "@hono/zod-openapi";
import type { Selectable } from "kysely";
import type { Db } from "../../db/database.ts";
import type { WebhookDeliveriesTable } from "../../db/schema.ts";
import type { DeliverySchema } from "./schemas.ts";

type DeliveryView = z.infer<typeof DeliverySchema>;

/** Deliveries of one target, newest first, each with its attempts. */
export async function listDeliveries(
  db: Db,
  targetId: string,
  query: { limit?: number | undefined; offset?: number | undefined; status?: string | undefined },
): Promise<DeliveryView[]> {
  let select = db.selectFrom("webhook_deliveries").selectAll().where("target_id", "=", targetId);
  if (query.status) select = select.where("status", "=", query.status);
  const deliveries = await select
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .limit(query.limit ?? 50)
    .offset(query.offset ?? 0)
    .execute();
  return withAttempts(db, deliveries);
}

/** One delivery as listed; it must exist (the caller just wrote or found it). */
export async function deliveryView(db: Db, deliveryId: string): Promise<DeliveryView> {
  const delivery = await db
    .selectFrom("webhook_deliveries")
    .selectAll()
    .where("id", "=", deliveryId)
    .executeTakeFirstOrThrow();
  return (await withAttempts(db, [delivery]))[0] as DeliveryView;
}

async function withAttempts(db: Db, deliveries: Selectable<WebhookDeliveriesTable>[]): Promise<DeliveryView[]> {
  if (deliveries.length === 0) return [];
  const attempts = await db
    .selectFrom("webhook_attempts")
    .selectAll()
    .where(
      "delivery_id",
      "in",
      deliveries.map((d) => d.id),
    )
    .orderBy("attempt")
    .execute();
  return deliveries.map((delivery) => {
    const own = attempts
      .filter((attempt) => attempt.delivery_id === delivery.id)
      .map((attempt) => ({
        attempt: attempt.attempt,
        statusCode: attempt.status_code,
        latencyMs: attempt.latency_ms,
        error: attempt.error,
        responseBody: attempt.response_body,
        createdAt: attempt.created_at,
      }));
    return {
      id: delivery.id,
      event: delivery.event,
      status: delivery.status as DeliveryView["status"],
      // Counted from the attempts read, so the two agree even if one lands between the reads.
      attemptCount: own.length,
      lastStatusCode: delivery.last_status_code,
      lastError: delivery.last_error,
      createdAt: delivery.created_at,
      updatedAt: delivery.updated_at,
      attempts: own,
    };
  });
}
