import type { Selectable } from "kysely";
import type { Dialect } from "../../db/database.ts";
import type { WebhookDeliveriesTable } from "../../db/schema.ts";
import { insertRows } from "../../db/shapes.ts";
import type { Deps } from "../../deps.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { derivedId, isIdOf, newId } from "../../lib/ids.ts";
import { fromJsonColumn } from "../../lib/json.ts";
import { deliveryJob, deliveryRow } from "../webhooks/events.ts";
import { AUDIT_CHANNEL, auditRows } from "./audit.ts";
import { matchesAnyPattern, projectPayload } from "./patterns.ts";
import type { OutboxEvent, WorkspaceStore } from "./store.ts";

export interface WorkspaceEvent {
  channel: string;
  event: string;
  data: unknown;
}

/** The outbox rows of events; insert them in the transaction of the changes they report. */
export function outboxRows(deps: Deps, events: WorkspaceEvent[]) {
  const now = deps.clock.now();
  const at = now.toISOString();
  return events.map((event) => ({
    id: newId("evt", now),
    channel: event.channel,
    event: event.event,
    data: JSON.stringify(event.data ?? null),
    created_at: at,
  }));
}

const BATCH = 500;

/**
 * Same event and hook, same delivery id: dispatching an event twice creates its deliveries once.
 * The id carries the event's time, so a pass's new deliveries (and their jobs, keyed by it) sit
 * together in their indexes instead of on as many random pages, each written out at commit.
 */
function deliveryIdFor(event: { id: string; created_at: string }, webhookId: string): string {
  return derivedId("dlv", new Date(event.created_at), `${event.id}:${webhookId}`);
}

/**
 * Passes for one project start at most this often, so a busy project's events go in batches. A
 * pass costs about ten round trips on PostgreSQL (two on SQLite, in process), so there it waits
 * longer: at 1,500 events/s, 20 ms instead of 5 took a project's passes from ~7 events to ~30
 * and its creates/s with one hook from ~1,250 to ~1,500, for ~10 ms more latency.
 */
const PASS_INTERVAL_MS: Record<Dialect, number> = { sqlite: 5, postgres: 20 };
/** How often a process writing to a project refreshes its durable hint. */
const HINT_REFRESH_MS = 30_000;
/** A hint not refreshed for this long, over an empty outbox, is cleared by the sweep. */
const HINT_TTL_MS = 2 * HINT_REFRESH_MS;

export interface DispatcherOptions {
  /** A server whose worker runs on a thread passes its `schedule` calls there. */
  forward?: (projectId: string) => void;
}

/**
 * Turns workspace outbox events into deliveries. A workspace database (a SQLite file of its own)
 * cannot commit together with the control database, so each change writes its event to the
 * workspace's outbox in its own transaction, and this moves events on: for each event, one
 * delivery and one `webhook.deliver` job per matching active hook, written in one control-plane
 * transaction, then the events leave the outbox. A crash between the two steps dispatches the
 * events again, and deterministic delivery ids make that a no-op. Passes for a busy project run
 * at most every PASS_INTERVAL_MS and take everything that has accumulated.
 *
 * Which projects may hold undispatched events is kept in `workspace_outbox_hints`, written before
 * the first change and refreshed every HINT_REFRESH_MS while changes go on; the recurring sweep
 * dispatches every hinted project and clears hints that went stale over an empty outbox, and so
 * does a sweep at start-up, so no event waits for long after a crash. Sweeps read the hints from
 * the control database and open only the workspaces they name, a few at a time.
 */
export class WorkspaceDispatcher {
  /** When this process last wrote each project's hint. */
  private readonly hinted = new Map<string, number>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  private readonly lastStart = new Map<string, number>();

  constructor(
    private readonly deps: Deps,
    private readonly store: WorkspaceStore,
    private readonly options: DispatcherOptions = {},
  ) {}

