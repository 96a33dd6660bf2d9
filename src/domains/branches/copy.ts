import { randomBytes } from "node:crypto";
import { rename, rm } from "node:fs/promises";
import { sql } from "kysely";
import type { Deps } from "../../deps.ts";
import { runOnThread, sibling } from "../../lib/threads.ts";
import { baseName, fileKey, filesPrefix } from "../../storage/keys.ts";
import { installHistory, restoreToInstant } from "../backups/history.ts";
import {
  dropWorkspace,
  openWorkspaceFile,
  type WorkspaceDb,
  workspaceFile,
  workspaceSchema,
} from "../projects/workspace-db.ts";
import type { WorkspacePool } from "../workspace/pool.ts";

/** What the thread staging a SQLite copy is given: the source file, the staged copy's, the instant. */
export interface StageTask {
  source: string;
  staged: string;
  instant: string | null;
}

/** Tables whose rows a copy leaves behind: the outbox (the parent's events are the parent's) and the history. */
const NOT_COPIED = new Set(["events", "_history"]);

/**
 * Makes `targetId`'s workspace a copy of `sourceId`'s, as of `instant` (ISO-8601; null: now),
 * replacing whatever `targetId` had: its data (every table but the outbox), its history started
 * afresh, and its files' bytes (copied in the blob store: on the server, or hard links). The
 * data is built aside and put in place while this process holds no connection to the target
 * (`WorkspacePool.exclusive`); a failure leaves the target's data as it was. The source's file
 * bytes are copied in before, and the target's own removed after: a failure between leaves only
 * objects no row lists, which the leftovers sweep removes.
 */
export async function copyWorkspace(
  deps: Deps,
  pool: WorkspacePool,
  { sourceId, targetId, instant }: { sourceId: string; targetId: string; instant: string | null },
): Promise<void> {
  const staging = `.staging-${randomBytes(6).toString("hex")}`;
  const stagedFile = `${workspaceFile(deps, targetId)}${staging}`;
  try {
    if (deps.dialect === "sqlite") {
      // On a thread: VACUUM INTO and the rewind take as long as the workspace is big, and would
      // stop the event loop serving the API meanwhile.
      const task: StageTask = { source: workspaceFile(deps, sourceId), staged: stagedFile, instant };
      await runOnThread(sibling(import.meta.url, "stage-thread-entry"), task, "plinth-branch-copy");
    }
    // After the data: every file a copied row names has its bytes by then (they are written
    // before the row commits, and kept while the history holds the row).
    const copied = await copyFiles(deps, sourceId, targetId);
    await pool.exclusive(targetId, async () => {
      if (deps.dialect === "sqlite") {
        const file = workspaceFile(deps, targetId);
        for (const suffix of ["-wal", "-shm"]) await rm(`${file}${suffix}`, { force: true });
        await rename(stagedFile, file);
      } else {
        await copySchema(deps, sourceId, targetId, instant);
      }
    });
    // The target's own files are no longer listed by anything: its history started afresh.
    const stale: string[] = [];
    for await (const object of deps.storage.list(filesPrefix(targetId))) {
      if (!copied.has(baseName(object.key))) stale.push(object.key);
    }
    await deps.storage.delete(stale);
  } finally {
    await rm(stagedFile, { force: true });
  }
}

/** Copies every stored file of `sourceId`'s workspace to `targetId`'s; returns their ids. */
async function copyFiles(deps: Deps, sourceId: string, targetId: string): Promise<Set<string>> {
  const ids: string[] = [];
  for await (const object of deps.storage.list(filesPrefix(sourceId))) ids.push(baseName(object.key));
  const copying = [...ids];
  const lane = async () => {
    for (let id = copying.shift(); id !== undefined; id = copying.shift()) {
      // Gone meanwhile (a sweep): nothing lists it, so nothing needs it.
      await deps.storage.copy(fileKey(sourceId, id), fileKey(targetId, id));
    }
  };
  await Promise.all(Array.from({ length: 8 }, lane));
  return new Set(ids);
}

/**
 * SQLite: a consistent copy of the source file by `VACUUM INTO` on a connection of its own
 * (page by page, never the whole workspace in memory), then, on the copy, its data taken back
 * to `instant` from the copied history, the history and the outbox emptied, and the copy left
 * as one file (no `-wal`) ready to be renamed into place.
 */
export async function stageSqliteCopy({ source: sourceFile, staged, instant }: StageTask): Promise<void> {
  const source = openWorkspaceFile(sourceFile, { create: false });
  try {
    source.sqlite.prepare("vacuum into ?").run(staged);
  } finally {
    await source.db.destroy().catch(() => {});
    if (source.sqlite.open) source.sqlite.close();
  }
  const { db, sqlite } = openWorkspaceFile(staged, { create: false });
  try {
    await db.transaction().execute(async (trx) => {
      // A source made before history existed has none yet; the copy has it from the start.
      await installHistory(trx, "sqlite");
      await startAfresh(trx, "sqlite", instant);
    });
    sqlite.pragma("journal_mode = delete");
  } finally {
    await db.destroy().catch(() => {});
    if (sqlite.open) sqlite.close();
  }
}

/** Takes the data back to `instant` (when given), then empties the history and the outbox. */
async function startAfresh(trx: WorkspaceDb, dialect: "sqlite" | "postgres", instant: string | null) {
  if (instant !== null) await restoreToInstant(trx, dialect, instant);
  await trx.deleteFrom("_history").execute();
  await trx.deleteFrom("events").execute();
}

/**
 * PostgreSQL: the target's schema made anew (the old one dropped) in one REPEATABLE READ
 * transaction, so every table is copied from one snapshot of the source and readers of the
 * target see it before or after, never between. The tables are created like the source's
 * (indexes and defaults included) and filled before the history's triggers exist; then the
 * history is installed, given the source's records after `instant`, and the data taken back.
 */
async function copySchema(deps: Deps, sourceId: string, targetId: string, instant: string | null) {
  const source = workspaceSchema(sourceId);
  const target = workspaceSchema(targetId);
  await deps.db
    .transaction()
    .setIsolationLevel("repeatable read")
    .execute(async (trx) => {
      await sql`drop schema if exists ${sql.id(target)} cascade`.execute(trx);
      await sql`create schema ${sql.id(target)}`.execute(trx);
      await sql`set local search_path to ${sql.id(target)}`.execute(trx);
      const { rows } = await sql<{ name: string }>`
        select relname as name from pg_class where relnamespace = to_regnamespace(${source}) and relkind = 'r'
        order by relname`.execute(trx);
      if (rows.length === 0) throw new Error("the source workspace has no tables");
      for (const { name } of rows) {
        if (name === "_history") continue;
        await sql`create table ${sql.id(target, name)} (like ${sql.id(source, name)} including all)`.execute(trx);
        if (!NOT_COPIED.has(name)) {
          await sql`insert into ${sql.id(target, name)} select * from ${sql.id(source, name)}`.execute(trx);
        }
      }
      await installHistory(trx as WorkspaceDb, "postgres");
      if (instant !== null && rows.some((row) => row.name === "_history")) {
        await sql`insert into _history (at, tbl, key, before)
          select at, tbl, key, before from ${sql.id(source, "_history")} where at > ${instant} order by seq`.execute(
          trx,
        );
      }
      await startAfresh(trx as WorkspaceDb, "postgres", instant);
    });
}

/** Removes a copy's workspace: database and files, with no connection of this process left on it. */
export async function dropCopy(deps: Deps, pool: WorkspacePool, targetId: string): Promise<void> {
  await pool.exclusive(targetId, () => dropWorkspace(deps, targetId));
}
