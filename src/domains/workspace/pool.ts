import { existsSync, readFileSync } from "node:fs";
import type BetterSqlite3 from "better-sqlite3";
import type { Deps } from "../../deps.ts";
import { UnavailableError } from "../../errors.ts";
import { openWorkspaceFile, type WorkspaceDb, workspaceFile, workspaceSchema } from "../projects/workspace-db.ts";

export type { WorkspaceDb };

/** How often open workspaces are checked for files removed underneath them (a purge) and for disuse. */
const SWEEP_MS = 30_000;
/** An open workspace nobody has used for this long is closed: a quiet process gives its memory back. */
export const IDLE_CLOSE_MS = 60_000;
/** How long a caller waits for a slot when every open workspace is in use, before a 503. */
export const WORKSPACE_WAIT_MS = 2_000;
/** File descriptors an open SQLite workspace holds: the database, its `-wal` and its `-shm`. */
export const FILES_PER_WORKSPACE = 3;

/** A workspace database held for some work; it stays open until released. */
export interface WorkspaceLease {
  readonly db: WorkspaceDb;
  /** Ends the hold; call once, when the work using `db` is over. */
  release(): void;
}

interface Slot {
  projectId: string;
  db: WorkspaceDb;
  /** The SQLite connection under `db` (none on PostgreSQL). */
  sqlite: BetterSqlite3.Database | undefined;
  /** Holds not yet released. */
  users: number;
  /** When the last hold was released (ms, monotonic). */
  releasedAt: number;
  /** Forgotten while in use (its project was deleted or purged): closed once the last hold ends. */
  retired: boolean;
  /** Called once its connection is closed. */
  onClose?: () => void;
}

/**
 * The open workspace databases of a process, at most `maxOpen` at once.
 *
 * A SQLite workspace is a file with two companions (`-wal`, `-shm`), so each open one costs three
 * file descriptors and a page cache. Work on a workspace holds it (`acquire` … `release`); an idle
 * one (held by nobody) stays open for the next request until its slot is wanted, least recently
 * used first, or until nobody has used it for IDLE_CLOSE_MS, and is closed then, never while
 * held. When every slot is held, a caller
 * waits for one to be released, up to WORKSPACE_WAIT_MS, then hears 503: the bound is never
 * exceeded, whatever the traffic. One connection per workspace per process: the server's worker
 * thread asks the server for what it needs of a workspace instead of opening it too, since SQLite
 * cannot close a file's descriptor while another connection of the process has it open.
 *
 * On PostgreSQL a workspace is a schema on the shared pool: a handle costs no descriptor, and the
 * bound only keeps the number of handles kept finite.
 */
export class WorkspacePool {
  private readonly slots = new Map<string, Slot>();
  /** Forgotten slots still held, and so still open: they count against the bound until closed. */
  private retiredOpen = 0;
  /** Workspaces being replaced or removed (`exclusive`): nobody may open them meanwhile. */
  private readonly barred = new Map<string, Promise<void>>();
  /** Callers waiting for a slot, first come first served. */
  private readonly waiting: Array<() => void> = [];
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;
  /** The most workspaces ever open at once in this pool. */
  private highWater = 0;

  constructor(
    private readonly deps: Deps,
    readonly maxOpen: number,
    private readonly waitMs = WORKSPACE_WAIT_MS,
  ) {
    this.sweeper = setInterval(() => {
      // A purge (by whichever process runs it) removes the file; a handle kept open would hold
      // on to its disk space until evicted, which a quiet instance may never do.
      if (deps.dialect === "sqlite") this.forgetVanished();
      this.closeIdle(performance.now() - IDLE_CLOSE_MS);
    }, SWEEP_MS);
    this.sweeper.unref();
  }

  /** Workspaces open now (held or idle). */
  get size(): number {
    return this.slots.size + this.retiredOpen;
  }

  /** The most workspaces open at once so far. */
  get peak(): number {
    return this.highWater;
  }

  /**
   * Holds the project's workspace database, opening it if need be; null when it has none (never
   * provisioned, or purged). Waits for a slot while all are held, then throws UnavailableError.
   */
  async acquire(projectId: string): Promise<WorkspaceLease | null> {
    const deadline = Date.now() + this.waitMs;
    for (;;) {
      const slot = this.take(projectId);
      if (slot !== "full") return slot ? this.leaseOf(slot) : null;
      await this.slotFreed(deadline);
    }
  }

  /** Runs `work` holding the project's workspace; undefined when the project has none. */
  async use<T>(projectId: string, work: (db: WorkspaceDb) => Promise<T>): Promise<T | undefined> {
    const lease = await this.acquire(projectId);
    if (!lease) return undefined;
    try {
      return await work(lease.db);
    } finally {
      lease.release();
    }
  }

  /** Forgets a workspace (deleted or purged project): closed now if idle, else once released. */
  forget(projectId: string): void {
    const slot = this.slots.get(projectId);
    if (!slot) return;
    this.slots.delete(projectId);
    if (slot.users === 0) {
      this.close(slot);
      return;
    }
    slot.retired = true;
    this.retiredOpen++;
  }

  /**
   * Runs `work` (replacing or removing the workspace's database) once this process has no
   * connection to it left: the open one is forgotten and closed when its last hold ends, and
   * callers that would open it meanwhile wait for `work` to end. The caller must not hold it.
   */
  async exclusive<T>(projectId: string, work: () => Promise<T>): Promise<T> {
    for (let turn = this.barred.get(projectId); turn; turn = this.barred.get(projectId)) await turn;
    let done = () => {};
    this.barred.set(projectId, new Promise<void>((resolve) => (done = resolve)));
    try {
      const slot = this.slots.get(projectId);
      if (slot) {
        const closed = new Promise<void>((resolve) => (slot.onClose = resolve));
        this.forget(projectId);
        await closed;
      }
      return await work();
    } finally {
      this.barred.delete(projectId);
      done();
      for (const wake of this.waiting.splice(0)) wake();
    }
  }

