import { sql } from "kysely";
import type { Dialect } from "../../db/database.ts";
import type { WorkspaceDb } from "../projects/workspace-db.ts";

/**
 * Continuous history: every committed change to a workspace's data is kept, long enough to bring
 * the workspace back to any instant of its plan's restore window (DESIGN §9).
 *
 * Triggers record, in `_history`, the row as it was before each insert, update or delete of the
 * tables below (null for an insert: the row did not exist), in the transaction of the change:
 * no change without its record. Each record carries its transaction's time (`at`, ISO-8601 UTC
 * to the millisecond): PostgreSQL's transaction timestamp; on SQLite, where writers take turns,
 * the time each write transaction stamps in `_history_clock` as it begins (`stampHistory`), so
 * a transaction's records all share one time. Bringing the workspace back to an instant is then
 * a set operation per table (`restoreToInstant`): every row changed since takes the state of its
 * first record after the instant. The restore is a change like any other, recorded likewise, so
 * restoring to an instant just before it undoes it. PostgreSQL's own point-in-time recovery is of
 * the whole cluster, and SQLite has none: this is one design for both.
 */

/** The tables whose rows are history, by primary key. The outbox and Plinth's own tables are not. */
export const HISTORY_TABLES: Record<string, string> = {
  collections: "slug",
  items: "id",
  users: "id",
  user_sessions: "token_hash",
  files: "id",
};

const HISTORY = "_history";
const CLOCK = "_history_clock";
const SQLITE_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

/** A column of a history table, and whether it holds a number (kept as one when restored). */
interface Column {
  name: string;
  numeric: boolean;
}

/** The columns `table` has now, in order. */
export async function columnsOf(db: WorkspaceDb, dialect: Dialect, table: string): Promise<Column[]> {
  if (dialect === "sqlite") {
    const { rows } = await sql<{
      name: string;
      type: string;
    }>`select name, type from pragma_table_info(${table})`.execute(db);
    return rows.map((row) => ({ name: row.name, numeric: /int|real|num|double|float/i.test(row.type) }));
  }
  // pg_catalog rather than information_schema: the latter's views cost tens of milliseconds each.
  const { rows } = await sql<{ name: string; type: string }>`
    select attname as name, format_type(atttypid, atttypmod) as type from pg_attribute
    where attrelid = to_regclass(${table})::oid and attnum > 0 and not attisdropped order by attnum`.execute(db);
  return rows.map((row) => ({ name: row.name, numeric: /int|numeric|real|double/i.test(row.type) }));
}

