import { projectPath } from "./projects.ts";
import { cliOf, type Program, parseCount, parseInstant } from "./shared.ts";

/** `errors <p>`: what the project's workspace answered with an error lately. */
export function tenantErrorsCommand(program: Program): void {
  program
    .command("errors")
    .description("a project's recent workspace API errors, newest first")
    .argument("<project>", "the project's slug")
    .option("--status <status>", "4xx, 5xx or one status (404)")
    .option("--since <time>", "ISO-8601, Unix ms, or relative to now: -1h")
    .option("--limit <n>", "how many (at most 500)", "50")
    .action(async (project, options, command) => {
      const cli = cliOf(command);
      const query = {
        limit: parseCount(options.limit, "--limit"),
        ...(options.status ? { status: options.status } : {}),
        ...(options.since ? { since: new Date(parseInstant(options.since, "--since")).toISOString() } : {}),
      };
      const client = await cli.client();
      const path = await projectPath(cli, project);
      const answer = await cli.call(
        client.GET("/org/{slug}/projects/{projectSlug}/errors", { params: { path, query } }),
      );
      cli.out.answer(answer, () =>
        cli.out.table(
          answer.errors,
          [
            { header: "at", value: (error) => error.at },
            { header: "status", value: (error) => error.status },
            { header: "code", value: (error) => error.code },
            { header: "method", value: (error) => error.method },
            { header: "path", value: (error) => error.path },
            { header: "message", value: (error) => error.message },
          ],
          "No errors: the workspace's clients are doing fine.",
        ),
      );
    });
}
