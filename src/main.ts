import { runProcess } from "./process/run.ts";

const USAGE = `usage: plinth [serve | worker]

  serve    serve the API, running WORKERS job slots in the same process (the default)
  worker   run jobs only (scale-out on PostgreSQL)

Configuration comes from the environment; see README.md.`;

const HELP = new Set(["--help", "-h", "help"]);

/**
 * The server's entry (`npm start`, `node dist/main.js [serve | worker]`): the process alone, none
 * of the CLI. `plinth serve` and `plinth worker` of the CLI run the same `runProcess`.
 */
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
  await runProcess(command);
}

await main(process.argv.slice(2));
