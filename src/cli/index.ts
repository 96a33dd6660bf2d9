/**
 * The `plinth` command (bin/plinth.js): `plinth <noun> <verb>` on the SDK, and `plinth serve` /
 * `plinth worker`. Exit 0 when it worked, 1 on an API or network error (`error CODE: message
 * (request id)` on stderr), 2 on a usage error (nothing was changed).
 */
import { CommanderError } from "@commander-js/extra-typings";
import { ApiError, UsageError } from "./errors.ts";
import { plinthProgram } from "./program.ts";

export async function runCli(argv: string[]): Promise<number> {
  const program = plinthProgram();
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help asked for (`--help`, `help`) and the version are answers; help shown because no
      // command was given, or anything else commander refuses, is a usage error.
      const answered =
        error.code === "commander.helpDisplayed" ||
        error.code === "commander.version" ||
        (error.code === "commander.help" && error.exitCode === 0);
      return answered ? 0 : 2;
    }
    if (error instanceof UsageError) {
      process.stderr.write(`plinth: ${error.message}\n`);
      return 2;
    }
    if (error instanceof ApiError) {
      process.stderr.write(`${error.describe()}\n`);
      return 1;
    }
    throw error;
  }
}

const code = await runCli(process.argv);
// `serve` and `worker` keep running, and say themselves how a failed start ended.
if (code !== 0) process.exitCode = code;