  /** Closes the workspaces nobody has held since `before` (ms, `performance.now()`). */
  closeIdle(before: number): void {
    for (const slot of [...this.slots.values()]) {
      if (slot.users === 0 && slot.releasedAt < before) this.forget(slot.projectId);
    }
  }

  /** Forgets open SQLite workspaces whose file is gone (purged). */
  forgetVanished(): void {
    for (const projectId of [...this.slots.keys()]) {
      if (!existsSync(workspaceFile(this.deps, projectId))) this.forget(projectId);
    }
  }

  /** Closes every workspace; holds still open are closed as they are released. */
  async closeAll(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const projectId of [...this.slots.keys()]) this.forget(projectId);
    for (const wake of this.waiting.splice(0)) wake();
  }

  /** The project's slot, held once more; null when it has no workspace; "full" when no slot is free. */
  private take(projectId: string): Slot | null | "full" {
    if (this.closed) throw new UnavailableError("the service is shutting down");
    if (this.barred.has(projectId)) return "full";
    const open = this.slots.get(projectId);
    if (open) {
      // Map order is insertion order: re-inserting marks it most recently used.
      this.slots.delete(projectId);
      this.slots.set(projectId, open);
      open.users++;
      return open;
    }
    if (this.size >= this.maxOpen && !this.evictIdle()) return "full";
    const slot = this.open(projectId);
    if (slot) {
      this.slots.set(projectId, slot);
      this.highWater = Math.max(this.highWater, this.size);
    }
    return slot;
  }

  private leaseOf(slot: Slot): WorkspaceLease {
    let released = false;
    return {
      db: slot.db,
      release: () => {
        if (released) return;
        released = true;
        slot.users--;
        if (slot.users > 0) return;
        slot.releasedAt = performance.now();
        if (slot.retired) {
          this.retiredOpen--;
          this.close(slot);
        }
        // Idle now (or closed): the first caller waiting may take its place.
        this.waiting.shift()?.();
      },
    };
  }

  /** Waits until a hold is released (or a slot closes), or throws once `deadline` has passed. */
  private slotFreed(deadline: number): Promise<void> {
    const wait = deadline - Date.now();
    if (wait <= 0) {
      throw new UnavailableError(
        `every open workspace (WORKSPACE_MAX_OPEN=${this.maxOpen}) is in use; retry in a moment`,
      );
    }
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        const at = this.waiting.indexOf(wake);
        if (at >= 0) this.waiting.splice(at, 1);
        resolve();
      }, wait);
      this.waiting.push(wake);
    });
  }

  /** Closes the least recently used workspace nobody holds; false when every one is held. */
  private evictIdle(): boolean {
    for (const slot of this.slots.values()) {
      if (slot.users > 0) continue;
      this.slots.delete(slot.projectId);
      this.close(slot);
      return true;
    }
    return false;
  }

  /** Opens a workspace, held once; null when it has none. */
  private open(projectId: string): Slot | null {
    const slot = { projectId, users: 1, releasedAt: 0, retired: false };
    if (this.deps.dialect === "postgres") {
      const db = this.deps.db.withSchema(workspaceSchema(projectId)) as WorkspaceDb;
      return { ...slot, db, sqlite: undefined };
    }
    const file = workspaceFile(this.deps, projectId);
    if (!existsSync(file)) return null;
    try {
      const { db, sqlite } = openWorkspaceFile(file, { create: false });
      return { ...slot, db, sqlite };
    } catch (error) {
      // Purged between the look and the open.
      if ((error as { code?: unknown }).code === "SQLITE_CANTOPEN" && !existsSync(file)) return null;
      throw error;
    }
  }

  /** Closes a slot's SQLite connection now (its descriptors go with it); a PostgreSQL handle holds nothing. */
  private close(slot: Slot): void {
    slot.onClose?.();
    if (!slot.sqlite) return;
    if (slot.sqlite.open) slot.sqlite.close();
    // Kysely's driver has nothing left to close; this only settles its own state.
    void slot.db.destroy().catch(() => {});
  }
}

/** Descriptors kept for everything but workspaces: sockets, the control database, logs, modules. */
const RESERVED_FILES = 1_024;
const MAX_DEFAULT_OPEN = 512;
const MIN_DEFAULT_OPEN = 16;

/**
 * WORKSPACE_MAX_OPEN's default: what the process's file limit leaves after RESERVED_FILES, at
 * FILES_PER_WORKSPACE each, between MIN_DEFAULT_OPEN and MAX_DEFAULT_OPEN (page caches and
 * statements cost memory too).
 */
export function defaultMaxOpen(fileLimit: number | undefined = openFileLimit()): number {
  const limit = fileLimit ?? 4_096;
  return Math.min(
    MAX_DEFAULT_OPEN,
    Math.max(MIN_DEFAULT_OPEN, Math.floor((limit - RESERVED_FILES) / FILES_PER_WORKSPACE)),
  );
}

/** The soft limit on open files (Linux: /proc/self/limits), or undefined where it cannot be read. */
function openFileLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync("/proc/self/limits", "utf8"))?.[1];
    if (line === undefined) return undefined;
    return line === "unlimited" ? Number.POSITIVE_INFINITY : Number(line);
  } catch {
    return undefined;
  }
}
