import { cliOf, type Program } from "./shared.ts";

/**
 * `serve` and `worker`: the Plinth process itself, configured from the environment (README).
 * Its modules load only here, so the rest of the CLI starts without them.
 */
export function serverCommands(program: Program): void {
  for (const [name, description] of [
    ["serve", "serve the API, running WORKERS job slots in the same process"],
    ["worker", "run jobs only (scale-out on PostgreSQL)"],
  ] as const) {
    program
      .command(name)
      .description(`${description}; configured from the environment`)
      .action(async (_options, command) => {
        cliOf(command);
        const { runProcess } = await import("../../process/run.ts");
        await runProcess(name);
      });
  }
}
