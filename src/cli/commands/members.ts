import type { Member } from "../../client/index.ts";
import { UsageError } from "../errors.ts";
import { cliOf, type Program } from "./shared.ts";

const ROLES = ["admin", "developer", "viewer"] as const;

const memberColumns = [
  { header: "id", value: (member: Member) => member.id },
  { header: "email", value: (member: Member) => member.email },
  { header: "name", value: (member: Member) => member.name },
  { header: "role", value: (member: Member) => member.role },
  { header: "status", value: (member: Member) => member.status },
];

/** `members list | invite <email> [--role] | remove <id>`. */
export function memberCommands(program: Program): void {
  const members = program.command("members").description("the org's members and invitations");
  members
    .command("list")
    .description("members, then pending invitations")
    .action(async (_options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const answer = await cli.call(client.GET("/org/{slug}/members", { params: { path: { slug: await cli.org() } } }));
      cli.out.answer(answer, () => cli.out.table(answer.members, memberColumns, "No members."));
    });
  members
    .command("invite")
    .description("invite someone by e-mail (the mail links to the console's accept page)")
    .argument("<email>")
    .option("--role <role>", "admin, developer or viewer", "viewer")
    .action(async (email, options, command) => {
      const cli = cliOf(command);
      const role = options.role as (typeof ROLES)[number];
      if (!ROLES.includes(role)) throw new UsageError(`--role must be one of ${ROLES.join(", ")}`);
      const client = await cli.client();
      const answer = await cli.call(
        client.POST("/org/{slug}/invitations", { params: { path: { slug: await cli.org() } }, body: { email, role } }),
      );
      cli.out.answer(answer, () =>
        cli.out.fields(Object.entries(answer.invite as Record<string, unknown>).map(([key, value]) => [key, value])),
      );
    });
  members
    .command("remove")
    .description("remove a member, or revoke an invitation (inv_…)")
    .argument("<id>", "mem_… or inv_…")
    .action(async (id, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const slug = await cli.org();
      await cli.confirm(`This removes ${id} from ${slug}`);
      await cli.call(client.DELETE("/org/{slug}/members/{id}", { params: { path: { slug, id } } }));
      cli.out.answer({ ok: true }, () => null);
      cli.out.message(`Removed ${id}.`);
    });
}
