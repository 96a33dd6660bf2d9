import { Worker as Thread } from "node:worker_threads";

/**
 * The URL to start a worker thread on for the module at `entry` (a `.ts` URL when running from
 * sources, as tests and `npm run dev` do; `.js` from `dist/`). From sources the thread needs
 * tsx's loader registered in it first: Node 20 does not carry a parent's `--import tsx` into
 * worker threads.
 */
export function threadUrl(entry: URL): URL {
  if (!entry.pathname.endsWith(".ts")) return entry;
  const api = import.meta.resolve("tsx/esm/api");
  const boot = `const m = await import(${JSON.stringify(api)}); (m.register ?? m.default.register)(); await import(${JSON.stringify(entry.href)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(boot)}`);
}

/** A module beside `base` (an `import.meta.url`), in the same form (`.ts` from sources, `.js` built). */
export function sibling(base: string, name: string): URL {
  return new URL(`./${name}${base.endsWith(".ts") ? ".ts" : ".js"}`, base);
}

/**
 * Runs the module at `entry` once on a thread of its own with `data` as its `workerData`, and
 * settles with its one message: `{ok: true}`, or `{ok: false, error}` (rejected with it). Used
 * for long synchronous SQLite work (better-sqlite3 blocks the thread it runs on) that must not
 * stop the event loop serving the API. A thread that dies first is a rejection too.
 */
export function runOnThread(entry: URL, data: unknown, name: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const thread = new Thread(threadUrl(entry), { workerData: data, name });
    let settled = false;
    thread.once("message", (message: { ok: boolean; error?: string }) => {
      settled = true;
      if (message.ok) resolve();
      else reject(new Error(message.error ?? "the thread failed"));
    });
    thread.once("error", (error) => {
      if (!settled) reject(error);
      settled = true;
    });
    thread.once("exit", (code) => {
      if (!settled) reject(new Error(`the thread exited (${code}) before it finished`));
      settled = true;
    });
  });
}

/** For a thread's entry: runs `work` and tells the parent how it went (see `runOnThread`). */
export async function reportToParent(work: () => Promise<void>): Promise<void> {
  const { parentPort } = await import("node:worker_threads");
  try {
    await work();
    parentPort?.postMessage({ ok: true });
  } catch (error) {
    parentPort?.postMessage({ ok: false, error: error instanceof Error ? error.message : String(error) });
  }
}