/** Tables of HISTORY_TABLES the workspace has. */
export async function tablesPresent(db: WorkspaceDb, dialect: Dialect): Promise<string[]> {
  const names = Object.keys(HISTORY_TABLES);
  const { rows } =
    dialect === "sqlite"
      ? await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(db)
      : await sql<{
          name: string;
        }>`select relname as name from pg_class where relnamespace = current_schema()::regnamespace and relkind = 'r'`.execute(
          db,
        );
  const present = new Set(rows.map((row) => row.name));
  return names.filter((name) => present.has(name));
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * Creates `_history` and (again) the triggers that fill it, for the tables as they are now. Run
 * in the transaction of every template migration (whose steps may change the columns), and once
 * for a workspace made before history existed. On PostgreSQL `db` must be a transaction whose
 * search_path is the workspace's schema.
 */
export async function installHistory(db: WorkspaceDb, dialect: Dialect): Promise<void> {
  if (dialect === "sqlite") {
    await sql
      .raw(
        `create table if not exists ${HISTORY} (seq integer primary key, at text not null, tbl text not null, key text not null, before text)`,
      )
      .execute(db);
    await sql.raw(`create table if not exists ${CLOCK} (at text not null)`).execute(db);
    await sql
      .raw(`insert into ${CLOCK} (at) select ${SQLITE_NOW} where not exists (select 1 from ${CLOCK})`)
      .execute(db);
  } else {
    await sql
      .raw(
        `create table if not exists ${HISTORY} (seq bigint generated always as identity primary key, at text not null, tbl text not null, key text not null, before text)`,
      )
      .execute(db);
    // One function for every table: the key column is the trigger's argument.
    await sql
      .raw(
        `create or replace function _history_record() returns trigger language plpgsql set search_path from current as $fn$
begin
  insert into ${HISTORY} (at, tbl, key, before) values (
    to_char(transaction_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    TG_TABLE_NAME,
    case when TG_OP = 'INSERT' then row_to_json(NEW) ->> TG_ARGV[0] else row_to_json(OLD) ->> TG_ARGV[0] end,
    case when TG_OP = 'INSERT' then null else row_to_json(OLD)::text end);
  return null;
end $fn$`,
      )
      .execute(db);
  }
  await sql.raw(`create index if not exists ${HISTORY}_at on ${HISTORY} (at)`).execute(db);
  for (const table of await tablesPresent(db, dialect)) {
    const key = HISTORY_TABLES[table] as string;
    for (const op of ["insert", "update", "delete"] as const) {
      const name = quote(`_history_${table}_${op}`);
      if (dialect === "postgres") {
        await sql.raw(`drop trigger if exists ${name} on ${quote(table)}`).execute(db);
        await sql
          .raw(
            `create trigger ${name} after ${op} on ${quote(table)} for each row execute function _history_record('${key}')`,
          )
          .execute(db);
        continue;
      }
      const columns = await columnsOf(db, dialect, table);
      const before =
        op === "insert"
          ? "null"
          : `json_object(${columns.map((column) => `'${column.name}', old.${quote(column.name)}`).join(", ")})`;
      const row = op === "insert" ? "new" : "old";
      await sql.raw(`drop trigger if exists ${name}`).execute(db);
      await sql
        .raw(
          `create trigger ${name} after ${op} on ${quote(table)} begin insert into ${HISTORY} (at, tbl, key, before) values ((select at from ${CLOCK}), '${table}', ${row}.${quote(key)}, ${before}); end`,
        )
        .execute(db);
    }
  }
}

/**
 * SQLite: stamps the time the records of this write transaction carry. Call it first in every
 * write transaction on a workspace; PostgreSQL needs nothing (the transaction's own timestamp).
 */
export async function stampHistory(trx: WorkspaceDb, dialect: Dialect): Promise<void> {
  if (dialect === "sqlite") await sql.raw(`update ${CLOCK} set at = ${SQLITE_NOW}`).execute(trx);
}

/** An instant as history records it: ISO-8601 UTC to the millisecond. */
export function historyInstant(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * Brings the history tables back to what they held at `instant` (ISO-8601), in the caller's
 * transaction: each row changed since takes the state of its first record after the instant
 * (none: it did not exist then). Returns how many rows changed.
 */
export async function restoreToInstant(trx: WorkspaceDb, dialect: Dialect, instant: string): Promise<number> {
  let changed = 0;
  for (const table of await tablesPresent(trx, dialect)) {
    const key = HISTORY_TABLES[table] as string;
    const columns = await columnsOf(trx, dialect, table);
    // The first record after the instant of each row: what the row was at the instant.
    const firsts = sql`(select key, before from (select key, before, row_number() over (partition by key order by seq) as nth
      from ${sql.raw(HISTORY)} where tbl = ${table} and at > ${instant}) changed where nth = 1) firsts`;
    const removed =
      await sql`delete from ${sql.id(table)} where ${sql.id(key)} in (select firsts.key from ${firsts})`.execute(trx);
    changed += Number(removed.numAffectedRows ?? 0);
    const values = columns.map((column) =>
      sql.raw(
        dialect === "sqlite"
          ? `json_extract(firsts.before, '$.${column.name}')`
          : column.numeric
            ? `(firsts.before::json ->> '${column.name}')::bigint`
            : `(firsts.before::json ->> '${column.name}')`,
      ),
    );
    const names = columns.map((column) => sql.id(column.name));
    const inserted =
      await sql`insert into ${sql.id(table)} (${sql.join(names)}) select ${sql.join(values)} from ${firsts} where firsts.before is not null`.execute(
        trx,
      );
    changed += Number(inserted.numAffectedRows ?? 0);
  }
  return changed;
}

/** Deletes records older than `before` (ISO-8601), `batch` at a time; returns how many went. */
export async function pruneHistory(db: WorkspaceDb, before: string, batch = 5_000): Promise<number> {
  let pruned = 0;
  for (;;) {
    const oldest = db.selectFrom(HISTORY).select("seq").where("at", "<", before).orderBy("seq").limit(batch);
    const result = await db.deleteFrom(HISTORY).where("seq", "in", oldest).executeTakeFirst();
    const count = Number(result.numDeletedRows);
    pruned += count;
    if (count < batch) return pruned;
  }
}

/** The files the history still needs the bytes of (deleted or replaced within the window). */
export async function filesInHistory(db: WorkspaceDb, fileIds: string[]): Promise<string[]> {
  if (fileIds.length === 0) return [];
  const rows = await db
    .selectFrom(HISTORY)
    .select("key")
    .distinct()
    .where("tbl", "=", "files")
    .where("key", "in", fileIds)
    .execute()
    .catch(() => []);
  return rows.map((row) => row.key as string);
}
