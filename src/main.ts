import { ConfigError, loadConfig } from "./config.ts";
import { errorMessage } from "./errors.ts";
import { createLogger } from "./logger.ts";
import { startServer, startWorker } from "./process/server.ts";

const USAGE = `usage: plinth [serve | worker]

  serve    serve the API, running WORKERS job slots in the same process (the default)
  worker   run jobs only (scale-out on PostgreSQL)

Configuration comes from the environment; see README.md.`;

const HELP = new Set(["--help", "-h", "help"]);

async function main(argv: string[]): Promise<void> {
  if (argv.some((arg) => HELP.has(arg))) {
    console.log(USAGE);
    return;
  }
  const [command = "serve", ...rest] = argv;
  if (command !== "serve" && command !== "worker") {
    console.error(`plinth: unknown command '${command}'\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  // Nothing is read from the command line but the command: a flag would be ignored, not obeyed.
  if (rest.length > 0) {
    console.error(`plinth: '${command}' takes no arguments (got '${rest.join(" ")}')\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
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

await main(process.argv.slice(2));
