import { parentPort, workerData } from "node:worker_threads";
import type { OutboxEvent, WorkspaceStore } from "../domains/workspace/store.ts";
import { countersJson } from "../lib/metrics.ts";
import { startWorker } from "./runtime.ts";
import type { FromThread, StoreCall, ThreadData, ToThread } from "./worker-thread.ts";

// The body of a server's worker thread (see WorkerThread): `plinth worker`, woken by messages.
const port = parentPort;
if (!port) throw new Error("worker-thread-entry runs only as a worker thread");
const { config } = workerData as ThreadData;

/** Store calls the server has been asked to answer (SQLite), by call id. */
const calls = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
let lastCall = 0;
const callServer = (call: StoreCall) =>
  new Promise<unknown>((resolve, reject) => {
    const id = ++lastCall;
    calls.set(id, { resolve, reject });
    port.postMessage({ type: "store", id, call } satisfies FromThread);
  });

/** The server's WorkspaceStore, reached by messages: on SQLite the thread opens no workspace. */
const remoteStore: WorkspaceStore = {
  readOutbox: (...args) => callServer({ method: "readOutbox", args }) as Promise<OutboxEvent[] | null>,
  clearOutbox: (...args) => callServer({ method: "clearOutbox", args }) as Promise<void>,
  neededFiles: (...args) => callServer({ method: "neededFiles", args }) as Promise<string[] | null>,
  installHistory: (...args) => callServer({ method: "installHistory", args }) as Promise<boolean | null>,
  pruneHistory: (...args) => callServer({ method: "pruneHistory", args }) as Promise<number | null>,
};

const running = await startWorker(
  { config },
  { inThread: true, ...(config.databaseUrl ? {} : { store: remoteStore }) },
);

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
    case "stored": {
      const call = calls.get(message.id);
      calls.delete(message.id);
      if (message.error === undefined) call?.resolve(message.value);
      else call?.reject(new Error(message.error));
      break;
    }
    case "metrics":
      void countersJson().then((metrics) =>
        port.postMessage({ type: "metrics", id: message.id, metrics } satisfies FromThread),
      );
      break;
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
