import { createHash } from "node:crypto";
import type { Selectable } from "kysely";
import type { WebhookDeliveriesTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import type { JobHandlers, RecurringJob } from "../../jobs/worker.ts";
import { newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { deliveryHeaders } from "../webhooks/events.ts";
import type { WorkspaceDatabases, WorkspaceDb } from "./databases.ts";
import { matchesAnyPattern, projectPayload } from "./patterns.ts";

export interface WorkspaceEvent {
  channel: string;
  event: string;
  data: unknown;
}

/** Writes an event to the workspace outbox; call it in the transaction of the change it reports. */
export async function recordEvent(trx: WorkspaceDb, deps: Deps, event: WorkspaceEvent): Promise<void> {
  const now = deps.clock.now();
  await trx
    .insertInto("events")
    .values({
      id: newId("evt", now),
      channel: event.channel,
      event: event.event,
      data: JSON.stringify(event.data ?? null),
      created_at: now.toISOString(),
    })
    .execute();
}

const BATCH = 500;

/** Same event and hook, same delivery id: dispatching an event twice creates its deliveries once. */
function deliveryIdFor(eventId: string, webhookId: string): string {
  return `dlv_${createHash("sha256").update(`${eventId}:${webhookId}`).digest("hex").slice(0, 26)}`;
}

/**
 * Turns workspace outbox events into deliveries. A workspace database (a SQLite file of its own)
 * cannot commit together with the control database, so each change writes its event to the
 * workspace's outbox in its own transaction, and this moves events on: for each event, one
 * delivery and one `webhook.deliver` job per matching active hook, written in one control-plane
 * transaction, then the events leave the outbox. A crash between the two steps dispatches the
 * events again, and deterministic delivery ids make that a no-op.
 *
 * Which projects may hold undispatched events is kept in `workspace_outbox_hints`, written before
 * the change; the recurring sweep dispatches every hinted project, and a full sweep at start-up
 * looks at every workspace, so no event waits forever after a crash.
 */
export class WorkspaceDispatcher {
  private readonly hinted = new Set<string>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();

  constructor(
    private readonly deps: Deps,
    private readonly databases: WorkspaceDatabases,
  ) {}

  /** Before a change: remember (durably, once) that this project's outbox may need dispatch. */
  async markPending(projectId: string): Promise<void> {
    if (this.hinted.has(projectId)) return;
    await this.deps.db
      .insertInto("workspace_outbox_hints")
      .values({ project_id: projectId, created_at: this.deps.clock.now().toISOString() })
      .onConflict((oc) => oc.column("project_id").doNothing())
      .execute();
    this.hinted.add(projectId);
  }

  /** After a change commits: dispatch soon; overlapping requests coalesce into one more pass. */
  schedule(projectId: string): void {
    if (this.running.has(projectId)) {
      this.again.add(projectId);
      return;
    }
    const run = this.dispatch(projectId)
      .catch((error: unknown) => this.deps.log.error({ err: error, projectId }, "dispatching workspace events failed"))
      .finally(() => {
        this.running.delete(projectId);
        if (this.again.delete(projectId)) this.schedule(projectId);
      });
    this.running.set(projectId, run);
  }

  /** Waits for dispatches in flight (shutdown). */
  async settle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()]);
  }

  async dispatch(projectId: string): Promise<void> {
    const db = this.databases.get(projectId);
    if (!db) return;
    for (;;) {
      const events = await db.selectFrom("events").selectAll().orderBy("id").limit(BATCH).execute();
      if (events.length > 0) {
        await this.deliver(projectId, events);
        await db
          .deleteFrom("events")
          .where(
            "id",
            "in",
            events.map((e) => e.id as string),
          )
          .execute();
        if (events.length === BATCH) continue;
      }
      // Clear the hint, then look once more: an event committed meanwhile keeps it set.
      this.hinted.delete(projectId);
      await this.deps.db.deleteFrom("workspace_outbox_hints").where("project_id", "=", projectId).execute();
      const late = await db.selectFrom("events").select("id").limit(1).executeTakeFirst();
      if (!late) return;
      await this.markPending(projectId);
    }
  }

  private async deliver(projectId: string, events: Record<string, unknown>[]): Promise<void> {
    const { deps } = this;
    const project = await deps.db
      .selectFrom("projects")
      .select(["org_id"])
      .where("id", "=", projectId)
      .executeTakeFirst();
    if (!project) return;
    const hooks = await deps.db
      .selectFrom("webhooks")
      .select(["id", "url", "events", "payload_fields"])
      .where("project_id", "=", projectId)
      .where("deleted_at", "is", null)
      .where("active", "=", 1)
      .execute();
    if (hooks.length === 0) return;
    const now = deps.clock.now();
    const at = now.toISOString();
    const rows: Selectable<WebhookDeliveriesTable>[] = [];
    for (const event of events) {
      const name = `${event.channel}:${event.event}`;
      const data = fromJsonColumn<unknown>(event.data as string, null);
      for (const hook of hooks) {
        if (!matchesAnyPattern(fromJsonColumn<string[]>(hook.events, []), name)) continue;
        const id = deliveryIdFor(event.id as string, hook.id);
        const body = JSON.stringify({
          channel: event.channel,
          event: event.event,
          data: projectPayload(data, fromJsonColumn<string[] | null>(hook.payload_fields, null)),
          deliveredAt: at,
        });
        rows.push({
          id,
          org_id: project.org_id,
          project_id: projectId,
          target_type: "webhook",
          target_id: hook.id,
          event: name,
          url: hook.url,
          body,
          headers: toJsonColumn(deliveryHeaders(name, id)) ?? "{}",
          status: "pending",
          attempts: 0,
          last_status_code: null,
          last_error: null,
          created_at: at,
          updated_at: at,
        });
      }
    }
    if (rows.length === 0) return;
    await deps.db.transaction().execute(async (trx) => {
      for (let i = 0; i < rows.length; i += 200) {
        await trx
          .insertInto("webhook_deliveries")
          .values(rows.slice(i, i + 200))
          .onConflict((oc) => oc.column("id").doNothing())
          .execute();
      }
      await deps.jobs.enqueue(
        trx,
        ...rows.map((row) => ({
          kind: "webhook.deliver",
          payload: { deliveryId: row.id },
          maxAttempts: deps.config.webhookMaxAttempts,
          timeoutMs: deps.config.webhookTimeoutMs + 5_000,
          idempotencyKey: row.id,
        })),
      );
    });
  }

  /** Dispatches every project with a hint (recurring), or every workspace there is (`all`). */
  async sweep(all: boolean): Promise<void> {
    const projects = all
      ? await this.deps.db
          .selectFrom("projects")
          .select("id as project_id")
          .where("status", "in", ["active", "paused"])
          .execute()
      : await this.deps.db.selectFrom("workspace_outbox_hints").select("project_id").execute();
    for (const { project_id } of projects) {
      await this.dispatch(project_id).catch((error: unknown) =>
        this.deps.log.error({ err: error, projectId: project_id }, "sweeping a workspace outbox failed"),
      );
    }
  }
}

export function dispatchJobs(dispatcher: WorkspaceDispatcher): JobHandlers {
  return {
    "workspace.sweep": { handle: () => dispatcher.sweep(false) },
    "workspace.sweep_all": { handle: () => dispatcher.sweep(true) },
  };
}

export const dispatchSchedule: RecurringJob[] = [
  { name: "workspace.sweep", everyMs: 60_000, kind: "workspace.sweep" },
  { name: "workspace.sweep_all", everyMs: 86_400_000, kind: "workspace.sweep_all" },
];
