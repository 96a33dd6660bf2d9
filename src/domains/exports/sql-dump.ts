import { type RawBuilder, sql } from "kysely";
import type { Dialect } from "../../db/database.ts";
import type { WorkspaceDb } from "../projects/workspace-db.ts";

/**
 * A workspace as plain SQL that `sqlite3` loads into an empty database and `psql` into an empty
 * schema, unchanged: double-quoted identifiers, text in single quotes with quotes doubled (never
 * a backslash escape), only column types both databases know by one name and meaning, and one
 * `INSERT` per row.
 */

/**
 * Not the workspace's data: the dispatch outbox (events on their way to receivers) and the
 * continuous history (how to rewind the data, kept for restores; see backups/history.ts).
 */
const NOT_DATA = new Set(["events", "_history", "_history_clock"]);
/**
 * Workspace users' live sessions (hashes of bearer tokens): the table is dumped empty, so a
 * workspace loaded from a dump starts with nobody signed in.
 */
const SESSIONS = "user_sessions";
/** Rows read per query, and so held in memory at once (an item is at most 1 MiB). */
const ROWS_PER_READ = 100;
const PORTABLE_TYPES = new Set(["text", "integer", "bigint", "double precision"]);

interface Column {
  name: string;
  type: string;
  notNull: boolean;
}

interface Table {
  name: string;
  columns: Column[];
  primaryKey: string[];
  /** Its indexes but the primary key's, each a `CREATE … INDEX` statement. */
  indexes: string[];
}

export interface DumpSink {
  write(text: string): Promise<void>;
}

export interface DumpSource {
  db: WorkspaceDb;
  dialect: Dialect;
  /** The workspace's schema on PostgreSQL (ignored on SQLite). */
  schema: string;
}

/**
 * Writes `BEGIN;`, the workspace's tables (but the outbox), their rows and indexes, and `COMMIT;`,
 * all as of one moment. Null (no workspace yet): the transaction alone.
 */
export async function dumpWorkspace(sink: DumpSink, source: DumpSource | null): Promise<void> {
  await sink.write("BEGIN;\n");
  if (source) {
    await inSnapshot(source, async (db) => {
      const tables = (await describeTables(db, source))
        .filter((table) => !NOT_DATA.has(table.name))
        .sort((a, b) => (a.name < b.name ? -1 : 1));
      const from = (table: string) => (source.dialect === "postgres" ? sql.id(source.schema, table) : sql.id(table));
      for (const table of tables) await sink.write(createTable(table));
      for (const table of tables) {
        if (table.name === SESSIONS) {
          await sink.write(`-- ${table.name}: rows left out (live sessions); users sign in again\n`);
        } else {
          await writeRows(sink, db, table, from(table.name));
        }
      }
      for (const table of tables) for (const index of table.indexes) await sink.write(`${index};\n`);
    });
  }
  await sink.write("COMMIT;\n");
}

/**
 * Runs `work` in one read transaction on one connection, so every table is read as of the same
 * moment: on PostgreSQL a read-only `repeatable read` one; on SQLite a deferred one, a snapshot of
 * the WAL that takes no write lock, on the workspace's one connection in this process (so its
 * other work here waits for the dump; other processes write on).
 */
function inSnapshot<T>(source: DumpSource, work: (db: WorkspaceDb) => Promise<T>): Promise<T> {
  const begin = source.dialect === "postgres" ? "begin isolation level repeatable read, read only" : "begin";
  return source.db.connection().execute(async (db) => {
    await sql.raw(begin).execute(db);
    try {
      const result = await work(db);
      await sql`commit`.execute(db);
      return result;
    } catch (error) {
      await sql`rollback`.execute(db);
      throw error;
    }
  });
}

async function describeTables(db: WorkspaceDb, source: DumpSource): Promise<Table[]> {
  return source.dialect === "postgres" ? postgresTables(db, source.schema) : sqliteTables(db);
}

async function sqliteTables(db: WorkspaceDb): Promise<Table[]> {
  const { rows: names } = await sql<{ name: string }>`
    select name from sqlite_master where type = 'table' and substr(name, 1, 7) <> 'sqlite_'`.execute(db);
  const tables: Table[] = [];
  for (const { name } of names) {
    const { rows: columns } = await sql<{ name: string; type: string; notnull: number; pk: number }>`
      select name, type, "notnull", pk from pragma_table_info(${name})`.execute(db);
    // Indexes as the template created them (SQLite keeps each one's statement); a template's
    // statements run on both databases.
    const { rows: indexes } = await sql<{ sql: string }>`
      select sql from sqlite_master where type = 'index' and tbl_name = ${name} and sql is not null
      order by name`.execute(db);
    tables.push({
      name,
      columns: columns.map((column) => ({ name: column.name, type: column.type, notNull: column.notnull === 1 })),
      primaryKey: columns
        .filter((column) => column.pk > 0)
        .sort((a, b) => a.pk - b.pk)
        .map((column) => column.name),
      indexes: indexes.map((index) => index.sql),
    });
  }
  return tables;
}

async function postgresTables(db: WorkspaceDb, schema: string): Promise<Table[]> {
  const { rows: names } = await sql<{ name: string }>`
    select table_name as name from information_schema.tables
    where table_schema = ${schema} and table_type = 'BASE TABLE'`.execute(db);
  const tables: Table[] = [];
  for (const { name } of names) {
    const { rows: columns } = await sql<Column>`
      select column_name as name, data_type as type, is_nullable = 'NO' as "notNull"
      from information_schema.columns
      where table_schema = ${schema} and table_name = ${name}
      order by ordinal_position`.execute(db);
    const { rows: primaryKey } = await sql<{ name: string }>`
      select k.column_name as name
      from information_schema.table_constraints c
      join information_schema.key_column_usage k
        on k.constraint_schema = c.constraint_schema and k.constraint_name = c.constraint_name
      where c.table_schema = ${schema} and c.table_name = ${name} and c.constraint_type = 'PRIMARY KEY'
      order by k.ordinal_position`.execute(db);
    tables.push({
      name,
      columns,
      primaryKey: primaryKey.map((column) => column.name),
      indexes: await postgresIndexes(db, schema, name),
    });
  }
  return tables;
}

