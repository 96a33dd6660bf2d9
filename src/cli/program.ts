import { Command, Option } from "@commander-js/extra-typings";
import { accountCommands } from "./commands/account.ts";
import { apiCommand } from "./commands/api.ts";
import { auditCommand } from "./commands/audit.ts";
import { backupCommands, restoreCommand } from "./commands/backups.ts";
import { branchCommands } from "./commands/branches.ts";
import { completionCommands } from "./commands/completion.ts";
import { domainCommands } from "./commands/domains.ts";
import { exportCommand } from "./commands/export.ts";
import { keyCommands } from "./commands/keys.ts";
import { memberCommands } from "./commands/members.ts";
import { orgCommands } from "./commands/orgs.ts";
import { projectCommands } from "./commands/projects.ts";
import { serverCommands } from "./commands/server.ts";
import { tenantErrorsCommand } from "./commands/tenant-errors.ts";
import { alarmCommands, usageCommand } from "./commands/usage.ts";
import { webhookCommands } from "./commands/webhooks.ts";

/** The `plinth` program: `plinth <noun> <verb>` (DESIGN §14), each noun in commands/. */
export function plinthProgram(): Command {
  const program = new Command("plinth")
    .description("Plinth's command line: manage orgs, projects and their data through the API; serve it.")
    .version("0.0.1")
    .addOption(new Option("--url <url>", "where Plinth is (PLINTH_URL, else the config file)"))
    .addOption(new Option("--api-key <key>", "an API key; - reads it from stdin (PLINTH_API_KEY)"))
    .addOption(new Option("--org <slug>", "the org to act on (PLINTH_ORG; needless with one org)"))
    .addOption(new Option("-o, --output <format>", "table for people, json for scripts").choices(["table", "json"]))
    .addOption(new Option("--json", "the API's JSON, exactly (= -o json)"))
    .addOption(new Option("-y, --yes", "confirm destructive commands without asking"))
    .showHelpAfterError("(plinth --help lists the commands)")
    .showSuggestionAfterError(true)
    // Before any command is added, so that every one inherits it: runCli maps the exit codes.
    .exitOverride();
  program.configureHelp({ sortSubcommands: false });
  for (const add of [
    accountCommands,
    orgCommands,
    projectCommands,
    backupCommands,
    restoreCommand,
    branchCommands,
    domainCommands,
    keyCommands,
    webhookCommands,
    memberCommands,
    usageCommand,
    alarmCommands,
    tenantErrorsCommand,
    auditCommand,
    exportCommand,
    apiCommand,
    completionCommands,
    serverCommands,
  ]) {
    add(program);
  }
  return program as unknown as Command;
}
