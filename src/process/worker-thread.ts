import { Worker as Thread } from "node:worker_threads";
import { sql } from "kysely";
import type { Config } from "../config.ts";
import type { Deps } from "../deps.ts";
import type { WorkspaceStore } from "../domains/workspace/store.ts";
import { errorMessage } from "../errors.ts";
import { sibling, threadUrl } from "../lib/threads.ts";

/** A call of the server's WorkspaceStore made by its worker thread: a method and its arguments. */
export type StoreCall = {
  [M in keyof WorkspaceStore]: { method: M; args: Parameters<WorkspaceStore[M]> };
}[keyof WorkspaceStore];

/** What a server tells its worker thread. */
export type ToThread =
  | { type: "wake"; kinds: string[] }
  | { type: "dispatch"; projectIds: string[] }
  | { type: "stored"; id: number; value?: unknown; error?: string }
  | { type: "metrics"; id: number }
  | { type: "stop" };

/** What a worker thread tells its server. */
export type FromThread =
  | { type: "ready" }
  | { type: "store"; id: number; call: StoreCall }
  | { type: "metrics"; id: number; metrics: object[] };

export interface ThreadData {
  config: Config;
}

/** A thread that died unasked is started again after this long. */
const RESTART_DELAY_MS = 1_000;
/** A scrape does not wait longer than this for the thread's counters (it shows the server's alone). */
const METRICS_TIMEOUT_MS = 2_000;

/**
 * The server's job worker, run on a thread of its own with its own database connection, so jobs
 * and webhook deliveries use a second core instead of sharing the event loop that serves the API.
 *
 * The server keeps enqueuing in the transaction of each change; the thread claims as `plinth
 * worker` would. A local enqueue is passed on as a wake-up only once the enqueuing transaction
 * is over (on SQLite, after a query queued behind it on the server's one connection), so the
 * thread never looks before the commit; PostgreSQL wakes it by NOTIFY. Workspace outboxes the
 * server wrote to are passed on likewise, after their commit. On SQLite the thread opens no
 * workspace: it asks the server to read and clear outboxes (and look files up) through the
 * server's WorkspaceStore, so a process opens each workspace once, within one bound (see
 * WorkspacePool), and the thread never sits in SQLite's busy handler (which sleeps, blocking its
 * event loop) waiting for the write lock the server holds most of the time under load. If the
 * thread dies, its leases lapse and a new thread takes over, sweeping the outboxes as it starts.
 */
export class WorkerThread {
  private thread: Thread | undefined;
  private stopping = false;
  private readonly kinds = new Set<string>();
  private barrier: Promise<void> | undefined;
  private readonly projects = new Set<string>();
  private dispatchQueued = false;
  private readonly unsubscribe: () => void;
  private lastMetricsCall = 0;
  private readonly metricsCalls = new Map<number, (metrics: object[]) => void>();

  private constructor(
    private readonly deps: Deps,
    private readonly store: WorkspaceStore,
  ) {
    this.unsubscribe = deps.jobs.onWake((kinds) => this.wake(kinds));
  }

  /** Starts the thread; resolves once it runs jobs. `store`: the server's workspaces. */
  static async start(deps: Deps, store: WorkspaceStore): Promise<WorkerThread> {
    const worker = new WorkerThread(deps, store);
    try {
      await worker.spawn();
    } catch (error) {
      worker.unsubscribe();
      throw error;
    }
    return worker;
  }

  /** Passes a workspace write on to the thread's dispatcher; call it after the write commits. */
  dispatch(projectId: string): void {
    this.projects.add(projectId);
    if (this.dispatchQueued) return;
    this.dispatchQueued = true;
    setImmediate(() => {
      this.dispatchQueued = false;
      const projectIds = [...this.projects];
      this.projects.clear();
      this.post({ type: "dispatch", projectIds });
    });
  }

