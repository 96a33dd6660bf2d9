import { ConfigError, loadConfig } from "../config.ts";
import { errorMessage } from "../errors.ts";
import { createLogger } from "../logger.ts";
import { startServer, startWorker } from "./server.ts";

/**
 * Runs `plinth serve` (the API, with WORKERS job slots) or `plinth worker` (jobs only) until
 * SIGTERM or SIGINT, configured from the environment; a bad configuration or a failed start ends
 * the process with exit code 1 and one line saying why.
 */
export async function runProcess(command: "serve" | "worker"): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`plinth: ${error.message}`);
      process.exitCode = 1;
      return;
    }
    throw error;
  }
  const log = createLogger(config);
  let running: Awaited<ReturnType<typeof startServer | typeof startWorker>>;
  try {
    running = command === "worker" ? await startWorker({ config, log }) : await startServer({ config, log });
  } catch (error) {
    // Most often the environment: an address to listen on that cannot be had (HOST, PORT), a
    // DATA_DIR that cannot be written, a database that cannot be reached (DATABASE_URL).
    log.fatal({ err: error }, "could not start");
    console.error(`plinth: could not start: ${errorMessage(error)}`);
    process.exit(1);
  }
  const shutdown = (signal: string) => {
    log.info({ signal }, "shutting down");
    running.close().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", () => shutdown("SIGTERM"));
  process.once("SIGINT", () => shutdown("SIGINT"));
}
