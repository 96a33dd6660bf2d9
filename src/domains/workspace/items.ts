import { isUniqueViolation } from "../../db/database.ts";
import { ConflictError, NotFoundError } from "../../http/errors.ts";
import { newId } from "../../lib/ids.ts";
import { requireAdmin, requireMember, type WorkspaceCtx } from "./access.ts";
import type { WorkspaceDb } from "./databases.ts";
import { recordEvent, type WorkspaceEvent } from "./dispatch.ts";

/**
 * Runs a workspace write and the event it raises in one workspace transaction, then hands the
 * event to the dispatcher. The hint is written first, so a crash after the commit cannot strand it.
 */
export async function writeWithEvent<T>(
  ctx: WorkspaceCtx,
  change: (trx: WorkspaceDb) => Promise<{ result: T; event: WorkspaceEvent | null }>,
): Promise<T> {
  await ctx.runtime.dispatcher.markPending(ctx.project.id);
  const { result, event } = await ctx.db.transaction().execute(async (trx) => {
    const outcome = await change(trx);
    if (outcome.event) await recordEvent(trx, ctx.deps, outcome.event);
    return outcome;
  });
  if (event) ctx.runtime.dispatcher.schedule(ctx.project.id);
  return result;
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

async function assertCollection(db: WorkspaceDb, slug: string): Promise<void> {
  const found = await db.selectFrom("collections").select("slug").where("slug", "=", slug).executeTakeFirst();
  if (!found) throw new NotFoundError(`collection '${slug}' not found`);
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
    await assertCollection(trx, collection);
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
