import type { Kysely, Selectable, Updateable } from "kysely";
import type { Db } from "../db/database.ts";
import type { Database } from "../db/schema.ts";
import { forUpdateOn } from "../db/shapes.ts";
import type { Deps } from "../deps.ts";
import { NotFoundError } from "../errors.ts";
import { isIdOf } from "../lib/ids.ts";

/** Tables of records that an org or a project owns, deleted by setting `deleted_at`. */
type OwnedTable = "integrations" | "webhooks";

/** Whose records: column values the row must have (null: the column is null). */
export type Owner = Record<string, string | null>;

/**
 * Finding and changing records an org or a project owns (integrations, org webhooks, workspace
 * hooks): a record another owner has, or one deleted, is 404. A change runs in the caller's
 * transaction (the org's, via `inOrgTransaction`, or a plain one) and finds the row again there,
 * locked (PostgreSQL; SQLite runs one write transaction at a time), so concurrent changes and
 * deletes of one record see each other: a delete that committed first makes the change a 404,
 * and of two deletes one succeeds. The audit row is written in the same transaction.
 */
export function ownedRecords<T extends OwnedTable>(table: T, noun: string) {
  type Row = Selectable<Database[T]>;
  // Kysely cannot follow a table that is a type parameter through its builders.
  // biome-ignore lint/suspicious/noExplicitAny: the table is a type parameter
  const on = (db: Db) => db as unknown as Kysely<any>;
  const name: string = table;

  async function find(db: Db, deps: Pick<Deps, "dialect">, owner: Owner, id: string, lock: boolean): Promise<Row> {
    let query = on(db).selectFrom(name).selectAll().where("id", "=", id).where("deleted_at", "is", null);
    for (const [column, value] of Object.entries(owner)) {
      query = value === null ? query.where(column, "is", null) : query.where(column, "=", value);
    }
    const row = await (lock ? forUpdateOn(deps.dialect, query) : query).executeTakeFirst();
    if (!row) throw new NotFoundError(`${noun} not found`);
    return row as Row;
  }

  return {
    /** The owner's live record, or 404. */
    find: (deps: Pick<Deps, "db" | "dialect">, owner: Owner, id: string) => find(deps.db, deps, owner, id, false),

    /**
     * Inside `trx`: finds the record locked (404 if it is gone), applies `changes(current)` (a
     * delete sets `deleted_at`), then `audit(current, updated)`. Returns the updated row.
     */
    async change(
      trx: Db,
      deps: Pick<Deps, "dialect">,
      owner: Owner,
      id: string,
      changes: (current: Row) => Updateable<Database[T]>,
      audit: (current: Row, updated: Row) => Promise<void>,
    ): Promise<Row> {
      const current = await find(trx, deps, owner, id, true);
      const updated = (await on(trx)
        .updateTable(name)
        .set(changes(current) as Record<string, unknown>)
        .where("id", "=", id)
        .returningAll()
        .executeTakeFirstOrThrow()) as Row;
      await audit(current, updated);
      return updated;
    },
  };
}

/** Tables of records a project owns and deletes outright: backups, branches, custom domains. */
type ProjectRecordTable = "backups" | "branches" | "domains";

/**
 * The project's record `id` of `table`, or 404 (`<noun> not found`) for an id that cannot be
 * one (its prefix is not `prefix`: nothing is looked up), an unknown one, or another project's.
 */
export async function findProjectRecord<T extends ProjectRecordTable>(
  db: Db,
  table: T,
  prefix: string,
  projectId: string,
  id: string,
  noun: string,
): Promise<Selectable<Database[T]>> {
  const row = isIdOf(prefix, id)
    ? // biome-ignore lint/suspicious/noExplicitAny: the table is a type parameter
      await (db as unknown as Kysely<any>)
        .selectFrom(table)
        .selectAll()
        .where("id", "=", id)
        .where("project_id", "=", projectId)
        .executeTakeFirst()
    : undefined;
  if (!row) throw new NotFoundError(`${noun} not found`);
  return row as Selectable<Database[T]>;
}
