import { Worker as Thread } from "node:worker_threads";
import { sibling, threadUrl } from "../../lib/threads.ts";

/** What a SQLite restore's thread does: the workspace file, and either an instant or a snapshot. */
export interface RewindTask {
  file: string;
  /** Point-in-time: the instant (ISO-8601) to bring the data back to. */
  instant?: string;
  /** From a backup: its snapshot file, and where the bytes of its files are and go. */
  snapshot?: { file: string; filesFrom: string; filesTo: string };
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
  return new Promise<void>((resolve, reject) => {
    const thread = new Thread(threadUrl(sibling(import.meta.url, "rewind-thread-entry")), {
      workerData: task,
      name: "plinth-restore",
    });
    let settled = false;
    thread.once("message", (message: { ok: boolean; error?: string }) => {
      settled = true;
      if (message.ok) resolve();
      else reject(new Error(`the restore failed: ${message.error}`));
    });
    thread.once("error", (error) => {
      if (!settled) reject(error);
      settled = true;
    });
    thread.once("exit", (code) => {
      if (!settled) reject(new Error(`the restore's thread exited (${code}) before it finished`));
      settled = true;
    });
  });
}
