import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { ApiError } from "../errors.ts";
import { cliOf, type Program } from "./shared.ts";

/** `export [--dir]`: every project's workspace as plain SQL; `--dir` downloads the dumps. */
export function exportCommand(program: Program): void {
  program
    .command("export")
    .description("dump every project's workspace as plain SQL (admins); --dir downloads the dumps")
    .option("--dir <dir>", "download each dump into this directory")
    .option("--wait", "accepted for scripts: the dumps are written before the answer anyway")
    .action(async (options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const slug = await cli.org();
      const answer = await cli.call(client.POST("/org/{slug}/export", { params: { path: { slug } } }));
      if (options.dir) {
        await mkdir(options.dir, { recursive: true });
        for (const { filename } of answer.projects) {
          const dump = await cli.call(
            client.GET("/org/{slug}/exports/{filename}", { params: { path: { slug, filename } }, parseAs: "text" }),
          );
          if (typeof dump !== "string") throw new ApiError("BAD_ANSWER", `the dump ${filename} came back empty`);
          // The server names the files; only the base name is ever written, inside --dir.
          await writeFile(path.join(options.dir, path.basename(filename)), dump);
        }
        cli.out.message(`Wrote ${answer.projects.length} dump(s) to ${options.dir}`);
      }
      cli.out.answer(answer, () =>
        cli.out.table(
          answer.projects,
          [
            { header: "project", value: (project) => project.slug },
            { header: "file", value: (project) => project.filename },
          ],
          "No projects to export.",
        ),
      );
    });
}
