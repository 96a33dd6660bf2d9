import { sql } from "kysely";
import { isUniqueViolation } from "../../db/database.ts";
import { ConflictError, NotFoundError, PayloadTooLargeError } from "../../errors.ts";
import { MAX_BODY_BYTES } from "../../http/body-limit.ts";
import { newId } from "../../lib/ids.ts";
import { requireAdmin, requireMember, type WorkspaceCtx } from "./access.ts";
import { auditEvent } from "./audit.ts";
import type { WorkspaceDb } from "./pool.ts";
import { insertWithEvent, writeWithEvent } from "./writes.ts";

interface CollectionRow {
  slug: string;
  name: string;
  created_at: string;
}

function toCollection(row: CollectionRow) {
  return { slug: row.slug, name: row.name, createdAt: row.created_at };
}

export async function createCollection({
  ctx,
  input,
}: {
  ctx: WorkspaceCtx;
  input: { slug: string; name?: string | undefined };
}) {
  requireAdmin(ctx, true);
  const row: CollectionRow = {
    slug: input.slug,
    name: input.name ?? input.slug,
    created_at: ctx.deps.clock.now().toISOString(),
  };
  try {
    await writeWithEvent(ctx, async (trx) => {
      await trx.insertInto("collections").values(row).execute();
      return {
        result: undefined,
        event: null,
        audit: auditEvent(
          ctx,
          "workspace_collection.created",
          { type: "collection", id: row.slug },
          { name: row.name },
        ),
      };
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new ConflictError(`collection '${input.slug}' already exists`);
    throw error;
  }
  return { collection: toCollection(row) };
}

export async function listCollections({ ctx }: { ctx: WorkspaceCtx }) {
  requireMember(ctx, false);
  // By the slug's bytes on both databases: PostgreSQL would otherwise sort by the database's
  // collation (en_US puts `a_b` before `a-b`), SQLite always by bytes.
  const bySlug = ctx.deps.dialect === "postgres" ? sql`slug collate "C"` : sql`slug`;
  const rows = (await ctx.db.selectFrom("collections").selectAll().orderBy(bySlug).execute()) as CollectionRow[];
  return { collections: rows.map(toCollection) };
}

/**
 * Collections seen to exist, per open workspace database. Collections are never removed (the
 * workspace API has no such operation), so a hit needs no query; a miss asks the database.
 */
const knownCollections = new WeakMap<WorkspaceDb, Set<string>>();

async function assertCollection(db: WorkspaceDb, slug: string): Promise<void> {
  if (knownCollections.get(db)?.has(slug)) return;
  const found = await db.selectFrom("collections").select("slug").where("slug", "=", slug).executeTakeFirst();
  if (!found) throw new NotFoundError(`collection '${slug}' not found`);
  let slugs = knownCollections.get(db);
  if (!slugs) {
    slugs = new Set();
    knownCollections.set(db, slugs);
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

/** An item as the API answers it: its data plus `id`, `createdAt` and `updatedAt`. */
export type Item = { id: string; createdAt: string; updatedAt: string } & Record<string, unknown>;

/** An item is its data plus `id`, `createdAt` and `updatedAt`, which the data cannot override. */
function toItem(row: ItemRow): Item {
  return {
    ...(JSON.parse(row.data) as Record<string, unknown>),
    id: row.id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

const RESERVED_ITEM_KEYS = ["id", "createdAt", "updatedAt"];

/** The data as stored: without the keys an item sets itself. */
function ownKeys(data: Record<string, unknown>): Record<string, unknown> {
  const copy = { ...data };
  for (const key of RESERVED_ITEM_KEYS) delete copy[key];
  return copy;
}

/**
 * The item, or 404. `lock` (PostgreSQL, inside a write): the row stays locked until the commit, so
 * writes to one item that overlap run one after the other, each on the state the last one left.
 */
async function findItem(db: WorkspaceDb, collection: string, id: string, lock = false): Promise<ItemRow> {
  let query = db.selectFrom("items").selectAll().where("collection", "=", collection).where("id", "=", id);
  if (lock) query = query.forUpdate();
  const row = (await query.executeTakeFirst()) as ItemRow | undefined;
  if (!row) throw new NotFoundError("item not found");
  return row;
}

const channel = (collection: string) => `items:${collection}`;

/** Collections exist before their items and are never removed, so the check can precede the insert. */
export async function createItem({
  ctx,
  collection,
  input: data,
}: {
  ctx: WorkspaceCtx;
  collection: string;
  input: Record<string, unknown>;
}) {
  requireMember(ctx, true);
  await assertCollection(ctx.db, collection);
  const at = ctx.deps.clock.now().toISOString();
  const own = ownKeys(data);
  const row: ItemRow = { id: newId("itm"), collection, data: JSON.stringify(own), created_at: at, updated_at: at };
  const item = { ...own, id: row.id, createdAt: at, updatedAt: at };
  return insertWithEvent(ctx, "items", row, {
    result: { item },
    event: { channel: channel(collection), event: "created", data: item },
  });
}

export async function listItems({
  ctx,
  collection,
  query: page,
}: {
  ctx: WorkspaceCtx;
  collection: string;
  query: { limit?: number | undefined; offset?: number | undefined };
}) {
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

export async function getItem({ ctx, collection, id }: { ctx: WorkspaceCtx; collection: string; id: string }) {
  requireMember(ctx, false);
  return { item: toItem(await findItem(ctx.db, collection, id)) };
}

/** Merges the given top-level keys into the item. */
export async function updateItem({
  ctx,
  collection,
  id,
  input: data,
}: {
  ctx: WorkspaceCtx;
  collection: string;
  id: string;
  input: Record<string, unknown>;
}) {
  requireMember(ctx, true);
  return writeWithEvent(ctx, async (trx) => {
    const current = await findItem(trx, collection, id, ctx.deps.dialect === "postgres");
    const merged = { ...(JSON.parse(current.data) as Record<string, unknown>), ...data };
    const row: ItemRow = {
      ...current,
      data: JSON.stringify(ownKeys(merged)),
      updated_at: ctx.deps.clock.now().toISOString(),
    };
    // Each PATCH is within the body limit; the item they build must stay within it too.
    if (Buffer.byteLength(row.data) > MAX_BODY_BYTES) {
      throw new PayloadTooLargeError(`the item would exceed ${MAX_BODY_BYTES} bytes`);
    }
    await trx.updateTable("items").set({ data: row.data, updated_at: row.updated_at }).where("id", "=", id).execute();
    const item = toItem(row);
    return { result: { item }, event: { channel: channel(collection), event: "updated", data: item } };
  });
}

export async function deleteItem({
  ctx,
  collection,
  id,
}: {
  ctx: WorkspaceCtx;
  collection: string;
  id: string;
}): Promise<void> {
  requireMember(ctx, true);
  await writeWithEvent(ctx, async (trx) => {
    // The row as this delete removed it: of two deletes at once, only one finds it.
    const removed = (await trx
      .deleteFrom("items")
      .where("collection", "=", collection)
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirst()) as ItemRow | undefined;
    if (!removed) throw new NotFoundError("item not found");
    return { result: undefined, event: { channel: channel(collection), event: "deleted", data: toItem(removed) } };
  });
}
