import { cliOf, type Program, parseCount, parseInstant } from "./shared.ts";

/** `audit`: the org's audit log, newest first. */
export function auditCommand(program: Program): void {
  program
    .command("audit")
    .description("the org's audit log, newest first (admins)")
    .option("--action <pattern>", "an action or a prefix: project.*, api_key.created")
    .option("--from <time>", "ISO-8601, Unix ms, or relative to now: -1d")
    .option("--to <time>", "ISO-8601, Unix ms, or relative to now")
    .option("--limit <n>", "how many (at most 500)", "50")
    .action(async (options, command) => {
      const cli = cliOf(command);
      const query = {
        limit: parseCount(options.limit, "--limit"),
        ...(options.action ? { action: options.action } : {}),
        ...(options.from ? { from: String(parseInstant(options.from, "--from")) } : {}),
        ...(options.to ? { to: String(parseInstant(options.to, "--to")) } : {}),
      };
      const client = await cli.client();
      const answer = await cli.call(
        client.GET("/org/{slug}/audit", { params: { path: { slug: await cli.org() }, query } }),
      );
      cli.out.answer(answer, () =>
        cli.out.table(
          answer.events,
          [
            { header: "at", value: (event) => event.createdAt },
            { header: "action", value: (event) => event.action },
            { header: "actor", value: (event) => event.actor.email ?? `${event.actor.type} ${event.actor.id}` },
            { header: "target", value: (event) => `${event.target.type} ${event.target.id}` },
          ],
          "Nothing in the audit log for that.",
        ),
      );
    });
}
