import { type Selectable, sql } from "kysely";
import type { Db } from "../../db/database.ts";
import type { WebhookDeliveriesTable } from "../../db/schema.ts";
import { chunked, insertRows, oneOf } from "../../db/shapes.ts";
import type { Deps } from "../../deps.ts";
import { newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { webhookDeliveries } from "../../lib/metrics.ts";
import type { OutboundResponse } from "../../lib/outbound.ts";
import { moveBreakers } from "./breaker.ts";
import { deliveryView } from "./deliveries.ts";
import { type DeliveryDraft, queueDeliveries } from "./events.ts";
import { signatureHeaders } from "./signing.ts";
import { resolveTargets, type Target, targetKey, withoutNamesOf } from "./targets.ts";

/**
 * Attempts at deliveries: each reads its delivery and where it goes now, sends it, and records
 * how it went (the attempt row, the delivery's status, the webhook's breaker).
 */

export type Delivery = Selectable<WebhookDeliveriesTable>;
export type DeliveryStatus = "pending" | "succeeded" | "failed" | "dead" | "skipped";

const TERMINAL = new Set(["succeeded", "dead", "skipped"]);

export interface AttemptRequest {
  deliveryId: string;
  /** A failure is the last attempt: the delivery becomes `dead`. */
  final: boolean;
  /** Send even when the webhook is switched off (test sends, replays). */
  includeInactive?: boolean;
  /** Re-send an earlier attempt's request as it went, to where it went, even if finished. */
  replay?: { url: string; headers: Record<string, string> };
  /** The delivery as its caller has just committed it, in place of reading it back. */
  delivery?: Delivery;
  /** The longest this attempt may take, when shorter than WEBHOOK_TIMEOUT_MS (a job's deadline). */
  timeoutMs?: number;
}

export interface AttemptResult {
  /** The delivery's status after the attempt; null when there is no such delivery. */
  status: DeliveryStatus | null;
  ok: boolean;
  error: string | null;
}

/** An attempt made (or a delivery skipped), and what `recordAttempts` must write for it. */
export interface Attempt {
  result: AttemptResult;
  record: AttemptRecord | null;
}

export type AttemptRecord = { type: "sent"; sent: Sent } | { type: "skipped"; deliveryId: string };

interface Sent {
  delivery: Delivery;
  target: Target;
  request: AttemptRequest;
  url: string;
  headers: Record<string, string>;
  response: OutboundResponse;
  ok: boolean;
  status: DeliveryStatus;
  error: string | null;
}

const LOAD_CHUNK = 500;

/** The requests' deliveries: those handed over as they were committed, and the rest read. */
async function loadDeliveries(deps: Deps, requests: AttemptRequest[]): Promise<Map<string, Delivery>> {
  const found = new Map<string, Delivery>();
  for (const { delivery } of requests) if (delivery) found.set(delivery.id, delivery);
  const unique = [...new Set(requests.map((request) => request.deliveryId))].filter((id) => !found.has(id));
  for (const chunk of chunked(deps.dialect, unique, LOAD_CHUNK)) {
    const rows = await deps.db
      .selectFrom("webhook_deliveries")
      .selectAll()
      .where(oneOf(deps.dialect, "id", chunk))
      .execute();
    for (const row of rows) found.set(row.id, row);
  }
  return found;
}

/**
 * Starts one attempt at each delivery, all at once, after reading the deliveries and their
 * targets together; resolves to one promise per request, in order. Nothing is written: pass the
 * records to `recordAttempts`. A delivery already finished is not sent again (unless replayed),
 * and one whose target is gone or switched off is to become `skipped`.
 */
export async function startAttempts(
  deps: Deps,
  requests: AttemptRequest[],
  signal?: AbortSignal,
): Promise<Array<Promise<Attempt>>> {
  const deliveries = await loadDeliveries(deps, requests);
  const targets = await resolveTargets(deps, [...deliveries.values()]);
  return requests.map(async (request): Promise<Attempt> => {
    const delivery = deliveries.get(request.deliveryId);
    if (!delivery) return { result: { status: null, ok: false, error: null }, record: null };
    if (TERMINAL.has(delivery.status) && !request.replay) {
      const status = delivery.status as DeliveryStatus;
      return { result: { status, ok: status === "succeeded", error: null }, record: null };
    }
    const target = targets.get(targetKey(delivery.target_type, delivery.target_id));
    if (!target || (!target.active && !request.includeInactive)) {
      return {
        result: { status: "skipped", ok: false, error: null },
        record: { type: "skipped", deliveryId: delivery.id },
      };
    }
    const sent = await send(deps, delivery, target, request, signal);
    return { result: { status: sent.status, ok: sent.ok, error: sent.error }, record: { type: "sent", sent } };
  });
}

async function send(
  deps: Deps,
  delivery: Delivery,
  target: Target,
  request: AttemptRequest,
  signal: AbortSignal | undefined,
): Promise<Sent> {
  const timestamp = Math.floor(deps.clock.now().getTime() / 1000);
  // Reserved headers come last, and custom ones that name them are dropped, so a webhook's custom
  // headers can never replace Content-Type, an X-Service-* or a webhook-* signing header.
  // A replay goes where the request it repeats went: its headers, custom ones included, were
  // meant for that address, not for one the webhook was moved to since.
  const url = request.replay?.url ?? target.url;
  const headers = request.replay?.headers ?? {
    ...target.extraHeaders,
    ...withoutNamesOf(fromJsonColumn<Record<string, string>>(delivery.headers, {}), target.extraHeaders),
    ...(target.secret ? signatureHeaders(target.secret, delivery.id, delivery.body, timestamp) : {}),
  };
  const response: OutboundResponse = target.refusal
    ? { statusCode: null, body: null, latencyMs: 0, error: target.refusal }
    : await deps.outbound.post(url, headers, delivery.body, signal, request.timeoutMs);
  const ok = response.statusCode !== null && response.statusCode >= 200 && response.statusCode < 300;
  const error = ok ? null : (response.error ?? `HTTP ${response.statusCode}`);
  const status: DeliveryStatus = ok ? "succeeded" : request.final ? "dead" : "failed";
  webhookDeliveries.inc({ kind: target.workspace ? "workspace" : "control", outcome: status });
  return { delivery, target, request, url, headers, response, ok, status, error };
}

/**
 * Writes attempts: one row each, the deliveries' new status (grouped, so a batch of successes is
 * one statement), skips, and the breakers, counted in the order the attempts were made.
 */
export async function recordAttempts(trx: Db, deps: Deps, records: AttemptRecord[]): Promise<void> {
  const at = deps.clock.now().toISOString();
  const sent: Sent[] = [];
  const skipped: string[] = [];
  for (const record of records) {
    if (record.type === "sent") sent.push(record.sent);
    else skipped.push(record.deliveryId);
  }
  if (skipped.length > 0) {
    await trx
      .updateTable("webhook_deliveries")
      .set({ status: "skipped", updated_at: at })
      .where(oneOf(deps.dialect, "id", skipped))
      .execute();
  }
  if (sent.length === 0) return;
  // Deliveries that went the same way are updated together, and each update returns the counters
  // it reached: an attempt is numbered by its delivery's counter as it stands when the attempt is
  // written, so attempts that overlapped (a manual retry during an automatic one) get numbers in
  // the order they were recorded, none twice. A delivery twice in one group would be counted once
  // by its update, so a second attempt at it goes into a group of its own.
  const groups = new Map<string, Sent[]>();
  const seen = new Map<string, number>();
  for (const s of sent) {
    const occurrence = seen.get(s.delivery.id) ?? 0;
    seen.set(s.delivery.id, occurrence + 1);
    const key = JSON.stringify([s.status, s.response.statusCode, s.error, s.request.replay !== undefined, occurrence]);
    const group = groups.get(key);
    if (group) group.push(s);
    else groups.set(key, [s]);
  }
  const numbers = new Map<Sent, number>();
  for (const group of groups.values()) {
    const s = group[0] as Sent;
    // A failed attempt leaves a delivery another attempt finished meanwhile (a manual retry that
    // succeeded, a breaker's skip) as it is; a success, or a replay, always says how it went.
    const keepsFinished = !s.ok && !s.request.replay;
    const counted = await trx
      .updateTable("webhook_deliveries")
      .set((eb) => ({
        status: keepsFinished
          ? sql<DeliveryStatus>`case when ${sql.ref("status")} in ('succeeded', 'dead', 'skipped') then ${sql.ref("status")} else ${s.status} end`
          : s.status,
        attempts: eb("attempts", "+", 1),
        last_status_code: s.response.statusCode,
        last_error: s.error,
        updated_at: at,
      }))
      .where(
        oneOf(
          deps.dialect,
          "id",
          group.map((member) => member.delivery.id),
        ),
      )
      .returning(["id", "attempts"])
      .execute();
    const reached = new Map(counted.map((row) => [row.id, row.attempts]));
    for (const member of group) numbers.set(member, reached.get(member.delivery.id) ?? member.delivery.attempts + 1);
  }
  const attempts = sent.map((s) => ({
    id: newId("att"),
    delivery_id: s.delivery.id,
    attempt: numbers.get(s) as number,
    status_code: s.response.statusCode,
    latency_ms: Math.round(s.response.latencyMs),
    error: s.error,
    response_body: s.response.body,
    request_headers: toJsonColumn(
      s.target.secretHeaders ? withoutNamesOf(s.headers, s.target.extraHeaders) : s.headers,
    ),
    url: s.target.secretHeaders ? null : s.url,
    created_at: at,
  }));
  await insertRows(trx, deps.dialect, "webhook_attempts", attempts);
  await moveBreakers(trx, deps, sent, at);
}

/**
 * Ends deliveries whose job was dead-lettered because the worker running its last attempt
 * stopped: that attempt was never recorded (the receiver may or may not have had it), and no
 * other will be made. A delivery another attempt finished meanwhile is left as it is.
 */
export async function endLapsedDeliveries(trx: Db, deps: Deps, deliveryIds: string[], error: string): Promise<void> {
  await trx
    .updateTable("webhook_deliveries")
    .set({ status: "dead", last_error: error, updated_at: deps.clock.now().toISOString() })
    .where(oneOf(deps.dialect, "id", deliveryIds))
    .where("status", "not in", [...TERMINAL])
    .execute();
}

/** Makes and records one attempt, in a transaction of its own. */
export async function attemptDelivery(
  deps: Deps,
  deliveryId: string,
  options: Omit<AttemptRequest, "deliveryId"> & { signal?: AbortSignal },
): Promise<AttemptResult> {
  const { signal, ...request } = options;
  const [started] = await startAttempts(deps, [{ deliveryId, ...request }], signal);
  const attempt = (await started) as Attempt;
  const { record } = attempt;
  if (record) await deps.db.transaction().execute((trx) => recordAttempts(trx, deps, [record]));
  return attempt.result;
}

/**
 * Records a test delivery (`webhook.test`) and makes its one attempt now: no queue, no retries.
 * Like every attempt, it moves the breaker of an active webhook (SPEC: the counter is bumped on
 * every failed attempt; any 2xx resets it). Returns the delivery as listed.
 */
export async function sendTestDelivery(
  deps: Deps,
  orgId: string,
  draft: DeliveryDraft,
  options: {
    includeInactive?: boolean;
    projectId?: string;
    /** Writes the audit row of the test send, in the transaction that records its delivery. */
    audit?: (trx: Db, deliveryId: string) => Promise<void>;
  } = {},
) {
  const [deliveryId] = await deps.db.transaction().execute(async (trx) => {
    const ids = await queueDeliveries(trx, deps, orgId, "webhook.test", [draft], {
      queue: false,
      ...(options.projectId ? { projectId: options.projectId } : {}),
    });
    await options.audit?.(trx, ids[0] as string);
    return ids;
  });
  const id = deliveryId as string;
  await attemptDelivery(deps, id, { final: true, includeInactive: options.includeInactive });
  return deliveryView(deps.db, id);
}