interface IndexTerm {
  index: string;
  unique: boolean;
  partial: boolean;
  /** Null for an expression. */
  column: string | null;
  expression: string;
  descending: boolean;
}

/** The table's indexes but its primary key's, as portable `CREATE … INDEX` statements. */
async function postgresIndexes(db: WorkspaceDb, schema: string, table: string): Promise<string[]> {
  const { rows: terms } = await sql<IndexTerm>`
    select c.relname as index, i.indisunique as unique, i.indpred is not null as partial,
      a.attname as column, pg_get_indexdef(i.indexrelid, k.n, true) as expression,
      (i.indoption[k.n - 1] & 1) = 1 as descending
    from pg_index i
    join pg_class c on c.oid = i.indexrelid
    cross join generate_series(1, i.indnkeyatts) as k(n)
    left join pg_attribute a on a.attrelid = i.indrelid and a.attnum = i.indkey[k.n - 1]
    where i.indrelid = to_regclass(format('%I.%I', ${schema}::text, ${table}::text)) and not i.indisprimary
    order by c.relname, k.n`.execute(db);
  const indexes = new Map<string, IndexTerm[]>();
  for (const term of terms) indexes.set(term.index, [...(indexes.get(term.index) ?? []), term]);
  return [...indexes].map(([name, keys]) => {
    const { unique, partial } = keys[0] as IndexTerm;
    // A predicate would come back in PostgreSQL's own rendering (casts and all), not portable.
    if (partial) throw new Error(`index ${name} of ${table} is partial: a dump cannot carry it portably`);
    const columns = keys.map(
      (key) => `${key.column === null ? `(${key.expression})` : quoteId(key.column)}${key.descending ? " DESC" : ""}`,
    );
    return `CREATE ${unique ? "UNIQUE " : ""}INDEX ${quoteId(name)} ON ${quoteId(table)} (${columns.join(", ")})`;
  });
}

function createTable(table: Table): string {
  const lines = table.columns.map((column) => {
    const type = column.type.toLowerCase();
    if (!PORTABLE_TYPES.has(type)) {
      throw new Error(
        `column ${table.name}.${column.name} is of type '${column.type}', which a dump cannot carry portably`,
      );
    }
    // SQLite lets a primary key other than an integer hold nulls; none does here, and PostgreSQL refuses them.
    const notNull = column.notNull || table.primaryKey.includes(column.name);
    return `  ${quoteId(column.name)} ${type}${notNull ? " NOT NULL" : ""}`;
  });
  if (table.primaryKey.length > 0) lines.push(`  PRIMARY KEY (${table.primaryKey.map(quoteId).join(", ")})`);
  return `CREATE TABLE ${quoteId(table.name)} (\n${lines.join(",\n")}\n);\n`;
}

/** The table's rows, `ROWS_PER_READ` at a time in primary key order (each read starts after the last key). */
async function writeRows(sink: DumpSink, db: WorkspaceDb, table: Table, from: RawBuilder<unknown>): Promise<void> {
  if (table.primaryKey.length === 0) throw new Error(`table ${table.name} has no primary key to read it in order by`);
  const columns = sql.join(table.columns.map((column) => sql.id(column.name)));
  const key = sql.join(table.primaryKey.map((column) => sql.id(column)));
  const insert = `INSERT INTO ${quoteId(table.name)} (${table.columns.map((column) => quoteId(column.name)).join(", ")}) VALUES (`;
  let after: RawBuilder<unknown> = sql``;
  for (;;) {
    const { rows } = await sql<Record<string, unknown>>`
      select ${columns} from ${from} ${after} order by ${key} limit ${ROWS_PER_READ}`.execute(db);
    const statements = rows.map(
      (row) =>
        `${insert}${table.columns.map((column) => sqlLiteral(row[column.name], `${table.name}.${column.name}`)).join(", ")});\n`,
    );
    if (statements.length > 0) await sink.write(statements.join(""));
    const last = rows.at(-1);
    if (!last || rows.length < ROWS_PER_READ) return;
    after = sql`where (${key}) > (${sql.join(table.primaryKey.map((column) => last[column]))})`;
  }
}

/** A double-quoted identifier, its own double quotes doubled. */
export function quoteId(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * A value as a SQL literal both databases read alike. Text is quoted with its quotes doubled,
 * backslashes and line breaks as they are (standard strings: neither database unescapes more),
 * but for CR LF: the `sqlite3` shell drops a CR that ends an input line, so the literal is cut
 * between the two and joined again with `||`. U+0000 has no form: PostgreSQL's text cannot hold
 * it (nor does Plinth store it).
 */
export function sqlLiteral(value: unknown, where: string): string {
  if (value === null) return "NULL";
  if (typeof value === "string") {
    if (value.includes("\u0000")) throw new Error(`${where} holds U+0000, which a dump cannot carry portably`);
    return `'${value.replaceAll("'", "''").replaceAll("\r\n", "\r' || '\n")}'`;
  }
  if (typeof value === "bigint" || (typeof value === "number" && Number.isFinite(value))) return String(value);
  throw new Error(`${where} holds a value (${typeof value}) that a dump cannot carry portably`);
}
