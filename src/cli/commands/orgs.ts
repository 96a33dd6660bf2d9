import type { Org } from "../../client/index.ts";
import type { Output } from "../output.ts";
import { cliOf, type Program } from "./shared.ts";

function orgFields(out: Output, org: Org & { role?: string }) {
  return out.fields([
    ["slug", org.slug],
    ["name", org.name],
    ["id", org.id],
    ["plan", org.planId],
    ["residency", org.residency],
    ["region", org.defaultRegion],
    ["status", org.status],
    ...(org.role ? [["role", org.role] as [string, unknown]] : []),
  ]);
}

/** `orgs list | get [slug] | create <name>`. */
export function orgCommands(program: Program): void {
  const orgs = program.command("orgs").description("the orgs the key (or account) belongs to");
  orgs
    .command("list")
    .description("every org, with the caller's role")
    .action(async (_options, command) => {
      const cli = cliOf(command);
      const answer = await cli.call((await cli.client()).GET("/orgs"));
      cli.out.answer(answer, () =>
        cli.out.table(
          answer.orgs,
          [
            { header: "slug", value: (org) => org.slug },
            { header: "name", value: (org) => org.name },
            { header: "role", value: (org) => org.role },
            { header: "plan", value: (org) => org.planId },
            { header: "region", value: (org) => org.defaultRegion },
          ],
          "No orgs.",
        ),
      );
    });
  orgs
    .command("get")
    .description("one org with the caller's role (the current one without a slug)")
    .argument("[slug]")
    .action(async (slug, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const answer = await cli.call(
        client.GET("/org/{slug}/overview", { params: { path: { slug: slug ?? (await cli.org()) } } }),
      );
      cli.out.answer(answer, () => orgFields(cli.out, { ...answer.org, role: answer.role }));
    });
  orgs
    .command("create")
    .description("a new org, with the caller as its owner (a signed-in account; API keys cannot)")
    .argument("<name>")
    .option("--region <region>", "its default region (ist, fra, ams, lhr, sjc, iad, sin, syd)")
    .action(async (name, options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const answer = await cli.call(
        client.POST("/org", {
          body: { name, ...(options.region ? { defaultRegion: options.region as never } : {}) },
        }),
      );
      cli.out.answer(answer, () => orgFields(cli.out, answer.org));
    });
}
