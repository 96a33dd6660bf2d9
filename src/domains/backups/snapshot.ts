import { closeSync, fsyncSync, openSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { sql } from "kysely";
import type { Dialect } from "../../db/database.ts";
import type { Deps } from "../../deps.ts";
import { makeDirectory } from "../../lib/dirs.ts";
import { backupFileKey, backupFilesPrefix, fileKey, projectPrefix } from "../../storage/keys.ts";
import { compareVersions, versionsBetween } from "../projects/templates.ts";
import { openWorkspaceFile, type WorkspaceDb, workspaceFile, workspaceSchema } from "../projects/workspace-db.ts";
import { columnsOf, HISTORY_TABLES, tablesPresent } from "./history.ts";

/**
 * Snapshots of a workspace (DESIGN §9 backups). A snapshot holds the workspace's data tables (the
 * history tables: collections, items, users, sessions, files) and its `_plinth_meta`, as one
 * transaction saw them, never the outbox nor the history itself; and the bytes of every file it
 * lists, copied in the blob store under the backup's own keys (hard links in a local one), so
 * that deleting the files from the workspace, or the workspace, leaves the backup whole.
 *
 * On SQLite a snapshot is a database file of its own, written by `create table … as select` from
 * a read transaction on the live workspace with the new file attached: SQLite copies page by page
 * and never holds the workspace in memory, and writers go on meanwhile (WAL). On PostgreSQL it is
 * a schema `bk_<id>`, filled the same way in one REPEATABLE READ transaction, on the server.
 */

const META = "_plinth_meta";

/** Where a project's SQLite snapshots live. */
export function backupDir(deps: Deps, projectId: string): string {
  return path.join(deps.config.dataDir, "backups", projectId);
}

function snapshotFile(deps: Deps, projectId: string, backupId: string): string {
  return path.join(backupDir(deps, projectId), `${backupId}.db`);
}

export function snapshotSchema(backupId: string): string {
  return `bk_${backupId.toLowerCase().replace(/[^a-z0-9]/g, "_")}`;
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** The tables a snapshot holds, of those the workspace has: its data, and its template version. */
async function snapshotTables(db: WorkspaceDb, dialect: Dialect): Promise<string[]> {
  return [...(await tablesPresent(db, dialect)), META];
}

/** The key column a snapshot table is looked up by on restore. */
function keyOf(table: string): string {
  return HISTORY_TABLES[table] ?? "key";
}

/**
 * Takes a consistent snapshot of the project's workspace for `backupId`. Returns its size in
 * bytes (database and file bytes) and the template version it is at. On failure nothing of it
 * is left behind.
 */
export async function takeSnapshot(
  deps: Deps,
  projectId: string,
  backupId: string,
): Promise<{ sizeBytes: number; templateVersion: string | null }> {
  try {
    const { bytes, files, templateVersion } =
      deps.dialect === "sqlite"
        ? await snapshotSqlite(deps, projectId, backupId)
        : await snapshotPostgres(deps, projectId, backupId);
    const fileBytes = await holdFileBytes(deps, projectId, backupId, files);
    return { sizeBytes: bytes + fileBytes, templateVersion };
  } catch (error) {
    await dropSnapshot(deps, projectId, backupId);
    throw error;
  }
}

interface Taken {
  bytes: number;
  files: { id: string; size: number }[];
  templateVersion: string | null;
}

async function snapshotSqlite(deps: Deps, projectId: string, backupId: string): Promise<Taken> {
  const file = snapshotFile(deps, projectId, backupId);
  const part = `${file}.part`;
  makeDirectory(path.dirname(file));
  // Made here: the workspace's connection opens files it does not create (a purge may have
  // removed the workspace), and ATTACH takes its flags. An empty file is an empty database.
  writeFileSync(part, "");
  const { db, sqlite } = openWorkspaceFile(workspaceFile(deps, projectId), { create: false });
  try {
    sqlite.prepare("attach database ? as snap").run(part);
    // Its commit is durable (the default, FULL, on a rollback-journal file of its own) before the
    // file is named: a crash leaves a `.part`, never a torn snapshot.
    sqlite.pragma("snap.synchronous = full");
    const tables = await snapshotTables(db, "sqlite");
    // One transaction: every table as of the same instant. It writes only to `snap`; the
    // workspace is only read, so its writers are not held up.
    sqlite.transaction(() => {
      for (const table of tables) {
        sqlite.exec(`create table snap.${quote(table)} as select * from main.${quote(table)}`);
        sqlite.exec(`create unique index snap.${quote(`${table}_key`)} on ${quote(table)} (${quote(keyOf(table))})`);
      }
    })();
    const files = sqlite.prepare("select id, size from snap.files").all() as { id: string; size: number }[];
    const version = sqlite.prepare(`select value from snap.${META} where key = 'template_version'`).pluck().get() as
      | string
      | undefined;
    sqlite.exec("detach database snap");
    renameSync(part, file);
    syncDirectory(path.dirname(file));
    return { bytes: statSync(file).size, files, templateVersion: version ?? null };
  } finally {
    await db.destroy().catch(() => {});
    if (sqlite.open) sqlite.close();
    rmSync(part, { force: true });
  }
}

async function snapshotPostgres(deps: Deps, projectId: string, backupId: string): Promise<Taken> {
  const source = workspaceSchema(projectId);
  const target = snapshotSchema(backupId);
  return deps.db
    .transaction()
    .setIsolationLevel("repeatable read")
    .execute(async (trx) => {
      await sql`set local search_path to ${sql.id(source)}`.execute(trx);
      const tables = await snapshotTables(trx, "postgres");
      await sql`create schema ${sql.id(target)}`.execute(trx);
      for (const table of tables) {
        await sql`create table ${sql.id(target, table)} as table ${sql.id(source, table)}`.execute(trx);
        await sql`alter table ${sql.id(target, table)} add primary key (${sql.id(keyOf(table))})`.execute(trx);
      }
      const files = await sql<{
        id: string;
        size: string | number;
      }>`select id, size from ${sql.id(target, "files")}`.execute(trx);
      const version = await sql<{
        value: string;
      }>`select value from ${sql.id(target, META)} where key = 'template_version'`.execute(trx);
      const size = await sql<{ bytes: string | number | null }>`
        select sum(pg_total_relation_size(c.oid)) as bytes from pg_class c
        where c.relnamespace = ${target}::regnamespace and c.relkind = 'r'`.execute(trx);
      return {
        bytes: Number(size.rows[0]?.bytes ?? 0),
        files: files.rows.map((row) => ({ id: row.id, size: Number(row.size) })),
        templateVersion: version.rows[0]?.value ?? null,
      };
    });
}

/** Makes the entries of `dir` (a rename, new links) durable. */
function syncDirectory(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Copies in the blob store at once, in a backup or a restore: enough to overlap their round trips. */
const COPIES_AT_ONCE = 8;

/** Runs `work` on every item, `COPIES_AT_ONCE` at a time; the first failure fails it. */
async function eachAtOnce<T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(COPIES_AT_ONCE, items.length) }, lane));
}

