import type { ApiKey } from "../../client/index.ts";
import { UsageError } from "../errors.ts";
import { cliOf, type Program, parseCount } from "./shared.ts";

const SCOPES = ["full", "deploy", "read-only"] as const;

const keyColumns = [
  { header: "id", value: (key: ApiKey) => key.id },
  { header: "name", value: (key: ApiKey) => key.name },
  { header: "scope", value: (key: ApiKey) => key.scope },
  { header: "prefix", value: (key: ApiKey) => key.prefix },
  { header: "expires", value: (key: ApiKey) => key.expiresAt },
  { header: "last used", value: (key: ApiKey) => key.lastUsedAt },
];

/** `keys list | create <name> [--scope] | revoke <id>`. */
export function keyCommands(program: Program): void {
  const keys = program.command("keys").description("the org's API keys");
  keys
    .command("list")
    .description("the org's API keys (never their tokens)")
    .action(async (_options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const answer = await cli.call(
        client.GET("/org/{slug}/api-keys", { params: { path: { slug: await cli.org() } } }),
      );
      cli.out.answer(answer, () => cli.out.table(answer.apiKeys, keyColumns, "No API keys."));
    });
  keys
    .command("create")
    .description("a new API key: its token is shown once")
    .argument("<name>")
    .option("--scope <scope>", "full, deploy or read-only", "read-only")
    .option("--expires-in-days <days>", "when it stops working")
    .option("--mcp-tools <names>", "comma-separated MCP tools it may call (all its scope allows without)")
    .action(async (name, options, command) => {
      const cli = cliOf(command);
      const scope = options.scope as (typeof SCOPES)[number];
      if (!SCOPES.includes(scope)) throw new UsageError(`--scope must be one of ${SCOPES.join(", ")}`);
      const body = {
        name,
        scope,
        ...(options.expiresInDays ? { expiresInDays: parseCount(options.expiresInDays, "--expires-in-days") } : {}),
        ...(options.mcpTools ? { mcpTools: options.mcpTools.split(",").map((tool) => tool.trim()) } : {}),
      };
      const client = await cli.client();
      const answer = await cli.call(
        client.POST("/org/{slug}/api-keys", { params: { path: { slug: await cli.org() } }, body }),
      );
      cli.out.answer(answer, () =>
        [cli.out.table([answer.apiKey], keyColumns, "") ?? "", cli.out.fields([["token", answer.token]])].join("\n"),
      );
      if (!cli.out.json) cli.out.message("The token is shown once: keep it now.");
    });
  keys
    .command("revoke")
    .description("revoke an API key: it stops working at once")
    .argument("<id>", "key_…")
    .action(async (id, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const slug = await cli.org();
      await cli.confirm(`This revokes API key ${id}: whatever uses it stops working`);
      await cli.call(client.DELETE("/org/{slug}/api-keys/{id}", { params: { path: { slug, id } } }));
      cli.out.answer({ ok: true }, () => null);
      cli.out.message(`Revoked ${id}.`);
    });
}
