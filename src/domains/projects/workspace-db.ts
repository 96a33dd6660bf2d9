import { rmSync } from "node:fs";
import path from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import { Kysely, sql } from "kysely";
import { sqliteDialect } from "../../db/database.ts";
import { SQLite } from "../../db/sqlite.ts";
import type { Deps } from "../../deps.ts";
import { makeDirectory } from "../../lib/dirs.ts";
import { filesPrefix } from "../../storage/keys.ts";
import { installHistory } from "../backups/history.ts";
import { compareVersions, versionsBetween } from "./templates.ts";

/**
 * Each project's workspace has a database of its own: a SQLite file under DATA_DIR in the
 * embedded default, a schema in the same PostgreSQL database at scale.
 */
export function workspaceFile(deps: Deps, projectId: string): string {
  return path.join(deps.config.dataDir, "workspaces", `${projectId}.db`);
}

export function workspaceSchema(projectId: string): string {
  return `ws_${projectId.toLowerCase().replace(/[^a-z0-9]/g, "_")}`;
}

// biome-ignore lint/suspicious/noExplicitAny: a workspace schema is the template's, not Plinth's
export type WorkspaceDb = Kysely<any>;

/**
 * A workspace's page cache, in KiB (SQLite's default is 2 MiB). A process keeps hundreds of
 * workspaces open and most are small: their memory is what bounds how many (see WorkspacePool).
 */
const WORKSPACE_CACHE_KIB = 256;

/**
 * Opens a SQLite workspace file; `create`: make it if missing (provisioning), else a missing file
 * is an error (a purge got there first). Close both: Kysely opens its connection on the first
 * query, and its `destroy` closes nothing if no query ran. A failed open closes what it opened.
 */
export function openWorkspaceFile(
  file: string,
  { create = true }: { create?: boolean } = {},
): { db: WorkspaceDb; sqlite: BetterSqlite3.Database } {
  const sqlite = new SQLite(file, { fileMustExist: !create });
  try {
    sqlite.pragma("journal_mode = WAL");
    sqlite.pragma("synchronous = NORMAL");
    // Other connections (the server's, other processes') may be writing to it too.
    sqlite.pragma("busy_timeout = 5000");
    sqlite.pragma(`cache_size = -${WORKSPACE_CACHE_KIB}`);
    return { db: new Kysely({ dialect: sqliteDialect(sqlite) }), sqlite };
  } catch (error) {
    sqlite.close();
    throw error;
  }
}

/** Runs `work` on the project's workspace database, closing what it opened. */
async function withWorkspace<T>(deps: Deps, projectId: string, work: (db: WorkspaceDb) => Promise<T>): Promise<T> {
  if (deps.dialect === "postgres") return work(deps.db.withSchema(workspaceSchema(projectId)) as WorkspaceDb);
  const file = workspaceFile(deps, projectId);
  makeDirectory(path.dirname(file));
  const { db, sqlite } = openWorkspaceFile(file);
  try {
    return await work(db);
  } finally {
    await db.destroy();
    if (sqlite.open) sqlite.close();
  }
}

const META = "_plinth_meta";

/** Reads the template version a workspace is at; null when it has none yet. */
async function readVersion(db: WorkspaceDb): Promise<string | null> {
  const row = await db
    .selectFrom(META)
    .select("value")
    .where("key", "=", "template_version")
    .executeTakeFirst()
    .catch(() => undefined);
  return (row?.value as string | undefined) ?? null;
}

/** The tail of each workspace's queue of migrations in this process. */
const migrations = new Map<string, Promise<unknown>>();

/**
 * Runs `work` once the workspace's earlier migrations in this process have ended. Across
 * processes the database orders them; within one, a SQLite connection waiting for the file's
 * write lock would block the very thread the holder runs on, and fail after the busy timeout.
 */
function afterEarlierMigrations<T>(projectId: string, work: () => Promise<T>): Promise<T> {
  const run = (migrations.get(projectId) ?? Promise.resolve()).then(work);
  const tail = run.catch(() => {});
  migrations.set(projectId, tail);
  void tail.then(() => {
    if (migrations.get(projectId) === tail) migrations.delete(projectId);
  });
  return run;
}

/**
 * Migrates a workspace from its current version up to `to`, in one transaction: on any error
 * nothing changes (on PostgreSQL, not even the schema is left behind). A workspace already at
 * `to` or beyond is left as it is. Migrations of one workspace run one after another (in this
 * process, a queue; across processes, an advisory lock on its schema on PostgreSQL, the file's
 * write lock on SQLite), each on one connection. Returns the version it was at before.
 */
export function migrateWorkspace(
  deps: Deps,
  projectId: string,
  template: string,
  to: string,
): Promise<{ from: string | null }> {
  return afterEarlierMigrations(projectId, () => migrateNow(deps, projectId, template, to));
}

async function migrateNow(deps: Deps, projectId: string, template: string, to: string) {
  return withWorkspace(deps, projectId, (db) =>
    db.transaction().execute(async (trx) => {
      if (deps.dialect === "postgres") {
        // Under the lock: two first migrations creating the schema at once would otherwise race
        // in the catalog, and one would fail on a duplicate key.
        await sql`select pg_advisory_xact_lock(hashtext(${workspaceSchema(projectId)}))`.execute(trx);
        await sql`create schema if not exists ${sql.id(workspaceSchema(projectId))}`.execute(trx);
        // Template steps may use raw SQL; unqualified names must resolve inside the workspace.
        await sql`set local search_path to ${sql.id(workspaceSchema(projectId))}`.execute(trx);
      }
      await trx.schema
        .createTable(META)
        .ifNotExists()
        .addColumn("key", "text", (c) => c.primaryKey())
        .addColumn("value", "text", (c) => c.notNull())
        .execute();
      const from = await readVersion(trx);
      if (from !== null && compareVersions(from, to) >= 0) return { from };
      for (const step of versionsBetween(template, from, to)) await step.migrate(trx, deps.dialect);
      // After the steps, which may have changed the tables the history's triggers copy.
      await installHistory(trx, deps.dialect);
      for (const [key, value] of [
        ["template", template],
        ["template_version", to],
      ] as const) {
        await trx
          .insertInto(META)
          .values({ key, value })
          .onConflict((oc) => oc.column("key").doUpdateSet({ value }))
          .execute();
      }
      return { from };
    }),
  );
}

/** The workspace's own record of its template version (the source of truth after a crash). */
export async function workspaceVersion(deps: Deps, projectId: string): Promise<string | null> {
  return withWorkspace(deps, projectId, readVersion);
}

/** Removes a workspace: its database (schema or file) and its uploaded files. */
export async function dropWorkspace(deps: Deps, projectId: string): Promise<void> {
  if (deps.dialect === "postgres") {
    await sql`drop schema if exists ${sql.id(workspaceSchema(projectId))} cascade`.execute(deps.db);
  } else {
    const file = workspaceFile(deps, projectId);
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${file}${suffix}`, { force: true });
  }
  await deps.storage.deletePrefix(filesPrefix(projectId));
}

/** Opens a workspace for a caller outside this module (tests). */
export function onWorkspace<T>(deps: Deps, projectId: string, work: (db: WorkspaceDb) => Promise<T>): Promise<T> {
  return withWorkspace(deps, projectId, work);
}
