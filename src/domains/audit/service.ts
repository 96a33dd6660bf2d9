import { type Selectable, sql } from "kysely";
import type { Db } from "../../db/database.ts";
import type { AuditEventsTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import { ValidationError } from "../../errors.ts";
import { actorOf } from "../../http/principal.ts";
import { newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import type { Ctx, OrgCtx } from "../context.ts";
import { authorize } from "../orgs/access.ts";

export interface AuditEntry {
  /** Null for account-level events that belong to no org. */
  orgId: string | null;
  /** `entity.verb`, e.g. `org.created`, `api_key.revoked`. */
  action: string;
  target: { type: string; id: string };
  /** What changed. Never secrets: callers pass only safe fields. */
  data?: Record<string, unknown>;
}

/** Writes one audit row. Call it inside the transaction of the mutation it records. */
export async function recordAudit(db: Db, ctx: Ctx, entry: AuditEntry): Promise<void> {
  await writeAudit(db, ctx.deps.clock.now(), actorOf(ctx.principal), ctx.ip, entry);
}

export type AuditActor = { type: string; id: string; email: string | null };

/** An audit row for an actor that is not an org principal (a workspace admin token, say). */
export async function recordAuditAs(db: Db, deps: Deps, actor: AuditActor, ip: string | null, entry: AuditEntry) {
  await writeAudit(db, deps.clock.now(), actor, ip, entry);
}

/** Plinth itself, as the actor of what it did on its own. */
export const SYSTEM_ACTOR: AuditActor = { type: "system", id: "plinth", email: null };

/** An audit row for what Plinth did by itself (a breaker tripping, a job's outcome). */
export async function recordSystemAudit(db: Db, deps: Deps, entry: AuditEntry): Promise<void> {
  await writeAudit(db, deps.clock.now(), SYSTEM_ACTOR, null, entry);
}

/** The row of an audit entry, made at `at` by `actor`. */
export function auditRow(
  id: string,
  at: string,
  actor: AuditActor,
  ip: string | null,
  entry: AuditEntry,
): Selectable<AuditEventsTable> {
  return {
    id,
    org_id: entry.orgId,
    action: entry.action,
    actor_type: actor.type,
    actor_id: actor.id,
    actor_email: actor.email,
    target_type: entry.target.type,
    target_id: entry.target.id,
    data: toJsonColumn(entry.data ?? {}) ?? "{}",
    ip,
    created_at: at,
  };
}

async function writeAudit(db: Db, now: Date, actor: AuditActor, ip: string | null, entry: AuditEntry): Promise<void> {
  await db
    .insertInto("audit_events")
    .values(auditRow(newId("aud", now), now.toISOString(), actor, ip, entry))
    .execute();
}

export interface AuditEvent {
  id: string;
  action: string;
  actor: { type: string; id: string; email?: string };
  target: { type: string; id: string };
  data: Record<string, unknown>;
  ip: string | null;
  createdAt: string;
}

function toAuditEvent(row: Selectable<AuditEventsTable>): AuditEvent {
  return {
    id: row.id,
    action: row.action,
    actor: {
      type: row.actor_type,
      id: row.actor_id,
      ...(row.actor_email ? { email: row.actor_email } : {}),
    },
    target: { type: row.target_type, id: row.target_id },
    data: fromJsonColumn(row.data, {}),
    ip: row.ip,
    createdAt: row.created_at,
  };
}

export interface AuditQuery {
  action?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  limit?: string | undefined;
  offset?: string | undefined;
}

export const AUDIT_DEFAULT_LIMIT = 50;
export const AUDIT_MAX_LIMIT = 500;

const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?$/i;
/** Years 0000–9999: outside them `toISOString()` adds a sign and the stored text no longer sorts by time. */
const MIN_INSTANT_MS = -62_167_219_200_000;
const MAX_INSTANT_MS = 253_402_300_799_999;

/** ISO-8601 text or Unix milliseconds → ISO-8601 UTC, or null when it is neither (or out of range). */
export function parseInstant(value: string): string | null {
  const text = value.trim();
  let ms: number;
  if (/^\d{1,15}$/.test(text)) {
    ms = Number(text);
  } else {
    const parts = ISO_8601.exec(text);
    if (!parts) return null;
    const [, year, month, day, hour = "0", minute = "0", second = "0", zone] = parts;
    // Reject impossible calendar values (2024-02-30, 25:00) instead of letting Date roll them over.
    const calendar = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute)));
    if (
      calendar.getUTCMonth() !== Number(month) - 1 ||
      calendar.getUTCDate() !== Number(day) ||
      calendar.getUTCHours() !== Number(hour) ||
      Number(second) > 59
    ) {
      return null;
    }
    // Without a zone, a date-time is read as UTC (not the server's local time).
    ms = Date.parse(zone || parts[4] === undefined ? text : `${text}Z`);
  }
  if (!Number.isFinite(ms) || ms < MIN_INSTANT_MS || ms > MAX_INSTANT_MS) return null;
  return new Date(ms).toISOString();
}

function parseCount(value: string, min: number, max: number): number | null {
  if (!/^\d+$/.test(value.trim())) return null;
  const n = Number(value);
  return n >= min && n <= max ? n : null;
}

/**
 * Newest first. `action` matches exactly, or by prefix when it ends in `.*` (`member.*`), or
 * everything when it is `*`;
 * `from`/`to` bound `createdAt` inclusively.
 */
export async function listAuditEvents({ ctx, query }: { ctx: OrgCtx; query: AuditQuery }) {
  authorize(ctx, "audit:read");
  const issues: { path: string; message: string }[] = [];
  const from = query.from === undefined ? undefined : parseInstant(query.from);
  const to = query.to === undefined ? undefined : parseInstant(query.to);
  const limit = query.limit === undefined ? AUDIT_DEFAULT_LIMIT : parseCount(query.limit, 1, AUDIT_MAX_LIMIT);
  const offset = query.offset === undefined ? 0 : parseCount(query.offset, 0, Number.MAX_SAFE_INTEGER);
  if (from === null) issues.push({ path: "from", message: "must be an ISO-8601 date-time or Unix milliseconds" });
  if (to === null) issues.push({ path: "to", message: "must be an ISO-8601 date-time or Unix milliseconds" });
  if (limit === null) issues.push({ path: "limit", message: `must be an integer from 1 to ${AUDIT_MAX_LIMIT}` });
  if (offset === null) issues.push({ path: "offset", message: "must be a non-negative integer" });
  if (issues.length > 0) throw new ValidationError(issues);

  let select = ctx.deps.db.selectFrom("audit_events").selectAll().where("org_id", "=", ctx.org.id);
  // `*` is every action, as in event patterns.
  if (query.action && query.action !== "*") {
    if (query.action.endsWith(".*")) {
      const prefix = query.action.slice(0, -1);
      select = select.where(sql<string>`substr(action, 1, ${prefix.length})`, "=", prefix);
    } else {
      select = select.where("action", "=", query.action);
    }
  }
  if (from) select = select.where("created_at", ">=", from);
  if (to) select = select.where("created_at", "<=", to);
  const rows = await select
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .limit(limit as number)
    .offset(offset as number)
    .execute();
  return { events: rows.map(toAuditEvent) };
}
