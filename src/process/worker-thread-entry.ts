import { parentPort, workerData } from "node:worker_threads";
import { startWorker } from "./runtime.ts";
import type { FromThread, ThreadData, ToThread } from "./worker-thread.ts";

// The body of a server's worker thread (see WorkerThread): `plinth worker`, woken by messages.
const port = parentPort;
if (!port) throw new Error("worker-thread-entry runs only as a worker thread");
const { config } = workerData as ThreadData;

/** Outbox deletions the server has been asked for (SQLite), by request id. */
const clearing = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();
let lastRequest = 0;
const clearOutbox = (projectId: string, eventIds: string[]) =>
  new Promise<void>((resolve, reject) => {
    const id = ++lastRequest;
    clearing.set(id, { resolve, reject });
    port.postMessage({ type: "clear", id, projectId, eventIds } satisfies FromThread);
  });

const running = await startWorker({ config }, { inThread: true, ...(config.databaseUrl ? {} : { clearOutbox }) });

/** Set by "stop": wake-ups and dispatches that arrive while the server drains are left for the next start's sweep. */
let stopping = false;

port.on("message", (message: ToThread) => {
  switch (message.type) {
    case "wake":
      if (!stopping) running.deps.jobs.wake(message.kinds);
      break;
    case "dispatch":
      if (!stopping) for (const projectId of message.projectIds) running.dispatch(projectId);
      break;
    case "cleared": {
      const request = clearing.get(message.id);
      clearing.delete(message.id);
      if (message.error === undefined) request?.resolve();
      else request?.reject(new Error(`clearing the outbox failed: ${message.error}`));
      break;
    }
    case "stop":
      stopping = true;
      void running
        .close()
        .catch((error: unknown) => running.deps.log.error({ err: error }, "stopping the worker thread failed"))
        // Ends this thread only; whatever still holds the loop open is let go.
        .finally(() => process.exit(0));
      break;
  }
});
port.postMessage({ type: "ready" } satisfies FromThread);