  /** The thread's metrics (its registry as JSON: webhook deliveries, storage errors); none if it does not answer in time. */
  metrics(): Promise<object[]> {
    const thread = this.thread;
    if (!thread) return Promise.resolve([]);
    const id = ++this.lastMetricsCall;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.metricsCalls.delete(id);
        resolve([]);
      }, METRICS_TIMEOUT_MS);
      this.metricsCalls.set(id, (metrics) => {
        clearTimeout(timer);
        resolve(metrics);
      });
      thread.postMessage({ type: "metrics", id } satisfies ToThread);
    });
  }

  /** Lets running jobs finish (bounded by SHUTDOWN_TIMEOUT_MS in the thread) and ends the thread. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribe();
    const thread = this.thread;
    if (!thread) return;
    const exited = new Promise<void>((resolve) => thread.once("exit", () => resolve()));
    this.post({ type: "stop" });
    // A thread that does not finish its shutdown in time is ended anyway; its leases lapse.
    const timer = setTimeout(() => void thread.terminate(), this.deps.config.shutdownTimeoutMs + 5_000);
    await exited;
    clearTimeout(timer);
  }

  /**
   * Wakes the thread for the kinds of a local enqueue, once the enqueuing transaction is over:
   * every query of this process queues on its one SQLite connection, so a query started now
   * completes after that transaction does. Kinds named meanwhile wait for the next such query.
   */
  private wake(kinds: readonly string[]): void {
    for (const kind of kinds) this.kinds.add(kind);
    this.barrier ??= this.passOnWakes();
  }

  private async passOnWakes(): Promise<void> {
    while (this.kinds.size > 0) {
      const kinds = [...this.kinds];
      this.kinds.clear();
      await sql`select 1`.execute(this.deps.db).catch(() => {});
      this.post({ type: "wake", kinds });
    }
    this.barrier = undefined;
  }

  /**
   * Runs a store call of the thread's on the server's store, and answers that thread (not a
   * successor, whose call ids start again).
   */
  private async answerStoreCall(thread: Thread, { id, call }: { id: number; call: StoreCall }) {
    let answer: ToThread;
    try {
      const method = this.store[call.method] as (...args: StoreCall["args"]) => Promise<unknown>;
      answer = { type: "stored", id, value: await method(...call.args) };
    } catch (cause) {
      answer = { type: "stored", id, error: errorMessage(cause) };
    }
    thread.postMessage(answer);
  }

  private post(message: ToThread): void {
    this.thread?.postMessage(message);
  }

  private spawn(): Promise<void> {
    const data: ThreadData = { config: this.deps.config };
    // Sources (tests, `npm run dev`) need the TypeScript loader in the thread too.
    const thread = new Thread(threadUrl(sibling(import.meta.url, "worker-thread-entry")), {
      workerData: data,
      name: "plinth-worker",
    });
    this.thread = thread;
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      thread.on("message", (message: FromThread) => {
        if (message.type === "ready") {
          ready = true;
          resolve();
        } else if (message.type === "store") {
          void this.answerStoreCall(thread, message);
        } else if (message.type === "metrics") {
          this.metricsCalls.get(message.id)?.(message.metrics);
          this.metricsCalls.delete(message.id);
        }
      });
      thread.on("error", (error) => {
        this.deps.log.error({ err: error }, "the worker thread failed");
        if (!ready) reject(error);
      });
      thread.on("exit", (code) => {
        if (this.thread === thread) this.thread = undefined;
        if (!ready) {
          reject(new Error(`the worker thread exited (code ${code}) before it was ready`));
          return;
        }
        if (this.stopping) return;
        this.deps.log.error({ code }, "the worker thread exited; starting a new one");
        this.restartLater();
      });
    });
  }

  private restartLater(): void {
    setTimeout(() => {
      if (this.stopping) return;
      this.spawn().catch((error: unknown) => {
        this.deps.log.error({ err: error }, "restarting the worker thread failed; trying again");
        this.restartLater();
      });
    }, RESTART_DELAY_MS).unref();
  }
}
