import { parentPort, workerData } from "node:worker_threads";
import { startWorker } from "./runtime.ts";
import type { FromThread, ThreadData, ToThread } from "./worker-thread.ts";

// The body of a server's worker thread (see WorkerThread): `plinth worker`, woken by messages.
const port = parentPort;
if (!port) throw new Error("worker-thread-entry runs only as a worker thread");
const { config } = workerData as ThreadData;
const running = await startWorker({ config }, { inThread: true });

port.on("message", (message: ToThread) => {
  switch (message.type) {
    case "wake":
      running.deps.jobs.wake(message.kinds);
      break;
    case "dispatch":
      for (const projectId of message.projectIds) running.dispatch(projectId);
      break;
    case "stop":
      void running
        .close()
        .catch((error: unknown) => running.deps.log.error({ err: error }, "stopping the worker thread failed"))
        // Ends this thread only; whatever still holds the loop open is let go.
        .finally(() => process.exit(0));
      break;
  }
});
port.postMessage({ type: "ready" } satisfies FromThread);
