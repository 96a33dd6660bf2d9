import type { Project } from "../../client/index.ts";
import type { Cli } from "../context.ts";
import { ApiError } from "../errors.ts";
import type { Output } from "../output.ts";
import { cliOf, type Program, waitFor } from "./shared.ts";

export function projectFields(out: Output, project: Project): string {
  return out.fields([
    ["slug", project.slug],
    ["name", project.name],
    ["id", project.id],
    ["status", project.status],
    ["environment", project.environment],
    ["sign-up", project.signUp],
    ["region", project.region],
    ["template", project.templateVersion],
    ["workspace", project.workspaceUrl],
    ["created", project.createdAt],
  ]);
}

/** A project by slug in the current org: `{slug, projectSlug}` for a path. */
export async function projectPath(cli: Cli, projectSlug: string) {
  return { slug: await cli.org(), projectSlug };
}

/** `projects list | get | create [--wait] | update | pause | resume | delete | upgrade`. */
export function projectCommands(program: Program): void {
  const projects = program.command("projects").description("the org's projects (each is a backend of its own)");
  projects
    .command("list")
    .description("every live project of the org")
    .action(async (_options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const answer = await cli.call(
        client.GET("/org/{slug}/projects", { params: { path: { slug: await cli.org() } } }),
      );
      cli.out.answer(answer, () =>
        cli.out.table(
          answer.projects,
          [
            { header: "slug", value: (project) => project.slug },
            { header: "name", value: (project) => project.name },
            { header: "status", value: (project) => project.status },
            { header: "environment", value: (project) => project.environment },
            { header: "region", value: (project) => project.region },
          ],
          "No projects yet: plinth projects create <name>",
        ),
      );
    });
  projects
    .command("get")
    .description("one project, by its slug")
    .argument("<project>", "the project's slug")
    .action(async (project, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      const answer = await cli.call(client.GET("/org/{slug}/projects/{projectSlug}", { params: { path } }));
      cli.out.answer(answer, () => projectFields(cli.out, answer.project));
    });
  projects
    .command("create")
    .description("a new project: its workspace is provisioned by a job (--wait follows it to active)")
    .argument("<name>")
    .option("--region <region>", "ist, fra, ams, lhr, sjc, iad, sin or syd (default: the org's)")
    .option("--template <template>", "name or name@version (default: the latest default)")
    .option("--wait", "return once the project is active (or exit 1 if it fails)")
    .action(async (name, options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const slug = await cli.org();
      const created = await cli.call(
        client.POST("/org/{slug}/projects", {
          params: { path: { slug } },
          body: {
            name,
            ...(options.region ? { region: options.region as never } : {}),
            ...(options.template ? { template: options.template } : {}),
          },
        }),
      );
      let project: Project = created.project;
      if (options.wait) {
        cli.out.message(`Provisioning ${project.slug}…`);
        const path = { slug, projectSlug: project.slug };
        project = (
          await waitFor(
            () => cli.call(client.GET("/org/{slug}/projects/{projectSlug}", { params: { path } })),
            (answer) => answer.project.status !== "provisioning",
          )
        ).project;
        if (project.status === "failed")
          throw new ApiError("FAILED", `${project.slug} failed to provision: plinth projects get ${project.slug}`);
      }
      // The admin token is shown once: with --wait, the project is the active one, the token the creation's.
      cli.out.answer({ project: { ...project, adminToken: created.adminToken }, adminToken: created.adminToken }, () =>
        [projectFields(cli.out, project), cli.out.fields([["admin token", created.adminToken]])].join("\n"),
      );
      if (!cli.out.json) cli.out.message("The workspace admin token is shown once: keep it now.");
    });
  projects
    .command("update")
    .description("rename a project, change its environment, or open or close its workspace's sign-up")
    .argument("<project>", "the project's slug")
    .option("--name <name>", "the new name (2 to 60 characters)")
    .option("--environment <environment>", "production, staging or development")
    .option("--sign-up <mode>", "open or closed: whether the workspace's POST /api/auth/sign-up is open")
    .action(async (project, options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      const answer = await cli.call(
        client.PATCH("/org/{slug}/projects/{projectSlug}", {
          params: { path },
          body: {
            ...(options.name !== undefined ? { name: options.name } : {}),
            ...(options.environment !== undefined ? { environment: options.environment as never } : {}),
            ...(options.signUp !== undefined ? { signUp: options.signUp as never } : {}),
          },
        }),
      );
      cli.out.answer(answer, () => projectFields(cli.out, answer.project));
    });
  for (const [verb, description] of [
    ["pause", "pause a project: its workspace answers 409 until resumed"],
    ["resume", "resume a paused project"],
  ] as const) {
    projects
      .command(verb)
      .description(description)
      .argument("<project>", "the project's slug")
      .action(async (project, _options, command) => {
        const cli = cliOf(command);
        const client = await cli.client();
        const path = await projectPath(cli, project);
        const answer = await cli.call(
          verb === "pause"
            ? client.POST("/org/{slug}/projects/{projectSlug}/pause", { params: { path } })
            : client.POST("/org/{slug}/projects/{projectSlug}/resume", { params: { path } }),
        );
        cli.out.answer(answer, () => projectFields(cli.out, answer.project));
      });
  }
  projects
    .command("delete")
    .description("delete a project (its workspace is purged after PROJECT_PURGE_DAYS)")
    .argument("<project>", "the project's slug")
    .action(async (project, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      await cli.confirm(`This deletes project ${project} and, after the purge delay, its data`);
      await cli.call(client.DELETE("/org/{slug}/projects/{projectSlug}", { params: { path } }));
      cli.out.answer({ ok: true }, () => null);
      cli.out.message(`Deleted ${project}.`);
    });
  projects
    .command("upgrade")
    .description("migrate a project's workspace to its template's latest version (or --version)")
    .argument("<project>", "the project's slug")
    .option("--version <version>", "the template version to reach")
    .action(async (project, options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      const answer = await cli.call(
        client.POST("/org/{slug}/projects/{projectSlug}/upgrade", {
          params: { path, ...(options.version ? { query: { version: options.version } } : {}) },
        }),
      );
      cli.out.answer(answer, () =>
        cli.out.fields(
          Object.entries(answer as Record<string, unknown>).filter(([, value]) => typeof value !== "object"),
        ),
      );
    });
}
