import type { Webhook, WebhookDelivery } from "../../client/index.ts";
import { cliOf, type Program } from "./shared.ts";

const webhookColumns = [
  { header: "id", value: (hook: Webhook) => hook.id },
  { header: "url", value: (hook: Webhook) => hook.url },
  { header: "events", value: (hook: Webhook) => hook.events },
  { header: "active", value: (hook: Webhook) => hook.active },
];

const deliveryColumns = [
  { header: "id", value: (delivery: WebhookDelivery) => delivery.id },
  { header: "event", value: (delivery: WebhookDelivery) => delivery.event },
  { header: "status", value: (delivery: WebhookDelivery) => delivery.status },
  { header: "attempts", value: (delivery: WebhookDelivery) => delivery.attemptCount },
  { header: "last", value: (delivery: WebhookDelivery) => delivery.lastStatusCode ?? delivery.lastError },
  { header: "created", value: (delivery: WebhookDelivery) => delivery.createdAt },
];

/** `webhooks list | create <url> [--events] | delete <id> | deliveries <id> | test <id>`. */
export function webhookCommands(program: Program): void {
  const webhooks = program.command("webhooks").description("the org's webhooks: signed events to your receivers");
  webhooks
    .command("list")
    .description("the org's webhooks")
    .action(async (_options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const answer = await cli.call(
        client.GET("/org/{slug}/webhooks", { params: { path: { slug: await cli.org() } } }),
      );
      cli.out.answer(answer, () => cli.out.table(answer.webhooks, webhookColumns, "No webhooks."));
    });
  webhooks
    .command("create")
    .description("a new webhook: its signing secret is shown once")
    .argument("<url>")
    .option("--events <patterns>", "comma-separated: project.provisioned, project.*, *", "*")
    .action(async (url, options, command) => {
      const cli = cliOf(command);
      const events = options.events.split(",").map((event) => event.trim());
      const client = await cli.client();
      const answer = await cli.call(
        client.POST("/org/{slug}/webhooks", { params: { path: { slug: await cli.org() } }, body: { url, events } }),
      );
      cli.out.answer(answer, () =>
        [cli.out.table([answer.webhook], webhookColumns, "") ?? "", cli.out.fields([["secret", answer.secret]])].join(
          "\n",
        ),
      );
      if (!cli.out.json) cli.out.message("The signing secret is shown once: keep it now.");
    });
  webhooks
    .command("delete")
    .description("delete a webhook")
    .argument("<id>", "whk_…")
    .action(async (id, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const slug = await cli.org();
      await cli.confirm(`This deletes webhook ${id}`);
      await cli.call(client.DELETE("/org/{slug}/webhooks/{id}", { params: { path: { slug, id } } }));
      cli.out.answer({ ok: true }, () => null);
      cli.out.message(`Deleted ${id}.`);
    });
  webhooks
    .command("deliveries")
    .description("a webhook's deliveries, newest first")
    .argument("<id>", "whk_…")
    .action(async (id, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const answer = await cli.call(
        client.GET("/org/{slug}/webhooks/{id}/deliveries", { params: { path: { slug: await cli.org(), id } } }),
      );
      cli.out.answer(answer, () => cli.out.table(answer.deliveries, deliveryColumns, "No deliveries yet."));
    });
  webhooks
    .command("test")
    .description("send a webhook.test event now, and show how it went")
    .argument("<id>", "whk_…")
    .action(async (id, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const answer = await cli.call(client.POST("/webhooks/{id}/test", { params: { path: { id } } }));
      cli.out.answer(answer, () => cli.out.table([answer.delivery], deliveryColumns, ""));
    });
}
