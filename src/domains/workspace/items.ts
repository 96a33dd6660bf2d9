import { sql } from "kysely";
import { type Dialect, isUniqueViolation } from "../../db/database.ts";
import type { Deps } from "../../deps.ts";
import { ConflictError, NotFoundError } from "../../http/errors.ts";
import { newId } from "../../lib/ids.ts";
import { requireAdmin, requireMember, type WorkspaceCtx } from "./access.ts";
import type { WorkspaceDb } from "./databases.ts";
import { recordEvents, type WorkspaceEvent } from "./dispatch.ts";

type Change<T> = (trx: WorkspaceDb) => Promise<{ result: T; event: WorkspaceEvent | null }>;

/**
 * Runs a workspace write and the event it raises in one workspace transaction, then hands the
 * event to the dispatcher. The hint is written first, so a crash after the commit cannot strand it.
 */
export async function writeWithEvent<T>(ctx: WorkspaceCtx, change: Change<T>): Promise<T> {
  await ctx.runtime.dispatcher.markPending(ctx.project.id);
  const { result, event } = await groupWrite(ctx.db, ctx.deps, change);
  if (event) ctx.runtime.dispatcher.schedule(ctx.project.id);
  return result;
}

type Applied = { result: unknown; event: WorkspaceEvent | null };

