import { existsSync } from "node:fs";
import type BetterSqlite3 from "better-sqlite3";
import type { Deps } from "../../deps.ts";
import { openWorkspaceFile, type WorkspaceDb, workspaceFile, workspaceSchema } from "../projects/workspace-db.ts";

export type { WorkspaceDb };

/** How long an evicted SQLite workspace stays open, so requests still using it can finish. */
const CLOSE_DELAY_MS = 10_000;
/** How often open SQLite workspaces are checked for files removed underneath them (a purge). */
const VANISHED_CHECK_MS = 60_000;

/**
 * Open workspace databases, least recently used first out, so one process can serve thousands
 * of projects with a bounded number of open SQLite files. An evicted file is closed
 * CLOSE_DELAY_MS later, so queries under way on it finish; a request holds its project's
 * workspace by id (see `WorkspaceCtx.db`), not by handle, so a long one never finds it closed.
 * On PostgreSQL a workspace is a schema on the shared pool, which costs nothing to keep.
 */
export class WorkspaceDatabases {
  private readonly open = new Map<string, WorkspaceDb>();
  /** The SQLite file handle under each Kysely instance, closed with it. */
  private readonly files = new WeakMap<WorkspaceDb, BetterSqlite3.Database>();
  private readonly vanishedCheck: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: Deps,
    private readonly capacity: number,
  ) {
    // A purge (by whichever process runs it) removes the file; a handle kept open would hold on
    // to its disk space until evicted, which a quiet instance may never do.
    if (deps.dialect === "sqlite") {
      this.vanishedCheck = setInterval(() => this.forgetVanished(), VANISHED_CHECK_MS);
      this.vanishedCheck.unref();
    }
  }

  /** The workspace's database, or null when it has none (never provisioned, or purged). */
  get(projectId: string): WorkspaceDb | null {
    const cached = this.open.get(projectId);
    if (cached) {
      // Map order is insertion order: re-inserting marks it most recently used.
      this.open.delete(projectId);
      this.open.set(projectId, cached);
      return cached;
    }
    const db = this.connect(projectId);
    if (!db) return null;
    this.open.set(projectId, db);
    if (this.open.size > this.capacity) this.evictOldest();
    return db;
  }

  /** `held` while it is still the open handle (no reordering: the request that took it did); else `get`. */
  current(projectId: string, held: WorkspaceDb): WorkspaceDb {
    return this.open.get(projectId) === held ? held : (this.get(projectId) ?? held);
  }

  /** Forgets a workspace (deleted or purged project). */
  forget(projectId: string): void {
    const db = this.open.get(projectId);
    if (!db) return;
    this.open.delete(projectId);
    this.closeLater(db);
  }

  /** Forgets open SQLite workspaces whose file is gone (purged). */
  forgetVanished(): void {
    for (const projectId of [...this.open.keys()]) {
      if (!existsSync(workspaceFile(this.deps, projectId))) this.forget(projectId);
    }
  }

  async closeAll(): Promise<void> {
    clearInterval(this.vanishedCheck);
    const all = [...this.open.values()];
    this.open.clear();
    if (this.deps.dialect === "sqlite") await Promise.all(all.map((db) => this.close(db)));
  }

  private connect(projectId: string): WorkspaceDb | null {
    if (this.deps.dialect === "postgres") return this.deps.db.withSchema(workspaceSchema(projectId)) as WorkspaceDb;
    const file = workspaceFile(this.deps, projectId);
    if (!existsSync(file)) return null;
    const { db, sqlite } = openWorkspaceFile(file);
    this.files.set(db, sqlite);
    return db;
  }

  /** Closes a SQLite workspace: its Kysely instance and the file handle under it (see `openWorkspaceFile`). */
  private async close(db: WorkspaceDb): Promise<void> {
    await db.destroy().catch(() => {});
    const sqlite = this.files.get(db);
    if (sqlite?.open) sqlite.close();
  }

  private evictOldest(): void {
    const [oldest] = this.open.keys();
    if (oldest !== undefined) this.forget(oldest);
  }

  private closeLater(db: WorkspaceDb): void {
    if (this.deps.dialect !== "sqlite") return;
    setTimeout(() => void this.close(db), CLOSE_DELAY_MS).unref();
  }
}