  /** Before a change: make sure (durably) this project's outbox is known to need dispatch. */
  async markPending(projectId: string): Promise<void> {
    const now = Date.now();
    const written = this.hinted.get(projectId);
    if (written !== undefined && now - written < HINT_REFRESH_MS) return;
    const at = this.deps.clock.now().toISOString();
    await this.deps.db
      .insertInto("workspace_outbox_hints")
      .values({ project_id: projectId, created_at: at })
      .onConflict((oc) => oc.column("project_id").doUpdateSet({ created_at: at }))
      .execute();
    this.hinted.set(projectId, now);
  }

  /** After a change commits: dispatch soon; changes meanwhile coalesce into the next pass. */
  schedule(projectId: string): void {
    if (this.options.forward) {
      this.options.forward(projectId);
      return;
    }
    if (this.running.has(projectId)) {
      this.again.add(projectId);
      return;
    }
    const interval = PASS_INTERVAL_MS[this.deps.dialect];
    const wait = Math.max(0, (this.lastStart.get(projectId) ?? 0) + interval - Date.now());
    const run = new Promise<void>((resolve) => (wait > 0 ? setTimeout(resolve, wait) : setImmediate(resolve)))
      .then(() => {
        this.lastStart.set(projectId, Date.now());
        return this.dispatch(projectId);
      })
      .catch((error: unknown) => this.deps.log.error({ err: error, projectId }, "dispatching workspace events failed"))
      .finally(() => {
        this.running.delete(projectId);
        if (this.again.delete(projectId)) this.schedule(projectId);
        else this.lastStart.delete(projectId);
      });
    this.running.set(projectId, run);
  }

