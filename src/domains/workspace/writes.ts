import { type QueryCreator, sql } from "kysely";
import type { Dialect } from "../../db/database.ts";
import { chunked } from "../../db/shapes.ts";
import type { Deps } from "../../deps.ts";
import { stampHistory } from "../backups/history.ts";
import type { WorkspaceCtx } from "./access.ts";
import { outboxRows, type WorkspaceEvent } from "./dispatch.ts";
import type { WorkspaceDb } from "./pool.ts";
import { throughGate } from "./write-gate.ts";

/** What a write answers, and the event it raises (none if it changed nothing worth telling). */
export interface Applied<T = unknown> {
  result: T;
  event: WorkspaceEvent | null;
  /** The audit row of an admin's change, as an outbox event (see `auditEvent`). */
  audit?: WorkspaceEvent;
}

/** A row of a workspace table (the template's schema, not Plinth's). */
type Row = object;

/**
 * A workspace write: either a change that runs its own statements in its group's transaction, or
 * a plain insert of one row, which the group makes together with the others' (one statement per
 * table, and on PostgreSQL one statement in all, outbox events included).
 */
type Write =
  | { kind: "change"; apply: (trx: WorkspaceDb) => Promise<Applied> }
  | { kind: "insert"; table: string; row: Row; applied: Applied };

/** A write waiting for its group, and whom to tell when it commits. */
type QueuedWrite = Write & {
  resolve: (value: Applied) => void;
  reject: (error: unknown) => void;
};

/**
 * Runs a workspace write and the event it raises in one workspace transaction, then hands the
 * event to the dispatcher. The hint is written first, so a crash after the commit cannot strand it.
 */
export function writeWithEvent<T>(ctx: WorkspaceCtx, apply: (trx: WorkspaceDb) => Promise<Applied<T>>): Promise<T> {
  return write(ctx, { kind: "change", apply });
}

/**
 * Adds one row to a workspace table and raises its event, as `writeWithEvent` does; the row is
 * inserted together with those of the other writes of its group.
 */
export function insertWithEvent<T>(ctx: WorkspaceCtx, table: string, row: Row, applied: Applied<T>): Promise<T> {
  return write(ctx, { kind: "insert", table, row, applied });
}

async function write<T>(ctx: WorkspaceCtx, change: Write): Promise<T> {
  await ctx.runtime.dispatcher.markPending(ctx.project.id);
  const { result, event, audit } = await throughGate(ctx.project.id, () => groupWrite(ctx.db, ctx.deps, change));
  if (event || audit) ctx.runtime.dispatcher.schedule(ctx.project.id);
  return result as T;
}

/** Per workspace database: writes waiting for a group, and groups committing now. */
interface WriteQueue {
  waiting: QueuedWrite[];
  committing: number;
  scheduled: boolean;
}
const writeQueues = new WeakMap<WorkspaceDb, WriteQueue>();

/**
 * Groups committing at once per workspace: SQLite has one connection (and one writer); on
 * PostgreSQL a few groups overlap, so that round trips, not the pool, set the pace.
 */
const CONCURRENT_GROUPS: Record<Dialect, number> = { sqlite: 1, postgres: 4 };
/** Writes per group at most, so a group's statements stay well inside both databases' limits on bound parameters. */
const MAX_GROUP = 500;

/**
 * Group commit: writes to one workspace that arrive together (the same turn of the event loop,
 * or while earlier groups commit) share one transaction, their rows are inserted together, and
 * the events of those that succeed go into the outbox together, at the end of it. Each caller
 * hears back only after the commit, so nothing is acknowledged before it is durable, and a write
 * that fails fails alone:
 *
 * - SQLite: each change runs inside a savepoint of its own, and so do the group's inserts; a
 *   failing change rolls back to its savepoint and the others commit; if the inserts fail
 *   together, each is tried again in a savepoint of its own. Every SQLite commit writes the WAL,
 *   so this is most of what a write costs.
 * - PostgreSQL: a failed statement aborts the whole transaction, and savepoints would cost two
 *   more round trips per write, so the group is tried as one transaction and, if any write in it
 *   fails, each is run again on its own. A group of inserts is one statement (rows and outbox
 *   events, in a data-modifying WITH), which needs no BEGIN and COMMIT: one round trip for the
 *   group, where a write on its own would take four.
 *
 * On SQLite a commit that fails fails the whole group, and none of it is written; on PostgreSQL
 * that too sends each write on its own. In a group, the changes run before the inserts: no
 * change can depend on an insert of its own group, as nobody knows an inserted row's id before
 * its write has answered.
 */
function groupWrite(db: WorkspaceDb, deps: Deps, change: Write): Promise<Applied> {
  return new Promise((resolve, reject) => {
    let queue = writeQueues.get(db);
    if (!queue) {
      queue = { waiting: [], committing: 0, scheduled: false };
      writeQueues.set(db, queue);
    }
    queue.waiting.push({ ...change, resolve, reject });
    scheduleGroup(db, deps, queue);
  });
}

function scheduleGroup(db: WorkspaceDb, deps: Deps, queue: WriteQueue): void {
  if (queue.scheduled || queue.waiting.length === 0 || queue.committing >= CONCURRENT_GROUPS[deps.dialect]) return;
  queue.scheduled = true;
  setImmediate(() => {
    queue.scheduled = false;
    const group = queue.waiting.splice(0, MAX_GROUP);
    queue.committing++;
    const commit = deps.dialect === "sqlite" ? commitWithSavepoints : commitOrSplit;
    void commit(db, deps, group).finally(() => {
      queue.committing--;
      if (queue.committing === 0 && queue.waiting.length === 0) writeQueues.delete(db);
      else scheduleGroup(db, deps, queue);
    });
    scheduleGroup(db, deps, queue);
  });
}

