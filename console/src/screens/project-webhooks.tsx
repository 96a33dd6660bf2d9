import { useState } from "preact/hooks";
import type { WorkspaceWebhook } from "../../../src/client/index.ts";
import { api, data, workspaceApi } from "../api.ts";
import { ProjectLayout } from "../components/layout.tsx";
import { Badge, Button, ConfirmButton, Field, Loading, Page, ProblemNote, Table, When } from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";
import { useProjectPath } from "./project-overview.tsx";

/** `Name: value` lines as a header map; null for none. */
function headersOf(text: string): Record<string, string> | null {
  const entries = text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const colon = line.indexOf(":");
      return colon < 0 ? [line, ""] : [line.slice(0, colon).trim(), line.slice(colon + 1).trim()];
    });
  return entries.length > 0 ? Object.fromEntries(entries) : null;
}

const linesOf = (headers: Record<string, string>) =>
  Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}`)
    .join("\n");

const fieldsOf = (text: string) => {
  const fields = text
    .split(",")
    .map((field) => field.trim())
    .filter(Boolean);
  return fields.length > 0 ? fields : null;
};

function Lines({
  label,
  name,
  value,
  hint,
  onInput,
}: {
  label: string;
  name: string;
  value: string;
  hint: string;
  onInput(text: string): void;
}) {
  return (
    <div class="field">
      <label for={`lines-${name}`}>{label}</label>
      <textarea
        id={`lines-${name}`}
        rows={2}
        aria-describedby={`lines-${name}-note`}
        value={value}
        onInput={(event) => onInput(event.currentTarget.value)}
      />
      <div id={`lines-${name}-note`} class="hint">
        {hint}
      </div>
    </div>
  );
}

/** `/orgs/:slug/projects/:project/webhooks`: the workspace's webhooks, their deliveries, retries. */
export function WorkspaceWebhooks() {
  const { slug, project, path } = useProjectPath();
  const info = useLoad(
    () => data(api.GET("/org/{slug}/projects/{projectSlug}", { params: { path } })),
    [slug, project],
  );
  return (
    <ProjectLayout slug={slug} project={project}>
      <Page title="Workspace webhooks">
        <Loading loaded={info}>
          {({ project: current }) =>
            current.status === "active" ? (
              <Hooks projectId={current.id} />
            ) : (
              <p class="empty">
                The workspace serves its webhooks once the project is active (it is {current.status}).
              </p>
            )
          }
        </Loading>
      </Page>
    </ProjectLayout>
  );
}

function Hooks({ projectId }: { projectId: string }) {
  const workspace = workspaceApi(projectId);
  const hooks = useLoad(() => data(workspace.GET("/webhooks")), [projectId]);
  const create = useAction();
  const action = useAction();
  const [name, setName] = useState("");
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState("items");
  const [secret, setSecret] = useState("");
  const [headers, setHeaders] = useState("");
  const [payloadFields, setPayloadFields] = useState("");
  const [open, setOpen] = useState<WorkspaceWebhook | null>(null);
  const [editing, setEditing] = useState<{
    id: string;
    name: string;
    url: string;
    events: string;
    headers: string;
    payloadFields: string;
    secret: string;
    dropSecret: boolean;
  } | null>(null);
  return (
    <>
      <form
        class="form card"
        aria-label="Create a workspace webhook"
        onSubmit={async (event) => {
          event.preventDefault();
          const done = await create.run(() =>
            data(
              workspace.POST("/webhooks", {
                body: {
                  name,
                  url,
                  events: events
                    .split(",")
                    .map((pattern) => pattern.trim())
                    .filter(Boolean),
                  ...(secret ? { secret } : {}),
                  headers: headersOf(headers),
                  payloadFields: fieldsOf(payloadFields),
                },
              }),
            ),
          );
          if (done) {
            setName("");
            setUrl("");
            setSecret("");
            setHeaders("");
            setPayloadFields("");
            hooks.reload();
          }
        }}
      >
        <ProblemNote problem={create.problem} />
        <Field
          label="Name"
          name="name"
          required
          value={name}
          problem={create.problem}
          onInput={(event) => setName(event.currentTarget.value)}
        />
        <Field
          label="Receiver URL"
          name="url"
          type="url"
          required
          value={url}
          problem={create.problem}
          onInput={(event) => setUrl(event.currentTarget.value)}
        />
        <Field
          label="Events"
          name="events"
          required
          hint="Channels and events: items, items:posts:created, auth, files"
          value={events}
          problem={create.problem}
          onInput={(event) => setEvents(event.currentTarget.value)}
        />
        <Field
          label="Signing secret"
          name="secret"
          type="password"
          hint="Optional: with one, every delivery is signed"
          value={secret}
          problem={create.problem}
          onInput={(event) => setSecret(event.currentTarget.value)}
        />
        <Lines
          label="Custom headers"
          name="headers"
          hint="One Name: value per line, sent with every delivery (values are masked when read)"
          value={headers}
          onInput={setHeaders}
        />
        <Field
          label="Payload fields"
          name="payloadFields"
          hint="Comma-separated top-level keys of data to send; empty: all"
          value={payloadFields}
          problem={create.problem}
          onInput={(event) => setPayloadFields(event.currentTarget.value)}
        />
        <Button type="submit" variant="primary" busy={create.busy}>
          Create webhook
        </Button>
      </form>
      <ProblemNote problem={action.problem} />
      {editing ? (
        <form
          class="form inline card"
          aria-label="Edit a workspace webhook"
          onSubmit={async (event) => {
            event.preventDefault();
            const done = await action.run(() =>
              data(
                workspace.PATCH("/webhooks/{id}", {
                  params: { path: { id: editing.id } },
                  body: {
                    name: editing.name,
                    url: editing.url,
                    events: editing.events
                      .split(",")
                      .map((pattern) => pattern.trim())
                      .filter(Boolean),
                    // Masked values sent back as read keep the stored ones (a new url needs them all again).
                    headers: headersOf(editing.headers),
                    payloadFields: fieldsOf(editing.payloadFields),
                    ...(editing.dropSecret ? { secret: null } : editing.secret ? { secret: editing.secret } : {}),
                  },
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
            label="New name"
            name="name"
            required
            value={editing.name}
            problem={action.problem}
            onInput={(event) => setEditing({ ...editing, name: event.currentTarget.value })}
          />
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
          <Lines
            label="New custom headers"
            name="edit-headers"
            hint="One Name: value per line; a masked value kept as read keeps the stored one"
            value={editing.headers}
            onInput={(text) => setEditing({ ...editing, headers: text })}
          />
          <Field
            label="New payload fields"
            name="payloadFields"
            value={editing.payloadFields}
            problem={action.problem}
            onInput={(event) => setEditing({ ...editing, payloadFields: event.currentTarget.value })}
          />
          <Field
            label="New signing secret"
            name="secret"
            type="password"
            hint="Empty: unchanged"
            value={editing.secret}
            problem={action.problem}
            onInput={(event) => setEditing({ ...editing, secret: event.currentTarget.value })}
          />
          <div class="field checkbox">
            <input
              id="drop-secret"
              type="checkbox"
              checked={editing.dropSecret}
              onChange={(event) => setEditing({ ...editing, dropSecret: event.currentTarget.checked })}
            />
            <label for="drop-secret">Send unsigned (remove the secret)</label>
          </div>
          <Button type="submit" variant="primary" busy={action.busy}>
            Save webhook
          </Button>
          <Button onClick={() => setEditing(null)}>Cancel</Button>
        </form>
      ) : null}
      <Loading loaded={hooks}>
        {({ webhooks }) => (
          <Table
            label="Workspace webhooks"
            rows={webhooks}
            empty="No workspace webhooks: changes go nowhere yet."
            columns={[
              { header: "Name", cell: (hook) => hook.name },
              { header: "Receiver", cell: (hook) => <code>{hook.url}</code> },
              { header: "Events", cell: (hook) => hook.events.join(", ") },
              { header: "Signed", cell: (hook) => (hook.hasSecret ? "yes" : "no") },
              { header: "State", cell: (hook) => <Badge status={hook.active ? "active" : "paused"} /> },
              {
                header: "Actions",
                cell: (hook) => (
                  <span class="actions">
                    <Button
                      onClick={() =>
                        setEditing({
                          id: hook.id,
                          name: hook.name,
                          url: hook.url,
                          events: hook.events.join(", "),
                          headers: linesOf(hook.headers),
                          payloadFields: hook.payloadFields?.join(", ") ?? "",
                          secret: "",
                          dropSecret: false,
                        })
                      }
                    >
                      Edit
                    </Button>
                    <Button onClick={() => setOpen(hook)}>Deliveries</Button>
                    <Button
                      onClick={() =>
                        action.run(async () => {
                          await data(workspace.POST("/webhooks/{id}/test", { params: { path: { id: hook.id } } }));
                          setOpen({ ...hook });
                        })
                      }
                    >
                      Send test
                    </Button>
                    <ConfirmButton
                      label="Delete"
                      question={`Delete the webhook ${hook.name}? Its delivery history goes with it.`}
                      onConfirm={() =>
                        action.run(async () => {
                          await data(workspace.DELETE("/webhooks/{id}", { params: { path: { id: hook.id } } }));
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
      {open ? <Deliveries projectId={projectId} hook={open} /> : null}
    </>
  );
}

function Deliveries({ projectId, hook }: { projectId: string; hook: WorkspaceWebhook }) {
  const workspace = workspaceApi(projectId);
  const deliveries = useLoad(
    () => data(workspace.GET("/webhooks/{id}/deliveries", { params: { path: { id: hook.id } } })),
    [projectId, hook],
  );
  const retry = useAction();
  return (
    <section class="card" aria-labelledby="deliveries">
      <h2 id="deliveries">Deliveries of {hook.name}</h2>
      <div class="actions">
        <Button onClick={deliveries.reload}>Refresh</Button>
      </div>
      <ProblemNote problem={retry.problem} />
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
                header: "Response",
                cell: (delivery) => {
                  const last = delivery.attempts.at(-1);
                  if (!last) return "";
                  return (
                    last.error ??
                    `HTTP ${last.statusCode}${last.responseBody ? `: ${last.responseBody.slice(0, 80)}` : ""}`
                  );
                },
              },
              {
                header: "Actions",
                cell: (delivery) => (
                  <Button
                    onClick={() =>
                      retry.run(async () => {
                        await data(
                          workspace.POST("/webhooks/_deliveries/{id}/retry", { params: { path: { id: delivery.id } } }),
                        );
                        deliveries.reload();
                      })
                    }
                  >
                    Retry
                  </Button>
                ),
              },
            ]}
          />
        )}
      </Loading>
    </section>
  );
}