/** Copies the bytes of `files` under the backup's keys; returns how many bytes they are. */
async function holdFileBytes(
  deps: Deps,
  projectId: string,
  backupId: string,
  files: { id: string; size: number }[],
): Promise<number> {
  await eachAtOnce(files, async ({ id }) => {
    if (!(await deps.storage.copy(fileKey(projectId, id), backupFileKey(projectId, backupId, id)))) {
      throw new Error(`the bytes of file ${id} are missing from the workspace`);
    }
  });
  return files.reduce((sum, file) => sum + Number(file.size), 0);
}

/** Removes a backup's snapshot and its file bytes; nothing if there are none. */
export async function dropSnapshot(deps: Deps, projectId: string, backupId: string): Promise<void> {
  if (deps.dialect === "postgres") {
    await sql`drop schema if exists ${sql.id(snapshotSchema(backupId))} cascade`.execute(deps.db);
  } else {
    const file = snapshotFile(deps, projectId, backupId);
    for (const suffix of ["", ".part", "-journal"]) rmSync(`${file}${suffix}`, { force: true });
  }
  await deps.storage.deletePrefix(backupFilesPrefix(projectId, backupId));
}

/** Removes every snapshot of a project, and whatever else it has stored (its purge). */
export async function dropProjectSnapshots(deps: Deps, projectId: string, backupIds: string[]): Promise<void> {
  for (const id of backupIds) await dropSnapshot(deps, projectId, id);
  rmSync(backupDir(deps, projectId), { recursive: true, force: true });
  await deps.storage.deletePrefix(projectPrefix(projectId));
}

/**
 * Brings a snapshot taken at an older template version up to `to`, in place and in one
 * transaction (a failure leaves it as it was), so that a restore never downgrades a workspace.
 */