type Outcome = { ok: true; value: Applied } | { ok: false; error: unknown };

/** The outbox events of the writes that were applied. */
function eventsOf(applied: Applied[]): WorkspaceEvent[] {
  return applied.flatMap((outcome) => [
    ...(outcome.event ? [outcome.event] : []),
    ...(outcome.audit ? [outcome.audit] : []),
  ]);
}

/** The rows of a group's inserts, by table. */
function rowsByTable(writes: QueuedWrite[]): Map<string, Row[]> {
  const tables = new Map<string, Row[]>();
  for (const write of writes) {
    if (write.kind !== "insert") continue;
    const rows = tables.get(write.table);
    if (rows) rows.push(write.row);
    else tables.set(write.table, [write.row]);
  }
  return tables;
}

async function inSavepoint(trx: WorkspaceDb, run: () => Promise<Applied>): Promise<Outcome> {
  await sql`savepoint plinth_write`.execute(trx);
  try {
    const value = await run();
    await sql`release plinth_write`.execute(trx);
    return { ok: true, value };
  } catch (error) {
    await sql`rollback to plinth_write`.execute(trx);
    await sql`release plinth_write`.execute(trx);
    return { ok: false, error };
  }
}

/** SQLite: the writes' rows, in statements of power-of-two sizes (see src/db/shapes.ts). */
async function insertRows(trx: WorkspaceDb, writes: QueuedWrite[]): Promise<void> {
  for (const [table, rows] of rowsByTable(writes)) {
    for (const chunk of chunked("sqlite", rows, MAX_GROUP)) await trx.insertInto(table).values(chunk).execute();
  }
}

async function commitWithSavepoints(db: WorkspaceDb, deps: Deps, group: QueuedWrite[]): Promise<void> {
  const outcomes = new Map<QueuedWrite, Outcome>();
  try {
    await db.transaction().execute(async (trx) => {
      await stampHistory(trx, "sqlite");
      for (const write of group) {
        if (write.kind === "change") outcomes.set(write, await inSavepoint(trx, () => write.apply(trx)));
      }
      const inserts = group.filter((write) => write.kind === "insert");
      if (inserts.length > 0) {
        const together = await inSavepoint(trx, async () => {
          await insertRows(trx, inserts);
          return { result: undefined, event: null };
        });
        for (const write of inserts) {
          outcomes.set(
            write,
            together.ok
              ? { ok: true, value: write.applied }
              : await inSavepoint(trx, async () => {
                  await insertRows(trx, [write]);
                  return write.applied;
                }),
          );
        }
      }
      const applied = group.flatMap((write) => {
        const outcome = outcomes.get(write);
        return outcome?.ok ? [outcome.value] : [];
      });
      await insertOutbox(trx, deps, eventsOf(applied));
    });
  } catch (error) {
    for (const write of group) write.reject(error);
    return;
  }
  for (const write of group) {
    const outcome = outcomes.get(write);
    if (outcome?.ok) write.resolve(outcome.value);
    else write.reject(outcome ? outcome.error : new Error("write was not applied"));
  }
}

async function insertOutbox(trx: WorkspaceDb, deps: Deps, events: WorkspaceEvent[]): Promise<void> {
  for (const chunk of chunked(deps.dialect, outboxRows(deps, events), MAX_GROUP)) {
    await trx.insertInto("events").values(chunk).execute();
  }
}

async function commitOrSplit(db: WorkspaceDb, deps: Deps, group: QueuedWrite[]): Promise<void> {
  if (group.length > 1) {
    try {
      const values = await commitTogether(db, deps, group);
      for (const [i, write] of group.entries()) write.resolve(values[i] as Applied);
      return;
    } catch {
      // Some write failed (or the commit did): nothing was written; each on its own, below.
    }
  }
  await Promise.all(
    group.map((write) =>
      commitTogether(db, deps, [write]).then(([value]) => write.resolve(value as Applied), write.reject),
    ),
  );
}

/** PostgreSQL: the writes in one transaction, their rows and events in one statement at its end. */
async function commitTogether(db: WorkspaceDb, deps: Deps, writes: QueuedWrite[]): Promise<Applied[]> {
  const run = async (executor: WorkspaceDb) => {
    const applied: Applied[] = [];
    for (const write of writes) applied.push(write.kind === "change" ? await write.apply(executor) : write.applied);
    await insertRowsAndOutbox(executor, deps, writes, eventsOf(applied));
    return applied;
  };
  // One statement is a transaction of its own: a group of inserts needs no BEGIN and COMMIT.
  return writes.every((write) => write.kind === "insert") ? run(db) : db.transaction().execute(run);
}

/** Every insert's row and the outbox's new events, in one statement (PostgreSQL's data-modifying WITH). */
async function insertRowsAndOutbox(
  executor: WorkspaceDb,
  deps: Deps,
  writes: QueuedWrite[],
  events: WorkspaceEvent[],
): Promise<void> {
  const inserts: Array<{ table: string; rows: Row[] }> = [...rowsByTable(writes)].map(([table, rows]) => ({
    table,
    rows,
  }));
  if (events.length > 0) inserts.push({ table: "events", rows: outboxRows(deps, events) });
  const last = inserts.pop();
  if (!last) return;
  // biome-ignore lint/suspicious/noExplicitAny: a workspace schema is the template's, not Plinth's
  let creator: QueryCreator<any> = executor;
  for (const [i, { table, rows }] of inserts.entries()) {
    creator = creator.with(`added_${i}`, (qc) => qc.insertInto(table).values(rows));
  }
  await creator.insertInto(last.table).values(last.rows).execute();
}
