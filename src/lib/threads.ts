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

/** A `ThreadWorker` job that the thread refused (its message is safe to show), as opposed to one that broke. */
export class ThreadRefusal extends Error {}
/** A `ThreadWorker` that has `maxWaiting` jobs waiting already. */
export class ThreadBusyError extends Error {}
/** A `ThreadWorker` job that took longer than `timeoutMs`: its thread was stopped. */
export class ThreadTimeoutError extends Error {}

type Answer<O> = { ok: true; value: O } | { ok: false; refusal?: string; error?: string };

interface Job<I, O> {
  input: I;
  resolve(value: O): void;
  reject(error: Error): void;
}

/**
 * A long-lived thread that runs the module at `entry` (which calls `answerParent`) and answers
 * jobs one at a time, in order: CPU-bound work that must not stop the event loop serving the API.
 * A job that runs past `timeoutMs` stops the thread (a new one starts for the next job), so no
 * input can hold it for longer; past `maxWaiting` jobs waiting, new ones are refused at once.
 * The thread is started on first use and does not keep the process alive.
 */
export class ThreadWorker<I, O> {
  private thread: Thread | undefined;
  private readonly waiting: Job<I, O>[] = [];
  private running: { job: Job<I, O>; timer: NodeJS.Timeout } | undefined;

  constructor(
    private readonly entry: URL,
    private readonly name: string,
    private readonly limits: { timeoutMs: number; maxWaiting: number },
  ) {}

  run(input: I): Promise<O> {
    if (this.waiting.length >= this.limits.maxWaiting) {
      return Promise.reject(new ThreadBusyError(`${this.name}: ${this.waiting.length} jobs are waiting already`));
    }
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ input, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    if (this.running) return;
    const job = this.waiting.shift();
    if (!job) return;
    const timer = setTimeout(
      () => this.settle(new ThreadTimeoutError(`${this.name}: took longer than ${this.limits.timeoutMs} ms`), true),
      this.limits.timeoutMs,
    );
    this.running = { job, timer };
    this.started().postMessage(job.input);
  }

  private started(): Thread {
    if (this.thread) return this.thread;
    const thread = new Thread(threadUrl(this.entry), { name: this.name });
    thread.unref();
    thread.on("message", (answer: Answer<O>) => {
      if (answer.ok) this.settle(answer.value, false);
      else if (answer.refusal !== undefined) this.settle(new ThreadRefusal(answer.refusal), false);
      else this.settle(new Error(answer.error ?? `${this.name} failed`), false);
    });
    thread.on("error", (error) => {
      if (thread === this.thread) this.settle(error, true);
    });
    thread.on("exit", (code) => {
      if (thread === this.thread) this.settle(new Error(`${this.name} exited (${code})`), true);
    });
    this.thread = thread;
    return thread;
  }

  /** Ends the running job with `outcome`; `stop` ends its thread too (a new one serves the next job). */
  private settle(outcome: O | Error, stop: boolean): void {
    const running = this.running;
    this.running = undefined;
    if (stop && this.thread) {
      const thread = this.thread;
      this.thread = undefined;
      void thread.terminate();
    }
    if (running) {
      clearTimeout(running.timer);
      if (outcome instanceof Error) running.job.reject(outcome);
      else running.job.resolve(outcome);
    }
    this.next();
  }
}

/**
 * For a `ThreadWorker`'s entry: answers each job with `work`'s result; an error `refusalOf`
 * recognises is a refusal (its message shown), any other a failure.
 */
export async function answerParent<I, O>(
  work: (input: I) => Promise<O>,
  refusalOf: (error: unknown) => string | null,
): Promise<void> {
  const { parentPort } = await import("node:worker_threads");
  parentPort?.on("message", async (input: I) => {
    let answer: Answer<O>;
    try {
      answer = { ok: true, value: await work(input) };
    } catch (error) {
      const refusal = refusalOf(error);
      answer =
        refusal !== null
          ? { ok: false, refusal }
          : { ok: false, error: error instanceof Error ? error.message : String(error) };
    }
    parentPort.postMessage(answer);
  });
}
