import type { Selectable } from "kysely";
import type { AuditEventsTable } from "../../db/schema.ts";
import { derivedId } from "../../lib/ids.ts";
import { fromJsonColumn } from "../../lib/json.ts";
import { type AuditActor, auditRow, SYSTEM_ACTOR } from "../audit/service.ts";
import { type WorkspaceCtx, workspaceActor } from "./access.ts";
import type { WorkspaceEvent } from "./dispatch.ts";

/**
 * Outbox events of this channel carry audit rows, never deliveries (no hook pattern can start
 * with `_`). A workspace change commits in the workspace database, which on SQLite cannot share a
 * transaction with the control database's audit log: its audit row goes into the outbox in the
 * change's own transaction instead, and the dispatcher writes it to the log (once: its id comes
 * from the event's) with the deliveries. No change without its audit row, none without its change.
 */
export const AUDIT_CHANNEL = "_audit";

interface AuditPayload {
  actor: AuditActor;
  ip: string | null;
  target: { type: string; id: string };
  data: Record<string, unknown>;
}

/** The outbox event of an audit row for a workspace change made by `ctx`'s caller. */
export function auditEvent(
  ctx: WorkspaceCtx,
  action: string,
  target: { type: string; id: string },
  data: Record<string, unknown> = {},
): WorkspaceEvent {
  const payload: AuditPayload = {
    actor: workspaceActor(ctx),
    ip: ctx.ip,
    target,
    data: { projectId: ctx.project.id, ...data },
  };
  return { channel: AUDIT_CHANNEL, event: action, data: payload };
}

/** The audit rows of a project's outbox audit events, with ids derived from theirs. */
export function auditRows(
  orgId: string,
  events: Array<{ id: string; event: string; data: string; created_at: string }>,
): Selectable<AuditEventsTable>[] {
  return events.map((event) => {
    const payload = fromJsonColumn<AuditPayload>(event.data, {
      actor: SYSTEM_ACTOR,
      ip: null,
      target: { type: "workspace", id: "" },
      data: {},
    });
    return auditRow(
      derivedId("aud", new Date(event.created_at), event.id),
      event.created_at,
      payload.actor,
      payload.ip,
      {
        orgId,
        action: event.event,
        target: payload.target,
        data: payload.data,
      },
    );
  });
}
