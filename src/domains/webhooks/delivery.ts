import { type Selectable, sql } from "kysely";
import { DAY_MS } from "../../clock.ts";
import type { Db } from "../../db/database.ts";
import type { WebhookDeliveriesTable } from "../../db/schema.ts";
import { chunked, insertRows, oneOf } from "../../db/shapes.ts";
import type { Deps } from "../../deps.ts";
import type { JobHandlers, JobResult, JobRun } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { firstIdAt, newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import type { OutboundResponse } from "../../lib/outbound.ts";
import { recordSystemAudit } from "../audit/service.ts";
import { type IntegrationKind, providerAuthHeaders, providerUrl, unconfigured } from "../integrations/providers.ts";
import { notifyOrgAdmins } from "../notifications/service.ts";
import { deliveryView } from "./deliveries.ts";
import { attemptTimeoutWithin, type DeliveryDraft, queueDeliveries } from "./events.ts";
import { signatureHeaders } from "./signing.ts";

/** Consecutive failed attempts after which a webhook is switched off (SPEC: circuit breaker). */
const BREAKER_THRESHOLD = 15;

export type Delivery = Selectable<WebhookDeliveriesTable>;
export type DeliveryStatus = "pending" | "succeeded" | "failed" | "dead" | "skipped";

const TERMINAL = new Set(["succeeded", "dead", "skipped"]);

interface Target {
  url: string;
  secret: string | null;
  /** Custom headers, reserved names already removed. */
  extraHeaders: Record<string, string>;
  /** True when `extraHeaders` are credentials (an integration's): sent, never stored with an attempt. */
  secretHeaders: boolean;
  /** Org and workspace webhooks have a breaker; the org URL and integrations do not. */
  webhookId: string | null;
  /** False for a webhook switched off: its queued deliveries become `skipped`. */
  active: boolean;
  /** Why nothing can be sent to it (an integration not configured yet): each attempt fails so. */
  refusal: string | null;
}

function targetKey(type: string, id: string): string {
  return `${type}:${id}`;
}

/**
 * Where each delivery goes now, read once per target. A target that is gone (deleted webhook,
 * integration or org, or an org URL removed) has no entry: its deliveries become no-ops.
 */
async function resolveTargets(deps: Deps, deliveries: Delivery[]): Promise<Map<string, Target>> {
  const ids = { webhook: new Set<string>(), org_url: new Set<string>(), integration: new Set<string>() };
  for (const delivery of deliveries) ids[delivery.target_type as keyof typeof ids]?.add(delivery.target_id);
  const targets = new Map<string, Target>();
  if (ids.webhook.size > 0) {
    // A hook is gone with its org, or with its project (a workspace hook), as when deleted itself.
    const hooks = await deps.db
      .selectFrom("webhooks")
      .innerJoin("orgs", "orgs.id", "webhooks.org_id")
      .leftJoin("projects", "projects.id", "webhooks.project_id")
      .select([
        "webhooks.id",
        "webhooks.url",
        "webhooks.secret",
        "webhooks.headers",
        "webhooks.active",
        "webhooks.deleted_at",
        "orgs.deleted_at as org_deleted_at",
        "projects.deleted_at as project_deleted_at",
      ])
      .where("webhooks.id", "in", [...ids.webhook])
      .execute();
    for (const hook of hooks) {
      if (hook.deleted_at !== null || hook.org_deleted_at !== null || hook.project_deleted_at !== null) continue;
      targets.set(targetKey("webhook", hook.id), {
        url: hook.url,
        secret: hook.secret,
        extraHeaders: withoutReservedHeaders(fromJsonColumn<Record<string, string>>(hook.headers, {})),
        secretHeaders: false,
        webhookId: hook.id,
        active: Boolean(hook.active),
        refusal: null,
      });
    }
  }
  if (ids.org_url.size > 0) {
    const orgs = await deps.db
      .selectFrom("orgs")
      .select(["id", "webhook_url", "webhook_secret", "deleted_at"])
      .where("id", "in", [...ids.org_url])
      .execute();
    for (const org of orgs) {
      if (org.deleted_at !== null || !org.webhook_url) continue;
      targets.set(targetKey("org_url", org.id), {
        url: org.webhook_url,
        secret: org.webhook_secret,
        extraHeaders: {},
        secretHeaders: false,
        webhookId: null,
        active: true,
        refusal: null,
      });
    }
  }
  if (ids.integration.size > 0) {
    const integrations = await deps.db
      .selectFrom("integrations")
      .innerJoin("orgs", "orgs.id", "integrations.org_id")
      .select([
        "integrations.id",
        "integrations.kind",
        "integrations.config",
        "integrations.deleted_at",
        "orgs.deleted_at as org_deleted_at",
      ])
      .where("integrations.id", "in", [...ids.integration])
      .execute();
    for (const integration of integrations) {
      if (integration.deleted_at !== null || integration.org_deleted_at !== null) continue;
      // Address and credentials both come from the current config, so a retry after a change
      // never sends new credentials to the old address.
      const config = fromJsonColumn<Record<string, unknown>>(integration.config, {});
      const kind = integration.kind as IntegrationKind;
      targets.set(targetKey("integration", integration.id), {
        url: providerUrl(kind, config),
        secret: null,
        extraHeaders: providerAuthHeaders(kind, config),
        secretHeaders: true,
        webhookId: null,
        active: true,
        refusal: unconfigured(kind, config),
      });
    }
  }
  return targets;
}

/** `Content-Type` and every `X-Service-*` header belong to Plinth (SPEC, workspace webhooks rule 9). */
export function isReservedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower === "content-type" || lower.startsWith("x-service-");
}

function withoutReservedHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !isReservedHeader(name)));
}

/**
 * `headers` less those a custom header names in any case (the custom one is sent instead, as for
 * `User-Agent`), so no header goes out twice. Reserved names never reach here as custom headers.
 */
function withoutNamesOf(headers: Record<string, string>, custom: Record<string, string>): Record<string, string> {
  const names = Object.keys(custom);
  if (names.length === 0) return headers;
  const taken = new Set(names.map((name) => name.toLowerCase()));
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !taken.has(name.toLowerCase())));
}

export interface AttemptRequest {
  deliveryId: string;
  /** A failure is the last attempt: the delivery becomes `dead`. */
  final: boolean;
  /** Send even when the webhook is switched off (test sends, replays). */
  includeInactive?: boolean;
  /** Re-send with exactly these headers (a replay of an earlier attempt), even if finished. */
  replayHeaders?: Record<string, string>;
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
async function startAttempts(
  deps: Deps,
  requests: AttemptRequest[],
  signal?: AbortSignal,
): Promise<Array<Promise<Attempt>>> {
  const deliveries = await loadDeliveries(deps, requests);
  const targets = await resolveTargets(deps, [...deliveries.values()]);
  return requests.map(async (request): Promise<Attempt> => {
    const delivery = deliveries.get(request.deliveryId);
    if (!delivery) return { result: { status: null, ok: false, error: null }, record: null };
    if (TERMINAL.has(delivery.status) && !request.replayHeaders) {
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
  // headers can never replace Content-Type or an X-Service-* header.
  const headers = request.replayHeaders ?? {
    ...target.extraHeaders,
    ...withoutNamesOf(fromJsonColumn<Record<string, string>>(delivery.headers, {}), target.extraHeaders),
    ...(target.secret ? signatureHeaders(target.secret, delivery.body, timestamp) : {}),
  };
  const response: OutboundResponse = target.refusal
    ? { statusCode: null, body: null, latencyMs: 0, error: target.refusal }
    : await deps.outbound.post(target.url, headers, delivery.body, signal, request.timeoutMs);
  const ok = response.statusCode !== null && response.statusCode >= 200 && response.statusCode < 300;
  const error = ok ? null : (response.error ?? `HTTP ${response.statusCode}`);
  const status: DeliveryStatus = ok ? "succeeded" : request.final ? "dead" : "failed";
  return { delivery, target, request, headers, response, ok, status, error };
}

/**
 * Writes attempts: one row each, the deliveries' new status (grouped, so a batch of successes is
 * one statement), skips, and the breakers, counted in the order the attempts were made.
 */
async function recordAttempts(trx: Db, deps: Deps, records: AttemptRecord[]): Promise<void> {
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
    const key = JSON.stringify([
      s.status,
      s.response.statusCode,
      s.error,
      s.request.replayHeaders !== undefined,
      occurrence,
    ]);
    const group = groups.get(key);
    if (group) group.push(s);
    else groups.set(key, [s]);
  }
  const numbers = new Map<Sent, number>();
  for (const group of groups.values()) {
    const s = group[0] as Sent;
    // A failed attempt leaves a delivery another attempt finished meanwhile (a manual retry that
    // succeeded, a breaker's skip) as it is; a success, or a replay, always says how it went.
    const keepsFinished = !s.ok && !s.request.replayHeaders;
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
    created_at: at,
  }));
  await insertRows(trx, deps.dialect, "webhook_attempts", attempts);
  // Breakers of active webhooks, moved attempt by attempt, so exactly the attempt that takes the
  // counter to the threshold trips it. A success resets the counter as it is now, not as read
  // before the request went out (other attempts may have failed meanwhile): once per webhook and
  // group, unless this group's own writes left it at 0.
  const counters = new Map<string, number>();
  for (const s of sent) {
    const webhookId = s.target.webhookId;
    if (!webhookId || !s.target.active) continue;
    if (s.ok) {
      if (counters.get(webhookId) !== 0) {
        // Not once the breaker has tripped (by an attempt recorded meanwhile): only a resume resets it then.
        await trx
          .updateTable("webhooks")
          .set({ consecutive_failures: 0 })
          .where("id", "=", webhookId)
          .where("active", "=", 1)
          .where("consecutive_failures", ">", 0)
          .execute();
      }
      counters.set(webhookId, 0);
    } else {
      counters.set(webhookId, await recordFailure(trx, deps, webhookId, at));
    }
  }
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
 * Counts a failed attempt against the webhook and trips the breaker at the threshold: the
 * webhook is switched off with a reason, its org's admins are notified and the audit log says
 * so. Only the attempt that moves the counter to the threshold does this, once.
 */
async function recordFailure(trx: Db, deps: Deps, webhookId: string, at: string): Promise<number> {
  const hook = await trx
    .updateTable("webhooks")
    .set((eb) => ({ consecutive_failures: eb("consecutive_failures", "+", 1), last_failure_at: at }))
    .where("id", "=", webhookId)
    // Attempts that were under way when the breaker tripped leave the count where the trip left it.
    .where("active", "=", 1)
    .returning(["id", "org_id", "project_id", "url", "active", "consecutive_failures"])
    .executeTakeFirst();
  if (!hook) return 0;
  if (!hook.active || hook.consecutive_failures < BREAKER_THRESHOLD) return hook.consecutive_failures;
  const reason = `disabled after ${BREAKER_THRESHOLD} consecutive failed deliveries`;
  await trx
    .updateTable("webhooks")
    .set({ active: 0, disabled_reason: reason, updated_at: at })
    .where("id", "=", webhookId)
    .execute();
  // Its deliveries waiting for a retry become terminal no-ops (SPEC's breaker table): their jobs
  // find them skipped and end, and a later resume does not send them. Test sends are never
  // queued. On PostgreSQL, rows another transaction holds are left alone: that transaction is
  // recording an attempt at them now (waiting, maybe, for this webhook's row, which this one
  // holds), and a retry it leaves finds the webhook switched off.
  let waiting = trx
    .selectFrom("webhook_deliveries")
    .select("id")
    .where("target_type", "=", "webhook")
    .where("target_id", "=", webhookId)
    .where("status", "in", ["pending", "failed"])
    .where("event", "!=", "webhook.test");
  if (deps.dialect === "postgres") waiting = waiting.forUpdate().skipLocked();
  await trx
    .updateTable("webhook_deliveries")
    .set({ status: "skipped", updated_at: at })
    .where("id", "in", waiting)
    .execute();
  await recordSystemAudit(trx, deps, {
    orgId: hook.org_id,
    action: "webhook.auto_disabled",
    target: { type: "webhook", id: hook.id },
    // A workspace hook's row names its project, as every workspace_webhook.* row does.
    data: {
      ...(hook.project_id ? { projectId: hook.project_id } : {}),
      url: hook.url,
      consecutiveFailures: hook.consecutive_failures,
      reason,
    },
  });
  await notifyOrgAdmins(trx, deps, {
    orgId: hook.org_id,
    kind: "webhook.auto_disabled",
    title: "A webhook was disabled",
    body: `${hook.url} was ${reason}. Fix the receiver, then resume it with PATCH {"active": true}.`,
    data: { webhookId: hook.id, projectId: hook.project_id },
  });
  return hook.consecutive_failures;
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

const RETENTION_BATCH = 1_000;
/** Deliveries claimed, sent and recorded together by one worker slot. */
const DELIVERY_BATCH = 64;

/**
 * The `webhook.deliver` job: one attempt per run; the queue retries with backoff until
 * `maxAttempts`. And the daily retention job, which deletes deliveries (with their attempts)
 * older than WEBHOOK_DELIVERIES_RETENTION_DAYS, in batches; 0 keeps everything.
 */
export function deliveryJobs(deps: Deps) {
  return {
    "webhooks.retention": {
      async handle(_payload: Record<string, unknown>, _run: JobRun): Promise<void> {
        const days = deps.config.webhookDeliveriesRetentionDays;
        if (days === 0) return;
        // A delivery's id carries its creation time, so its primary key finds the old ones.
        const cutoff = firstIdAt("dlv", new Date(deps.clock.now().getTime() - days * DAY_MS));
        for (;;) {
          const batch = await deps.db
            .selectFrom("webhook_deliveries")
            .select("id")
            .where("id", "<", cutoff)
            .limit(RETENTION_BATCH)
            .execute();
          if (batch.length === 0) return;
          const ids = batch.map((row) => row.id);
          await deps.db.transaction().execute(async (trx) => {
            await trx.deleteFrom("webhook_attempts").where("delivery_id", "in", ids).execute();
            await trx.deleteFrom("webhook_deliveries").where("id", "in", ids).execute();
          });
          if (batch.length < RETENTION_BATCH) return;
        }
      },
    },
    "webhook.deliver": {
      batchSize: DELIVERY_BATCH,
      maxInFlight: deps.config.webhookConcurrency,
      // A delivery is inserted in the transaction that enqueues its job: no row, nothing sent.
      findsOwnRows: true,
      // The delivery and its attempts are the record; the job's row goes once it has succeeded.
      forgetsSucceeded: true,
      backoffBaseMs: deps.config.webhookBackoffBaseMs,
      async handleBatch(runs, signal) {
        const attempts = await startAttempts(
          deps,
          runs.map(({ job, payload, local }) => ({
            deliveryId: String(payload.deliveryId),
            final: job.attempts >= job.max_attempts,
            timeoutMs: attemptTimeoutWithin(job.timeout_ms),
            // Handed over by the dispatch that inserted it (see WorkspaceDispatcher).
            ...(local ? { delivery: local as Delivery } : {}),
          })),
          signal,
        );
        return attempts.map(async (attempt): Promise<JobResult> => {
          const { result, record } = await attempt;
          const failed = result.status === "failed" || result.status === "dead";
          return {
            error: failed ? new Error(`delivery failed: ${result.error ?? "unknown error"}`) : null,
            data: record,
          };
        });
      },
      record: (trx, records) =>
        recordAttempts(
          trx,
          deps,
          records.filter((record): record is AttemptRecord => record !== null && record !== undefined),
        ),
    },
  } satisfies JobHandlers;
}

export const deliverySchedule: RecurringJob[] = [
  { name: "webhooks.retention", everyMs: DAY_MS, kind: "webhooks.retention" },
];
