import { sql } from "kysely";
import type { Dialect } from "../../db/database.ts";
import { oneOf } from "../../db/shapes.ts";
import { filesInHistory, installHistory, pruneHistory } from "../backups/history.ts";
import { workspaceSchema } from "../projects/workspace-db.ts";
import type { WorkspacePool } from "./pool.ts";
import { throughGate } from "./write-gate.ts";

/** An outbox row as read back. */
export type OutboxEvent = { id: string; channel: string; event: string; data: string; created_at: string };

/**
 * What the job worker needs of a project's workspace: its outbox (dispatch) and which of some
 * files it lists (the upload leftovers sweep). Every method answers null when the project has no
 * workspace. The server's worker thread reaches these through the server (`remoteStore` in
 * process/worker-thread-entry.ts), so that a process opens each workspace once (see WorkspacePool).
 */
export interface WorkspaceStore {
  /** Up to `limit` undispatched events, oldest first. */
  readOutbox(projectId: string, limit: number): Promise<OutboxEvent[] | null>;
  /** Removes dispatched events from the outbox. */
  clearOutbox(projectId: string, eventIds: string[]): Promise<void>;
  /**
   * Those of `fileIds` whose bytes the workspace still needs: files it lists, and files its
   * history holds (deleted within the restore window: a restore may bring them back).
   */
  neededFiles(projectId: string, fileIds: string[]): Promise<string[] | null>;
  /** Installs continuous history in a workspace made before it existed (see backups/history.ts). */
  installHistory(projectId: string): Promise<boolean | null>;
  /** Deletes history records older than `before` (ISO-8601); how many went. */
  pruneHistory(projectId: string, before: string): Promise<number | null>;
}

/** Rows per statement when looking files up, well inside both databases' limits on parameters. */
const FILE_CHUNK = 500;

/** The store of the workspaces this process opens, through its pool. */
export function localStore(pool: WorkspacePool, dialect: Dialect): WorkspaceStore {
  const orNull = <T>(value: T | undefined): T | null => value ?? null;
  return {
    readOutbox: async (projectId, limit) =>
      orNull(
        await pool.use(
          projectId,
          async (db) =>
            (await db.selectFrom("events").selectAll().orderBy("id").limit(limit).execute()) as OutboxEvent[],
        ),
      ),
    clearOutbox: async (projectId, eventIds) => {
      await throughGate(projectId, () =>
        pool.use(projectId, (db) =>
          db
            .deleteFrom("events")
            .where(oneOf(dialect, "id", eventIds))
            .execute(),
        ),
      );
    },
    neededFiles: async (projectId, fileIds) =>
      orNull(
        await pool.use(projectId, async (db) => {
          const needed: string[] = [];
          for (let i = 0; i < fileIds.length; i += FILE_CHUNK) {
            const chunk = fileIds.slice(i, i + FILE_CHUNK);
            const rows = await db.selectFrom("files").select("id").where("id", "in", chunk).execute();
            needed.push(...rows.map((row) => row.id as string), ...(await filesInHistory(db, chunk)));
          }
          return needed;
        }),
      ),
    installHistory: async (projectId) =>
      orNull(
        await throughGate(projectId, () =>
          pool.use(projectId, (db) =>
            dialect === "postgres"
              ? db.transaction().execute(async (trx) => {
                  await sql`set local search_path to ${sql.id(workspaceSchema(projectId))}`.execute(trx);
                  await installHistory(trx, dialect);
                  return true;
                })
              : db.transaction().execute(async (trx) => {
                  await installHistory(trx, dialect);
                  return true;
                }),
          ),
        ),
      ),
    pruneHistory: async (projectId, before) =>
      orNull(await throughGate(projectId, () => pool.use(projectId, (db) => pruneHistory(db, before)))),
  };
}