export async function migrateSnapshot(
  deps: Deps,
  projectId: string,
  backupId: string,
  template: string,
  from: string,
  to: string,
): Promise<void> {
  const finish = async (trx: WorkspaceDb) => {
    // From the version the snapshot says it is at: another restore may have migrated it since
    // `from` was read.
    let read = trx.selectFrom(META).select("value").where("key", "=", "template_version");
    // PostgreSQL: two restores migrating it at once take turns on the row (SQLite's writers do anyway).
    if (deps.dialect === "postgres") read = read.forUpdate();
    const row = await read.executeTakeFirst();
    const at = (row?.value as string | undefined) ?? from;
    if (compareVersions(at, to) >= 0) return;
    for (const step of versionsBetween(template, at, to)) await step.migrate(trx, deps.dialect);
    await trx.updateTable(META).set({ value: to }).where("key", "=", "template_version").execute();
  };
  if (deps.dialect === "postgres") {
    await deps.db.transaction().execute(async (trx) => {
      await sql`set local search_path to ${sql.id(snapshotSchema(backupId))}`.execute(trx);
      await finish(trx);
    });
    return;
  }
  const { db, sqlite } = openWorkspaceFile(snapshotFile(deps, projectId, backupId), { create: false });
  try {
    sqlite.pragma("journal_mode = delete");
    await db.transaction().execute(finish);
  } finally {
    await db.destroy().catch(() => {});
    if (sqlite.open) sqlite.close();
  }
}

/** SQLite: the snapshot file a restore attaches. */
export function snapshotPath(deps: Deps, projectId: string, backupId: string): string {
  return snapshotFile(deps, projectId, backupId);
}

/**
 * In the restore's transaction (on SQLite, a connection with the snapshot attached as `snap`):
 * makes each data table hold exactly the snapshot's rows. Only rows that differ are deleted and
 * inserted, so a restore costs what changed since the snapshot, and the history records just
 * that (a restore is undone by restoring to an instant before it). Returns how many rows changed.
 */
export async function restoreFromSnapshot(trx: WorkspaceDb, dialect: Dialect, backupId: string): Promise<number> {
  const from = dialect === "sqlite" ? sql.raw("snap") : sql.id(snapshotSchema(backupId));
  let changed = 0;
  for (const table of await tablesPresent(trx, dialect)) {
    const key = keyOf(table);
    const columns = await columnsOf(trx, dialect, table);
    const same = sql.join(
      columns.map(
        (column) =>
          sql`s.${sql.id(column.name)} ${sql.raw(dialect === "sqlite" ? "is" : "is not distinct from")} t.${sql.id(column.name)}`,
      ),
      sql` and `,
    );
    const names = sql.join(columns.map((column) => sql.id(column.name)));
    const removed = await sql`delete from ${sql.id(table)} as t where not exists (
      select 1 from ${from}.${sql.id(table)} s where s.${sql.id(key)} = t.${sql.id(key)} and ${same})`.execute(trx);
    changed += Number(removed.numAffectedRows ?? 0);
    const inserted = await sql`insert into ${sql.id(table)} (${names})
      select ${sql.join(columns.map((column) => sql`s.${sql.id(column.name)}`))} from ${from}.${sql.id(table)} s
      where not exists (select 1 from ${sql.id(table)} t where t.${sql.id(key)} = s.${sql.id(key)})`.execute(trx);
    changed += Number(inserted.numAffectedRows ?? 0);
  }
  return changed;
}

/**
 * Puts back, under the workspace's keys, the bytes of the snapshot's files that are no longer
 * there (deleted since, and swept), copied from the backup's. Done before the restore commits: a
 * restored row never lists bytes that are missing. A restore that then fails leaves copies no
 * row lists, which the leftovers sweep removes.
 */
export async function returnFileBytes(deps: Deps, projectId: string, backupId: string, files: string[]): Promise<void> {
  await eachAtOnce(files, async (id) => {
    const key = fileKey(projectId, id);
    if (await deps.storage.has(key)) return;
    if (!(await deps.storage.copy(backupFileKey(projectId, backupId, id), key))) {
      throw new Error(`the bytes of file ${id} are missing from backup ${backupId}`);
    }
  });
}

/** The files a snapshot lists (which it holds the bytes of). */
export async function snapshotFiles(deps: Deps, projectId: string, backupId: string): Promise<string[]> {
  if (deps.dialect === "postgres") {
    const { rows } = await sql<{ id: string }>`select id from ${sql.id(snapshotSchema(backupId), "files")}`
      .execute(deps.db)
      .catch(() => ({ rows: [] as { id: string }[] }));
    return rows.map((row) => row.id);
  }
  const { db, sqlite } = openWorkspaceFile(snapshotFile(deps, projectId, backupId), { create: false });
  try {
    return (sqlite.prepare("select id from files").pluck().all() as string[]) ?? [];
  } catch {
    return [];
  } finally {
    await db.destroy().catch(() => {});
    if (sqlite.open) sqlite.close();
  }
}
