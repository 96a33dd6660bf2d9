import type { Backup } from "../../client/index.ts";
import { ApiError } from "../errors.ts";
import { projectPath } from "./projects.ts";
import { cliOf, type Program, parseInstant, waitFor } from "./shared.ts";

const backupColumns = [
  { header: "id", value: (backup: Backup) => backup.id },
  { header: "kind", value: (backup: Backup) => backup.kind },
  { header: "status", value: (backup: Backup) => backup.status },
  { header: "size", value: (backup: Backup) => backup.sizeBytes },
  { header: "created", value: (backup: Backup) => backup.createdAt },
  { header: "expires", value: (backup: Backup) => backup.expiresAt },
];

/** `backups list <p> | create <p> [--wait] | restore <p> <backupId>`. */
export function backupCommands(program: Program): void {
  const backups = program.command("backups").description("a project's snapshots, and restoring one");
  backups
    .command("list")
    .description("a project's backups, newest first")
    .argument("<project>", "the project's slug")
    .action(async (project, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      const answer = await cli.call(client.GET("/org/{slug}/projects/{projectSlug}/backups", { params: { path } }));
      cli.out.answer(answer, () => cli.out.table(answer.backups, backupColumns, "No backups yet."));
    });
  backups
    .command("create")
    .description("take a manual backup (a job takes it; --wait until it is completed)")
    .argument("<project>", "the project's slug")
    .option("--wait", "return once it is completed (or exit 1 if it fails)")
    .action(async (project, options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      let answer = await cli.call(client.POST("/org/{slug}/projects/{projectSlug}/backups", { params: { path } }));
      if (options.wait) {
        const id = answer.backup.id;
        answer = await waitFor(
          () =>
            cli.call(
              client.GET("/org/{slug}/projects/{projectSlug}/backups/{id}", { params: { path: { ...path, id } } }),
            ),
          (read) => read.backup.status !== "pending",
        );
        if (answer.backup.status === "failed")
          throw new ApiError("FAILED", `backup ${id} failed: ${answer.backup.error}`);
      }
      cli.out.answer(answer, () => cli.out.table([answer.backup], backupColumns, ""));
    });
  backups
    .command("restore")
    .description("make the project's workspace that backup, atomically (its data since is gone)")
    .argument("<project>", "the project's slug")
    .argument("<backupId>", "bkp_…")
    .action(async (project, backupId, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const path = await projectPath(cli, project);
      await cli.confirm(`This restores ${project} to backup ${backupId}: what changed since is undone`);
      const answer = await cli.call(
        client.POST("/org/{slug}/projects/{projectSlug}/backups/{id}/restore", {
          params: { path: { ...path, id: backupId } },
        }),
      );
      cli.out.answer(answer, () => cli.out.table([answer.backup], backupColumns, ""));
      if (!cli.out.json) cli.out.message(`Restored ${project} to ${backupId}.`);
    });
}

/** `restore <p> --to <time>`: point-in-time restore. */
export function restoreCommand(program: Program): void {
  program
    .command("restore")
    .description("rewind a project's workspace to an instant of its restore window (point in time)")
    .argument("<project>", "the project's slug")
    .requiredOption("--to <time>", "ISO-8601, Unix ms, or relative to now: -10m, -2h, -1d")
    .action(async (project, options, command) => {
      const cli = cliOf(command);
      const timestamp = parseInstant(options.to, "--to");
      const client = await cli.client();
      const path = await projectPath(cli, project);
      await cli.confirm(
        `This rewinds ${project} to ${new Date(timestamp).toISOString()}: what changed since is undone`,
      );
      const answer = await cli.call(
        client.POST("/org/{slug}/projects/{projectSlug}/restore", { params: { path }, body: { timestamp } }),
      );
      cli.out.answer(answer, () => cli.out.fields([["restored to", answer.restoredTo]]));
    });
}
