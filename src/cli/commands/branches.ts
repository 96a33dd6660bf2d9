import type { Branch } from "../../client/index.ts";
import { projectPath } from "./projects.ts";
import { cliOf, type Program, parseCount, parseInstant } from "./shared.ts";

const branchColumns = [
  { header: "id", value: (branch: Branch) => branch.id },
  { header: "name", value: (branch: Branch) => branch.name },
  { header: "status", value: (branch: Branch) => branch.status },
  { header: "pr", value: (branch: Branch) => branch.prNumber },
  { header: "from", value: (branch: Branch) => branch.sourceTimestamp },
  { header: "workspace", value: (branch: Branch) => branch.workspaceUrl },
];

/** `branches list <p> | create <p> <name> [--at] | delete <p> <id>`. */
export function branchCommands(program: Program): void {
  const branches = program.command("branches").description("copies of a project's data, each with its own workspace");
  branches
    .command("list")
    .description("a project's branches")
    .argument("<project>", "the project's slug")
    .action(async (project, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      const answer = await cli.call(client.GET("/org/{slug}/projects/{projectSlug}/branches", { params: { path } }));
      cli.out.answer(answer, () => cli.out.table(answer.branches, branchColumns, "No branches."));
    });
  branches
    .command("create")
    .description("branch a project: now, or --at an instant of its restore window")
    .argument("<project>", "the project's slug")
    .argument("<name>")
    .option("--at <time>", "ISO-8601, Unix ms, or relative to now: -10m, -2h")
    .option("--pr <number>", "the pull request it is for")
    .action(async (project, name, options, command) => {
      const cli = cliOf(command);
      const body = {
        name,
        ...(options.at ? { at: parseInstant(options.at, "--at") } : {}),
        ...(options.pr ? { prNumber: parseCount(options.pr, "--pr") } : {}),
      };
      const client = await cli.client();
      const path = await projectPath(cli, project);
      const answer = await cli.call(
        client.POST("/org/{slug}/projects/{projectSlug}/branches", { params: { path }, body }),
      );
      cli.out.answer(answer, () =>
        [
          cli.out.table([answer.branch], branchColumns, "") ?? "",
          cli.out.fields([["admin token", answer.adminToken]]),
        ].join("\n"),
      );
      if (!cli.out.json) cli.out.message("The branch's admin token is shown once: keep it now.");
    });
  branches
    .command("delete")
    .description("delete a branch and its workspace")
    .argument("<project>", "the project's slug")
    .argument("<id>", "brn_…")
    .action(async (project, id, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      await cli.confirm(`This deletes branch ${id} of ${project} and its data`);
      await cli.call(
        client.DELETE("/org/{slug}/projects/{projectSlug}/branches/{id}", { params: { path: { ...path, id } } }),
      );
      cli.out.answer({ ok: true }, () => null);
      cli.out.message(`Deleted ${id}.`);
    });
}
