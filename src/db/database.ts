import path from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  PostgresDialect,
  type SqliteDatabase,
  SqliteDialect,
  SqliteDriver,
  type Transaction,
} from "kysely";
import pg from "pg";
import { makeDirectory } from "../lib/dirs.ts";
import type { Logger } from "../logger.ts";
import type { Database } from "./schema.ts";
import { SQLite } from "./sqlite.ts";

export type Dialect = "sqlite" | "postgres";

/** A handle that queries can run on: the database itself or an open transaction. */
export type Db = Kysely<Database> | Transaction<Database>;

/**
 * Runs a read outside Kysely, for the few queries on every request's path. On SQLite it uses a
 * second connection that only reads: in WAL mode it sees the last committed state and never
 * queues behind a write transaction on the main connection. On PostgreSQL it runs a named
 * prepared statement, so the server parses and plans the query once per connection.
 */
export interface Reader {
  first<Row>(name: string, sql: string, parameters: unknown[]): Promise<Row | undefined>;
}

export interface DatabaseHandle {
  db: Kysely<Database>;
  dialect: Dialect;
  reader: Reader;
  /** Where the SQLite file lives; undefined on PostgreSQL. */
  file: string | undefined;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  databaseUrl: string | undefined;
  databaseSchema: string | undefined;
  dataDir: string;
  /** PostgreSQL pool size. */
  poolSize?: number;
}

/** `log` hears of PostgreSQL connections that fail (the pool replaces them). */
export function openDatabase(options: DatabaseOptions, log?: Pick<Logger, "warn">): DatabaseHandle {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options, log);
  return openSqlite(path.join(options.dataDir, "plinth.db"));
}

function openSqlite(file: string): DatabaseHandle {
  makeDirectory(path.dirname(file));
  const sqlite = new SQLite(file);
  // WAL lets readers proceed during a write; NORMAL sync is durable across process crashes
  // (only an OS crash can lose the last transactions), the usual trade-off for WAL.
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = NORMAL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma("busy_timeout = 5000");
  const db = new Kysely<Database>({ dialect: sqliteDialect(sqlite) });
  // Opened on first use, after migrations have created the tables it reads.
  let readConnection: SqliteDatabase | undefined;
  const reader: Reader = {
    async first<Row>(_name: string, sql: string, parameters: unknown[]) {
      if (!readConnection) {
        const connection = new SQLite(file);
        connection.pragma("query_only = ON");
        connection.pragma("busy_timeout = 5000");
        readConnection = withStatementCache(connection);
      }
      return (readConnection.prepare(sql) as unknown as BetterSqlite3.Statement).get(...parameters) as Row | undefined;
    },
  };
  return {
    db,
    dialect: "sqlite",
    reader,
    file,
    close: async () => {
      readConnection?.close();
      await db.destroy();
    },
  };
}

/**
 * Kysely's SQLite dialect, with transactions that take the write lock as they begin (`BEGIN
 * IMMEDIATE`). Two connections write to a file here (a server and its worker thread): a deferred
 * transaction that reads and then writes fails at once with SQLITE_BUSY if the other connection
 * committed in between, without waiting; an immediate one waits its turn in the busy handler.
 */
export function sqliteDialect(sqlite: BetterSqlite3.Database): SqliteDialect {
  return new ImmediateSqliteDialect(withStatementCache(sqlite));
}

class ImmediateSqliteDialect extends SqliteDialect {
  constructor(private readonly database: SqliteDatabase) {
    super({ database });
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver({ database: this.database });
  }
}

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw("begin immediate"));
  }
}

const STATEMENT_CACHE_SIZE = 500;

/**
 * Kysely prepares every query it runs; SQLite then parses and plans the same text again each
 * time. Keeping prepared statements by SQL text skips that on every repeated query. Safe because
 * better-sqlite3 runs a statement to completion synchronously, and SQLite re-prepares a cached
 * statement by itself when the schema changes under it.
 */
function withStatementCache(sqlite: BetterSqlite3.Database): SqliteDatabase {
  const statements = new Map<string, BetterSqlite3.Statement>();
  return {
    prepare(sql) {
      let statement = statements.get(sql);
      if (!statement) {
        if (statements.size >= STATEMENT_CACHE_SIZE) statements.clear();
        statement = sqlite.prepare(sql);
        statements.set(sql, statement);
      }
      return statement;
    },
    close: () => sqlite.close(),
  };
}

function openPostgres(url: string, options: DatabaseOptions, log?: Pick<Logger, "warn">): DatabaseHandle {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    // Every connection of this pool works in the configured schema.
    ...(options.databaseSchema ? { options: `-c search_path=${options.databaseSchema}` } : {}),
  });
  // A connection that fails (the server restarted or failed over, an administrator or an idle
  // timeout ended it) leaves the pool, and the next query opens a new one; a query or transaction
  // that was using it fails. pg reports the failure as an 'error' event on the connection, and
  // on the pool too when it was idle: with nobody listening, either would end the process.
  pool.on("connect", (client) => {
    client.on("error", (error) => log?.warn({ err: error }, "a PostgreSQL connection failed; the pool replaces it"));
  });
  pool.on("error", () => {
    // Logged by the connection's own listener above.
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const reader: Reader = {
    async first<Row>(name: string, sql: string, parameters: unknown[]) {
      const result = await pool.query({ name, text: sql, values: parameters });
      return result.rows[0] as Row | undefined;
    },
  };
  return {
    db,
    dialect: "postgres",
    reader,
    file: undefined,
    close: () => db.destroy(),
  };
}

/** True for a unique-constraint violation on either dialect. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === "23505" || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}
