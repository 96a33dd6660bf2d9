import { CompiledQuery, type Insertable, type Kysely, type RawBuilder, type SqlBool, sql } from "kysely";
import type { Db, Dialect } from "./database.ts";
import type { Database } from "./schema.ts";

/*
 * SQLite keeps prepared statements by their text (see `withStatementCache`), and a multi-row
 * insert or an `IN` list has a different text for every length, so under load the cache fills
 * with one-off statements and SQLite parses and plans most of them anew. On SQLite these helpers
 * keep lengths to powers of two: a statement comes in a handful of shapes, each prepared once.
 *
 * PostgreSQL parses and plans every statement it is sent, and a list of n values is n parameters
 * for the driver to encode and the server to parse: there a list is one array parameter
 * (`= any($1)`) and a batch of rows one JSON parameter, so a statement costs about the same
 * whatever it carries.
 */

function largestPowerOfTwoAtMost(n: number): number {
  return 2 ** Math.floor(Math.log2(n));
}

/** `rows` in chunks of at most `max`; on SQLite of power-of-two sizes, largest first. */
export function chunked<T>(dialect: Dialect, rows: readonly T[], max: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < rows.length; ) {
    const left = rows.length - i;
    const size = dialect === "sqlite" ? largestPowerOfTwoAtMost(Math.min(left, max)) : Math.min(left, max);
    chunks.push(rows.slice(i, i + size));
    i += size;
  }
  return chunks;
}

/** The values of an `IN` list; on SQLite padded to a power-of-two length with its last value (the same set). */
export function inList<T>(dialect: Dialect, values: readonly T[]): T[] {
  const padded = [...values];
  if (dialect !== "sqlite" || values.length < 3) return padded;
  const length = 2 ** Math.ceil(Math.log2(values.length));
  const last = values[values.length - 1] as T;
  while (padded.length < length) padded.push(last);
  return padded;
}

/** `column IN (values)`: on PostgreSQL `column = any($1)`, the values in one array parameter. */
export function oneOf(dialect: Dialect, column: string, values: readonly string[]): RawBuilder<SqlBool> {
  if (dialect === "postgres") return sql<SqlBool>`${sql.ref(column)} = any(${values}::text[])`;
  return sql<SqlBool>`${sql.ref(column)} in (${sql.join(inList(dialect, values))})`;
}

/**
 * `query` locking the rows it reads until the transaction ends (`FOR UPDATE`) on PostgreSQL, so
 * overlapping writes of one row run one after the other. SQLite needs no lock: it runs one write
 * transaction at a time.
 */
export function forUpdateOn<Q extends { forUpdate(): Q }>(dialect: Dialect, query: Q): Q {
  return dialect === "postgres" ? query.forUpdate() : query;
}

interface InsertOptions {
  /** `on conflict (column) do nothing`. */
  skipConflictOn?: string;
  /** The ids of the rows inserted (those not skipped). */
  returningIds?: boolean;
}

const INSERT_CHUNK = 100;
const insertTexts = new Map<string, string>();

/**
 * Inserts `rows` (all with the same columns) of `table`: on SQLite in power-of-two chunks, on
 * PostgreSQL in one statement whose rows are one JSON parameter (`json_populate_recordset`).
 * Returns the ids inserted when asked (else an empty list).
 */
export async function insertRows<T extends keyof Database & string>(
  db: Db,
  dialect: Dialect,
  table: T,
  rows: ReadonlyArray<Insertable<Database[T]>>,
  options: InsertOptions = {},
): Promise<string[]> {
  const first = rows[0];
  if (first === undefined) return [];
  const ids: string[] = [];
  if (dialect === "postgres") {
    const columns = Object.keys(first);
    const key = JSON.stringify([table, columns, options]);
    let text = insertTexts.get(key);
    if (text === undefined) {
      const list = columns.map((column) => `"${column}"`).join(", ");
      text =
        `insert into "${table}" (${list}) select ${list} from json_populate_recordset(null::"${table}", $1)` +
        (options.skipConflictOn ? ` on conflict ("${options.skipConflictOn}") do nothing` : "") +
        (options.returningIds ? ` returning "id"` : "");
      insertTexts.set(key, text);
    }
    const result = await db.executeQuery<{ id: string }>(CompiledQuery.raw(text, [JSON.stringify(rows)]));
    for (const row of result.rows) ids.push(row.id);
    return ids;
  }
  // Kysely cannot follow a generic table's row type: the rows were checked against it above.
  // biome-ignore lint/suspicious/noExplicitAny: see above
  const untyped = db as unknown as Kysely<any>;
  const conflict = options.skipConflictOn;
  for (const chunk of chunked(dialect, rows, INSERT_CHUNK)) {
    let query = untyped.insertInto(table).values(chunk);
    if (conflict) query = query.onConflict((oc) => oc.column(conflict).doNothing());
    if (!options.returningIds) await query.execute();
    else for (const row of await query.returning("id").execute()) ids.push(row.id);
  }
  return ids;
}
