import { createPlinthClient } from "../../client/index.ts";
import { ApiError, UsageError } from "../errors.ts";
import { nodeFetch } from "../http.ts";
import { configPath, readSettings, removeSettings, writeSettings } from "../settings.ts";
import { cliOf, type Program } from "./shared.ts";

/** `login`, `logout`, `whoami`: who the CLI acts as, kept in the config file. */
export function accountCommands(program: Program): void {
  program
    .command("login")
    .description("check an API key and keep it, with the URL and the org, in the config file (0600)")
    .action(async (_options, command) => {
      const cli = cliOf(command);
      const url = await cli.url();
      const apiKey = await cli.apiKey();
      if (!apiKey) {
        throw new UsageError(
          "plinth login needs an API key: --api-key pak_… or --api-key - (from stdin); make one in the console or with POST /api/org/{slug}/api-keys",
        );
      }
      const client = createPlinthClient({ url, apiKey, fetch: nodeFetch });
      const { orgs } = await cli.call(client.GET("/orgs"));
      const org = cli.options.org ?? (orgs.length === 1 ? orgs[0]?.slug : undefined);
      if (cli.options.org && !orgs.some((candidate) => candidate.slug === cli.options.org)) {
        throw new ApiError("NOT_FOUND", `this key cannot reach org ${cli.options.org}`);
      }
      await writeSettings({ url, apiKey, ...(org ? { org } : {}) });
      cli.out.message(`Logged in to ${url}${org ? ` (org ${org})` : ""}; settings in ${configPath()}`);
    });

  program
    .command("logout")
    .description("forget the kept API key (the config file goes)")
    .action(async (_options, command) => {
      const cli = cliOf(command);
      const removed = await removeSettings();
      cli.out.message(removed ? `Logged out: removed ${configPath()}` : "Not logged in: nothing to forget");
    });

  program
    .command("whoami")
    .description("where the CLI points, and the orgs its key reaches with their role")
    .action(async (_options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const { orgs } = await cli.call(client.GET("/orgs"));
      const saved = await readSettings();
      const url = await cli.url();
      const org = cli.options.org ?? process.env.PLINTH_ORG ?? saved.org ?? (orgs.length === 1 ? orgs[0]?.slug : null);
      cli.out.answer({ orgs }, () => {
        const table = cli.out.table(
          orgs,
          [
            { header: "org", value: (row) => row.slug },
            { header: "name", value: (row) => row.name },
            { header: "role", value: (row) => row.role },
            { header: "plan", value: (row) => row.planId },
          ],
          "No orgs.",
        );
        return [
          cli.out.fields([
            ["url", url],
            ["org", org],
          ]),
          ...(table ? ["", table] : []),
        ].join("\n");
      });
    });
}
