import { useState } from "preact/hooks";
import { useRoute } from "preact-iso";
import type { Integration, Webhook } from "../../../src/client/index.ts";
import { api, data } from "../api.ts";
import { OrgLayout } from "../components/layout.tsx";
import {
  Badge,
  Button,
  ConfirmButton,
  Field,
  Loading,
  Page,
  ProblemNote,
  Secret,
  Select,
  Table,
  When,
} from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";

/** The fields each integration's provider needs (DESIGN §6). */
const PROVIDERS = {
  slack: [["webhookUrl", "Slack webhook URL"]],
  discord: [["webhookUrl", "Discord webhook URL"]],
  datadog: [
    ["apiKey", "Datadog API key"],
    ["site", "Datadog site"],
  ],
  github: [
    ["repo", "Repository (owner/name)"],
    ["token", "GitHub token"],
  ],
} as const;
type Kind = keyof typeof PROVIDERS;

const patterns = (text: string) =>
  text
    .split(",")
    .map((event) => event.trim())
    .filter(Boolean);

/** `/orgs/:slug/webhooks`: org webhooks (their deliveries, test sends) and integrations. */
export function Webhooks() {
  const { slug } = useRoute().params as { slug: string };
  return (
    <OrgLayout slug={slug}>
      <Page title="Webhooks">
        <OrgWebhooks slug={slug} />
        <Integrations slug={slug} />
      </Page>
    </OrgLayout>
  );
}

function OrgWebhooks({ slug }: { slug: string }) {
  const hooks = useLoad(() => data(api.GET("/org/{slug}/webhooks", { params: { path: { slug } } })), [slug]);
  const create = useAction();
  const action = useAction();
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState("*");
  const [secret, setSecret] = useState<string | null>(null);
  const [open, setOpen] = useState<Webhook | null>(null);
  const [editing, setEditing] = useState<{ id: string; url: string; events: string } | null>(null);
  return (
    <section class="card" aria-labelledby="org-webhooks">
      <h2 id="org-webhooks">Webhooks</h2>
      <form
        class="form inline"
        aria-label="Create a webhook"
        onSubmit={async (event) => {
          event.preventDefault();
          await create.run(async () => {
            const answer = await data(
              api.POST("/org/{slug}/webhooks", { params: { path: { slug } }, body: { url, events: patterns(events) } }),
            );
            setSecret(answer.secret);
            setUrl("");
            hooks.reload();
          });
        }}
      >
        <ProblemNote problem={create.problem} />
        <Field
          label="Receiver URL"
          name="url"
          type="url"
          required
          placeholder="https://hooks.example.com/plinth"
          value={url}
          problem={create.problem}
          onInput={(event) => setUrl(event.currentTarget.value)}
        />
        <Field
          label="Events"
          name="events"
          required
          hint="project.*, alarm.fired, or * for all"
          value={events}
          problem={create.problem}
          onInput={(event) => setEvents(event.currentTarget.value)}
        />
        <Button type="submit" variant="primary" busy={create.busy}>
          Create webhook
        </Button>
      </form>
      {secret ? <Secret label="Webhook signing secret" value={secret} /> : null}
      <ProblemNote problem={action.problem} />
      {editing ? (
        <form
          class="form inline card"
          aria-label="Edit a webhook"
          onSubmit={async (event) => {
            event.preventDefault();
            const done = await action.run(() =>
              data(
                api.PATCH("/org/{slug}/webhooks/{id}", {
                  params: { path: { slug, id: editing.id } },
                  body: { url: editing.url, events: patterns(editing.events) },
                }),
              ),
            );
            if (done) {
              setEditing(null);
              hooks.reload();
            }
          }}
        >
          <Field
            label="New receiver URL"
            name="url"
            type="url"
            required
            value={editing.url}
            problem={action.problem}
            onInput={(event) => setEditing({ ...editing, url: event.currentTarget.value })}
          />
          <Field
            label="New events"
            name="events"
            required
            value={editing.events}
            problem={action.problem}
            onInput={(event) => setEditing({ ...editing, events: event.currentTarget.value })}
          />
          <Button type="submit" variant="primary" busy={action.busy}>
            Save webhook
          </Button>
          <Button onClick={() => setEditing(null)}>Cancel</Button>
        </form>
      ) : null}
      <Loading loaded={hooks}>
        {({ webhooks }) => (
          <Table
            label="Webhooks"
            rows={webhooks}
            empty="No webhooks: events go nowhere yet."
            columns={[
              { header: "Receiver", cell: (hook) => <code>{hook.url}</code> },
              { header: "Events", cell: (hook) => hook.events.join(", ") },
              {
                header: "State",
                cell: (hook) =>
                  hook.active ? (
                    <Badge status="active" />
                  ) : (
                    <span title={hook.disabledReason ?? ""}>
                      <Badge status="paused" />
                    </span>
                  ),
              },
              {
                header: "Actions",
                cell: (hook) => (
                  <span class="actions">
                    <Button onClick={() => setEditing({ id: hook.id, url: hook.url, events: hook.events.join(", ") })}>
                      Edit
                    </Button>
                    <Button onClick={() => setOpen(hook)}>Deliveries</Button>
                    <Button
                      onClick={() =>
                        action.run(async () => {
                          await data(api.POST("/webhooks/{id}/test", { params: { path: { id: hook.id } } }));
                          setOpen(hook);
                        })
                      }
                    >
                      Send test
                    </Button>
                    {hook.active ? null : (
                      <Button
                        onClick={() =>
                          action.run(async () => {
                            await data(
                              api.PATCH("/org/{slug}/webhooks/{id}", {
                                params: { path: { slug, id: hook.id } },
                                body: { active: true },
                              }),
                            );
                            hooks.reload();
                          })
                        }
                      >
                        Resume
                      </Button>
                    )}
                    <ConfirmButton
                      label="Delete"
                      question={`Delete the webhook to ${hook.url}?`}
                      onConfirm={() =>
                        action.run(async () => {
                          await data(
                            api.DELETE("/org/{slug}/webhooks/{id}", { params: { path: { slug, id: hook.id } } }),
                          );
                          if (open?.id === hook.id) setOpen(null);
                          hooks.reload();
                        })
                      }
                    />
                  </span>
                ),
              },
            ]}
          />
        )}
      </Loading>
      {open ? <Deliveries slug={slug} hook={open} /> : null}
    </section>
  );
}