interface QueuedWrite {
  apply: (trx: WorkspaceDb) => Promise<Applied>;
  resolve: (value: Applied) => void;
  reject: (error: unknown) => void;
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

/**
 * Group commit: writes to one workspace that arrive together (the same turn of the event loop,
 * or while earlier groups commit) share one transaction, and the events of those that succeed
 * go into the outbox together, in one statement at the end of it. Each caller hears back only
 * after the commit, so nothing is acknowledged before it is durable, and a write that fails
 * fails alone:
 *
 * - SQLite: each write runs inside a savepoint of its own; a failing one rolls back to it and the
 *   others commit. Every SQLite commit writes the WAL, so this is most of what a write costs.
 * - PostgreSQL: a failed statement aborts the whole transaction, and savepoints would cost two
 *   more round trips per write, so the group is tried as one transaction and, if any write in it
 *   fails, each is run again in a transaction of its own. One BEGIN/COMMIT and one outbox insert
 *   per group instead of per write saves most of a write's round trips but its own statement.
 *
 * A commit that fails fails the whole group, and none of it is written.
 */
function groupWrite<T>(
  db: WorkspaceDb,
  deps: Deps,
  change: Change<T>,
): Promise<{ result: T; event: WorkspaceEvent | null }> {
  return new Promise((resolve, reject) => {
    let queue = writeQueues.get(db);
    if (!queue) {
      queue = { waiting: [], committing: 0, scheduled: false };
      writeQueues.set(db, queue);
    }
    queue.waiting.push({ apply: change, resolve: resolve as (value: Applied) => void, reject });
    scheduleGroup(db, deps, queue);
  });
}

function scheduleGroup(db: WorkspaceDb, deps: Deps, queue: WriteQueue): void {
  if (queue.scheduled || queue.waiting.length === 0 || queue.committing >= CONCURRENT_GROUPS[deps.dialect]) return;
  queue.scheduled = true;
  setImmediate(() => {
    queue.scheduled = false;
    const group = queue.waiting;
    queue.waiting = [];
    queue.committing++;
    const commit = deps.dialect === "sqlite" ? commitWithSavepoints : commitOrSplit;
    void commit(db, deps, group).finally(() => {
      queue.committing--;
      if (queue.committing === 0 && queue.waiting.length === 0) writeQueues.delete(db);
      else scheduleGroup(db, deps, queue);
    });
  });
}

/** The outbox events of the writes that were applied. */
function eventsOf(applied: Applied[]): WorkspaceEvent[] {
  return applied.flatMap((outcome) => (outcome.event ? [outcome.event] : []));
}

async function commitWithSavepoints(db: WorkspaceDb, deps: Deps, group: QueuedWrite[]): Promise<void> {
  const outcomes: Array<{ ok: true; value: Applied } | { ok: false; error: unknown }> = [];
  try {
    await db.transaction().execute(async (trx) => {
      for (const write of group) {
        await sql`savepoint plinth_write`.execute(trx);
        try {
          const value = await write.apply(trx);
          await sql`release plinth_write`.execute(trx);
          outcomes.push({ ok: true, value });
        } catch (error) {
          await sql`rollback to plinth_write`.execute(trx);
          await sql`release plinth_write`.execute(trx);
          outcomes.push({ ok: false, error });
        }
      }
      await recordEvents(trx, deps, eventsOf(outcomes.flatMap((outcome) => (outcome.ok ? [outcome.value] : []))));
    });
  } catch (error) {
    for (const write of group) write.reject(error);
    return;
  }
  group.forEach((write, i) => {
    const outcome = outcomes[i];
    if (outcome?.ok) write.resolve(outcome.value);
    else write.reject(outcome ? outcome.error : new Error("write was not applied"));
  });
}

async function commitOrSplit(db: WorkspaceDb, deps: Deps, group: QueuedWrite[]): Promise<void> {
  const applyAll = async (trx: WorkspaceDb, writes: QueuedWrite[]) => {
    const applied: Applied[] = [];
    for (const write of writes) applied.push(await write.apply(trx));
    await recordEvents(trx, deps, eventsOf(applied));
    return applied;
  };
  if (group.length > 1) {
    try {
      const values = await db.transaction().execute((trx) => applyAll(trx, group));
      for (const [i, write] of group.entries()) write.resolve(values[i] as Applied);
      return;
    } catch {
      // Some write failed (or the commit did): nothing was written; each on its own, below.
    }
  }
  await Promise.all(
    group.map((write) =>
      db
        .transaction()
        .execute((trx) => applyAll(trx, [write]))
        .then(([value]) => write.resolve(value as Applied), write.reject),
    ),
  );
}

interface CollectionRow {
  slug: string;
  name: string;
  created_at: string;
}

function toCollection(row: CollectionRow) {
  return { slug: row.slug, name: row.name, createdAt: row.created_at };
}

export async function createCollection(ctx: WorkspaceCtx, input: { slug: string; name?: string | undefined }) {
  requireAdmin(ctx, true);
  const row: CollectionRow = {
    slug: input.slug,
    name: input.name ?? input.slug,
    created_at: ctx.deps.clock.now().toISOString(),
  };
  try {
    await ctx.db.insertInto("collections").values(row).execute();
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConflictError(`collection '${input.slug}' already exists`);
    throw error;
  }
  return { collection: toCollection(row) };
}

export async function listCollections(ctx: WorkspaceCtx) {
  requireMember(ctx, false);
  const rows = (await ctx.db.selectFrom("collections").selectAll().orderBy("slug").execute()) as CollectionRow[];
  return { collections: rows.map(toCollection) };
}

/**
 * Collections seen to exist, per open workspace database. Collections are never removed (the
 * workspace API has no such operation), so a hit needs no query; a miss asks the database.
 */
const knownCollections = new WeakMap<WorkspaceDb, Set<string>>();

async function assertCollection(db: WorkspaceDb, slug: string, known: WorkspaceDb = db): Promise<void> {
  if (knownCollections.get(known)?.has(slug)) return;
  const found = await db.selectFrom("collections").select("slug").where("slug", "=", slug).executeTakeFirst();
  if (!found) throw new NotFoundError(`collection '${slug}' not found`);
  let slugs = knownCollections.get(known);
  if (!slugs) {
    slugs = new Set();
    knownCollections.set(known, slugs);
  }
  slugs.add(slug);
}

interface ItemRow {
  id: string;
  collection: string;
  data: string;
  created_at: string;
  updated_at: string;
}

/** An item is its data plus `id`, `createdAt` and `updatedAt`, which the data cannot override. */
export function toItem(row: ItemRow): Record<string, unknown> {
  return {
    ...(JSON.parse(row.data) as Record<string, unknown>),
    id: row.id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

const RESERVED_ITEM_KEYS = ["id", "createdAt", "updatedAt"];

function storedData(data: Record<string, unknown>): string {
  const copy = { ...data };
  for (const key of RESERVED_ITEM_KEYS) delete copy[key];
  return JSON.stringify(copy);
}

async function findItem(db: WorkspaceDb, collection: string, id: string): Promise<ItemRow> {
  const row = (await db
    .selectFrom("items")
    .selectAll()
    .where("collection", "=", collection)
    .where("id", "=", id)
    .executeTakeFirst()) as ItemRow | undefined;
  if (!row) throw new NotFoundError("item not found");
  return row;
}

const channel = (collection: string) => `items:${collection}`;

export async function createItem(ctx: WorkspaceCtx, collection: string, data: Record<string, unknown>) {
  requireMember(ctx, true);
  return writeWithEvent(ctx, async (trx) => {
    await assertCollection(trx, collection, ctx.db);
    const at = ctx.deps.clock.now().toISOString();
    const row: ItemRow = { id: newId("itm"), collection, data: storedData(data), created_at: at, updated_at: at };
    await trx.insertInto("items").values(row).execute();
    const item = toItem(row);
    return { result: { item }, event: { channel: channel(collection), event: "created", data: item } };
  });
}

export async function listItems(
  ctx: WorkspaceCtx,
  collection: string,
  page: { limit?: number | undefined; offset?: number | undefined },
) {
  requireMember(ctx, false);
  await assertCollection(ctx.db, collection);
  const rows = (await ctx.db
    .selectFrom("items")
    .selectAll()
    .where("collection", "=", collection)
    .orderBy("created_at")
    .orderBy("id")
    .limit(page.limit ?? 50)
    .offset(page.offset ?? 0)
    .execute()) as ItemRow[];
  return { items: rows.map(toItem) };
}

export async function getItem(ctx: WorkspaceCtx, collection: string, id: string) {
  requireMember(ctx, false);
  return { item: toItem(await findItem(ctx.db, collection, id)) };
}

/** Merges the given top-level keys into the item. */
export async function updateItem(ctx: WorkspaceCtx, collection: string, id: string, data: Record<string, unknown>) {
  requireMember(ctx, true);
  return writeWithEvent(ctx, async (trx) => {
    const current = await findItem(trx, collection, id);
    const merged = { ...(JSON.parse(current.data) as Record<string, unknown>), ...data };
    const row: ItemRow = { ...current, data: storedData(merged), updated_at: ctx.deps.clock.now().toISOString() };
    await trx.updateTable("items").set({ data: row.data, updated_at: row.updated_at }).where("id", "=", id).execute();
    const item = toItem(row);
    return { result: { item }, event: { channel: channel(collection), event: "updated", data: item } };
  });
}

export async function deleteItem(ctx: WorkspaceCtx, collection: string, id: string): Promise<void> {
  requireMember(ctx, true);
  await writeWithEvent(ctx, async (trx) => {
    const current = await findItem(trx, collection, id);
    await trx.deleteFrom("items").where("id", "=", id).execute();
    return { result: undefined, event: { channel: channel(collection), event: "deleted", data: toItem(current) } };
  });
}