  /** Waits for dispatches in flight (shutdown). */
  async settle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()]);
  }

  /** Moves everything in the project's outbox on. */
  async dispatch(projectId: string): Promise<void> {
    for (;;) {
      const events = await this.store.readOutbox(projectId, BATCH);
      if (!events || events.length === 0) return;
      await this.deliver(projectId, events);
      await this.store.clearOutbox(
        projectId,
        events.map((event) => event.id),
      );
      if (events.length < BATCH) return;
    }
  }

  /**
   * Dispatches a hinted project, then clears its hint if nobody refreshed it for HINT_TTL_MS and
   * the outbox is empty; an event that slipped in meanwhile puts the hint back.
   */
  private async sweepOne(projectId: string): Promise<void> {
    await this.dispatch(projectId);
    const staleBefore = new Date(this.deps.clock.now().getTime() - HINT_TTL_MS).toISOString();
    const cleared = await this.deps.db
      .deleteFrom("workspace_outbox_hints")
      .where("project_id", "=", projectId)
      .where("created_at", "<", staleBefore)
      .executeTakeFirst();
    if (Number(cleared.numDeletedRows) === 0) return;
    this.hinted.delete(projectId);
    const late = await this.store.readOutbox(projectId, 1);
    if (late && late.length > 0) await this.markPending(projectId);
  }

  private async deliver(projectId: string, events: OutboxEvent[]): Promise<void> {
    const { deps } = this;
    const project =
      (await deps.db.selectFrom("projects").select(["org_id"]).where("id", "=", projectId).executeTakeFirst()) ??
      // A branch's workspace: no hooks, but its changes' audit rows go to its project's org.
      (isIdOf("brn", projectId)
        ? await deps.db
            .selectFrom("branches")
            .innerJoin("projects", "projects.id", "branches.project_id")
            .select("projects.org_id")
            .where("branches.id", "=", projectId)
            .executeTakeFirst()
        : undefined);
    if (!project) return;
    const audits = events.filter((event) => event.channel === AUDIT_CHANNEL);
    const hooks = await deps.db
      .selectFrom("webhooks")
      .select(["id", "url", "events", "payload_fields"])
      .where("project_id", "=", projectId)
      .where("deleted_at", "is", null)
      .where("active", "=", 1)
      .execute();
    if (hooks.length === 0 && audits.length === 0) return;
    const at = deps.clock.now().toISOString();
    const targets = hooks.map((hook) => ({
      hook,
      patterns: fromJsonColumn<string[]>(hook.events, []),
      fields: fromJsonColumn<string[] | null>(hook.payload_fields, null),
    }));
    const rows: Selectable<WebhookDeliveriesTable>[] = [];
    for (const event of events) {
      if (event.channel === AUDIT_CHANNEL) continue;
      const name = `${event.channel}:${event.event}`;
      // The body for hooks that take the whole row, shared by them: the outbox holds the data as
      // JSON.stringify wrote it, so it goes in as it is (the bytes JSON.stringify would write).
      let whole: string | undefined;
      let data: { value: unknown } | undefined;
      for (const { hook, patterns, fields } of targets) {
        if (!matchesAnyPattern(patterns, name)) continue;
        const id = deliveryIdFor(event, hook.id);
        let body: string;
        if (fields && fields.length > 0) {
          data ??= { value: fromJsonColumn<unknown>(event.data, null) };
          body = JSON.stringify({
            channel: event.channel,
            event: event.event,
            data: projectPayload(data.value, fields),
            deliveredAt: at,
          });
        } else {
          whole ??=
            `{"channel":${JSON.stringify(event.channel)},"event":${JSON.stringify(event.event)},` +
            `"data":${event.data},"deliveredAt":${JSON.stringify(at)}}`;
          body = whole;
        }
        rows.push(
          deliveryRow({
            id,
            orgId: project.org_id,
            projectId,
            targetType: "webhook",
            targetId: hook.id,
            event: name,
            url: hook.url,
            body,
            at,
          }),
        );
      }
    }
    if (rows.length === 0 && audits.length === 0) return;
    // Through the queue's transaction: on PostgreSQL this process's worker gets the new jobs
    // after the commit, without claiming them.
    await deps.jobs.transaction(deps.db, async (trx) => {
      // An audit row dispatched before (a crash before the outbox was cleared) is there already.
      await insertRows(trx, deps.dialect, "audit_events", auditRows(project.org_id, audits), { skipConflictOn: "id" });
      // A delivery that exists already (the event was dispatched before) has its job already:
      // only the deliveries inserted now get one.
      const added = await insertRows(trx, deps.dialect, "webhook_deliveries", rows, {
        skipConflictOn: "id",
        returningIds: true,
      });
      const byId = new Map(rows.map((row) => [row.id, row]));
      // With the row as inserted: this process's worker, taking the job, need not read it back.
      await deps.jobs.enqueue(trx, ...added.map((deliveryId) => deliveryJob(deps, deliveryId, byId.get(deliveryId))));
    });
  }

  /**
   * Dispatches every project with a hint, SWEEP_CONCURRENCY at a time, reading the hints a page
   * at a time: only workspaces that may hold undispatched events are opened.
   */
  async sweep(): Promise<void> {
    let after = "";
    for (;;) {
      const page = await this.deps.db
        .selectFrom("workspace_outbox_hints")
        .select("project_id")
        .where("project_id", ">", after)
        .orderBy("project_id")
        .limit(SWEEP_PAGE)
        .execute();
      const ids = page.map((row) => row.project_id);
      let next = 0;
      const sweeper = async () => {
        while (next < ids.length) {
          const projectId = ids[next++] as string;
          await this.sweepOne(projectId).catch((error: unknown) =>
            this.deps.log.error({ err: error, projectId }, "sweeping a workspace outbox failed"),
          );
        }
      };
      await Promise.all(Array.from({ length: SWEEP_CONCURRENCY }, sweeper));
      if (page.length < SWEEP_PAGE) return;
      after = ids[ids.length - 1] as string;
    }
  }
}

/** Hinted projects read per page, and swept at once, by a sweep. */
const SWEEP_PAGE = 500;
const SWEEP_CONCURRENCY = 4;

export function dispatchJobs(dispatcher: WorkspaceDispatcher): JobHandlers {
  return { "workspace.sweep": { handle: () => dispatcher.sweep() } };
}

export const dispatchSchedule: RecurringJob[] = [{ name: "workspace.sweep", everyMs: 60_000, kind: "workspace.sweep" }];