function Deliveries({ slug, hook }: { slug: string; hook: Webhook }) {
  const deliveries = useLoad(
    () => data(api.GET("/org/{slug}/webhooks/{id}/deliveries", { params: { path: { slug, id: hook.id } } })),
    [slug, hook],
  );
  return (
    <div>
      <h3>Deliveries to {hook.url}</h3>
      <Button onClick={deliveries.reload}>Refresh</Button>
      <Loading loaded={deliveries}>
        {({ deliveries: list }) => (
          <Table
            label="Deliveries"
            rows={list}
            empty="No deliveries yet."
            columns={[
              { header: "When", cell: (delivery) => <When at={delivery.createdAt} /> },
              { header: "Event", cell: (delivery) => <code>{delivery.event}</code> },
              { header: "Status", cell: (delivery) => <Badge status={delivery.status} /> },
              { header: "Attempts", cell: (delivery) => delivery.attemptCount },
              {
                header: "Last response",
                cell: (delivery) =>
                  delivery.lastError ?? (delivery.lastStatusCode === null ? "" : `HTTP ${delivery.lastStatusCode}`),
              },
            ]}
          />
        )}
      </Loading>
    </div>
  );
}

function Integrations({ slug }: { slug: string }) {
  const integrations = useLoad(() => data(api.GET("/org/{slug}/integrations", { params: { path: { slug } } })), [slug]);
  const create = useAction();
  const action = useAction();
  const [kind, setKind] = useState<Kind>("slack");
  const [config, setConfig] = useState<Record<string, string>>({});
  const [events, setEvents] = useState("");
  const [tested, setTested] = useState<string | null>(null);
  const [editing, setEditing] = useState<{
    integration: Integration;
    config: Record<string, unknown>;
    events: string;
  } | null>(null);
  return (
    <section class="card" aria-labelledby="integrations">
      <h2 id="integrations">Integrations</h2>
      <form
        class="form"
        aria-label="Add an integration"
        onSubmit={async (event) => {
          event.preventDefault();
          const done = await create.run(() =>
            data(
              api.POST("/org/{slug}/integrations", {
                params: { path: { slug } },
                body: {
                  kind,
                  config: Object.fromEntries(Object.entries(config).filter(([, value]) => value.trim() !== "")),
                  events: events.trim() ? patterns(events) : null,
                },
              }),
            ),
          );
          if (done) {
            setConfig({});
            integrations.reload();
          }
        }}
      >
        <ProblemNote problem={create.problem} />
        <Select
          label="Service"
          name="kind"
          value={kind}
          problem={create.problem}
          options={Object.keys(PROVIDERS)}
          onChange={(event) => setKind(event.currentTarget.value as Kind)}
        />
        {PROVIDERS[kind].map(([key, label]) => (
          <Field
            key={`${kind}-${key}`}
            label={label}
            name={`config.${key}`}
            value={config[key] ?? ""}
            problem={create.problem}
            onInput={(event) => setConfig({ ...config, [key]: event.currentTarget.value })}
          />
        ))}
        <Field
          label="Integration events"
          name="events"
          hint="Empty: every event"
          value={events}
          problem={create.problem}
          onInput={(event) => setEvents(event.currentTarget.value)}
        />
        <Button type="submit" variant="primary" busy={create.busy}>
          Add integration
        </Button>
      </form>
      {tested ? <p role="status">{tested}</p> : null}
      <ProblemNote problem={action.problem} />
      {editing ? (
        <form
          class="form inline card"
          aria-label="Edit an integration"
          onSubmit={async (event) => {
            event.preventDefault();
            const done = await action.run(() =>
              data(
                api.PATCH("/org/{slug}/integrations/{id}", {
                  params: { path: { slug, id: editing.integration.id } },
                  // The config whole, as read: a secret sent back masked keeps the stored one.
                  body: { config: editing.config, events: editing.events.trim() ? patterns(editing.events) : null },
                }),
              ),
            );
            if (done) {
              setEditing(null);
              integrations.reload();
            }
          }}
        >
          {PROVIDERS[editing.integration.kind as Kind].map(([key, label]) => (
            <Field
              key={key}
              label={`New ${label.charAt(0).toLowerCase()}${label.slice(1)}`}
              name={`config.${key}`}
              value={String(editing.config[key] ?? "")}
              problem={action.problem}
              onInput={(event) =>
                setEditing({ ...editing, config: { ...editing.config, [key]: event.currentTarget.value } })
              }
            />
          ))}
          <Field
            label={`Events of ${editing.integration.kind}`}
            name="events"
            hint="Empty: every event"
            value={editing.events}
            problem={action.problem}
            onInput={(event) => setEditing({ ...editing, events: event.currentTarget.value })}
          />
          <Button type="submit" variant="primary" busy={action.busy}>
            Save integration
          </Button>
          <Button onClick={() => setEditing(null)}>Cancel</Button>
        </form>
      ) : null}
      <Loading loaded={integrations}>
        {({ integrations: list }) => (
          <Table
            label="Integrations"
            rows={list}
            empty="No integrations."
            columns={[
              { header: "Service", cell: (integration: Integration) => integration.kind },
              {
                header: "Configured",
                cell: (integration: Integration) => (integration.configured ? "yes" : "no: fields missing"),
              },
              { header: "Events", cell: (integration: Integration) => integration.events?.join(", ") ?? "all" },
              {
                header: "Actions",
                cell: (integration: Integration) => (
                  <span class="actions">
                    <Button
                      onClick={() =>
                        setEditing({
                          integration,
                          config: { ...integration.config },
                          events: integration.events?.join(", ") ?? "",
                        })
                      }
                    >
                      Edit
                    </Button>
                    <Button
                      onClick={() =>
                        action.run(async () => {
                          const answer = await data(
                            api.POST("/org/{slug}/integrations/{id}/test", {
                              params: { path: { slug, id: integration.id } },
                            }),
                          );
                          setTested(
                            `Test sent to ${integration.kind}: ${answer.delivery.status}${answer.delivery.lastError ? ` (${answer.delivery.lastError})` : ""}.`,
                          );
                        })
                      }
                    >
                      Send test
                    </Button>
                    <ConfirmButton
                      label="Delete"
                      question={`Delete the ${integration.kind} integration?`}
                      onConfirm={() =>
                        action.run(async () => {
                          await data(
                            api.DELETE("/org/{slug}/integrations/{id}", {
                              params: { path: { slug, id: integration.id } },
                            }),
                          );
                          integrations.reload();
                        })
                      }
                    />
                  </span>
                ),
              },
            ]}
          />
        )}
      </Loading>
    </section>
  );
}
