import { runOnThread, sibling } from "../../lib/threads.ts";

/** What a SQLite restore's thread does: the workspace file, and either an instant or a snapshot. */
export interface RewindTask {
  file: string;
  /** Point-in-time: the instant (ISO-8601) to bring the data back to. */
  instant?: string;
  /** From a backup: its snapshot file (the bytes of its files are put back before). */
  snapshot?: string;
  /** The outbox rows the restore raises (its `workspace:restored`). */
  events: Record<string, unknown>[];
}

/**
 * Runs a SQLite restore's transaction on a thread of its own, with a connection of its own: its
 * statements take as long as the rows they change (about a second per hundred thousand), and on
 * the thread that serves the API they would stop every request of the process meanwhile. There,
 * reads go on (WAL: they see the workspace as it was until the restore commits); writes wait at
 * the write gate (see write-gate.ts). A thread that fails or dies rolls its transaction back.
 */
export function rewindOnThread(task: RewindTask): Promise<void> {
  return runOnThread(sibling(import.meta.url, "rewind-thread-entry"), task, "plinth-restore").catch((error: Error) => {
    throw new Error(`the restore failed: ${error.message}`);
  });
}
