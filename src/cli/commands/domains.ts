import type { Domain } from "../../client/index.ts";
import type { Output } from "../output.ts";
import { projectPath } from "./projects.ts";
import { cliOf, type Program } from "./shared.ts";

const domainColumns = [
  { header: "id", value: (domain: Domain) => domain.id },
  { header: "hostname", value: (domain: Domain) => domain.hostname },
  { header: "status", value: (domain: Domain) => domain.status },
  { header: "error", value: (domain: Domain) => domain.error },
];

/** The records a domain needs: the TXT that proves it, the CNAME that routes it. */
function domainRecords(out: Output, domain: Domain): string {
  return [
    out.table([domain], domainColumns, "") ?? "",
    "",
    out.fields([
      ["TXT name", domain.verification.name],
      ["TXT value", domain.verification.value],
      ["CNAME to", domain.target.value],
    ]),
  ].join("\n");
}

/** `domains list <p> | add <p> <hostname> | verify <p> <id> | remove <p> <id>`. */
export function domainCommands(program: Program): void {
  const domains = program.command("domains").description("a project's custom domains");
  domains
    .command("list")
    .description("a project's domains")
    .argument("<project>", "the project's slug")
    .action(async (project, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      const answer = await cli.call(client.GET("/org/{slug}/projects/{projectSlug}/domains", { params: { path } }));
      cli.out.answer(answer, () => cli.out.table(answer.domains, domainColumns, "No domains."));
    });
  domains
    .command("add")
    .description("add a hostname: publish the TXT record it names, then verify")
    .argument("<project>", "the project's slug")
    .argument("<hostname>")
    .action(async (project, hostname, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      const answer = await cli.call(
        client.POST("/org/{slug}/projects/{projectSlug}/domains", { params: { path }, body: { hostname } }),
      );
      cli.out.answer(answer, () => domainRecords(cli.out, answer.domain));
    });
  domains
    .command("verify")
    .description("look the domain's TXT record up now")
    .argument("<project>", "the project's slug")
    .argument("<id>", "dom_…")
    .action(async (project, id, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      const answer = await cli.call(
        client.POST("/org/{slug}/projects/{projectSlug}/domains/{id}/verify", { params: { path: { ...path, id } } }),
      );
      cli.out.answer(answer, () => domainRecords(cli.out, answer.domain));
    });
  domains
    .command("remove")
    .description("remove a domain: its host stops serving the project")
    .argument("<project>", "the project's slug")
    .argument("<id>", "dom_…")
    .action(async (project, id, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      await cli.confirm(`This removes domain ${id} from ${project}`);
      await cli.call(
        client.DELETE("/org/{slug}/projects/{projectSlug}/domains/{id}", { params: { path: { ...path, id } } }),
      );
      cli.out.answer({ ok: true }, () => null);
      cli.out.message(`Removed ${id}.`);
    });
}
