import { useState } from "preact/hooks";
import type { WorkspaceWebhook } from "../../../src/client/index.ts";
import { api, data, workspaceApi } from "../api.ts";
import { ProjectLayout } from "../components/layout.tsx";
import { Badge, Button, ConfirmButton, Field, Loading, Page, ProblemNote, Table, When } from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";
import { useProjectPath } from "./project-overview.tsx";

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
  const [open, setOpen] = useState<WorkspaceWebhook | null>(null);
  const [editing, setEditing] = useState<{ id: string; name: string; url: string; events: string } | null>(null);
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
                },
              }),
            ),
          );
          if (done) {
            setName("");
            setUrl("");
            setSecret("");
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
                        setEditing({ id: hook.id, name: hook.name, url: hook.url, events: hook.events.join(", ") })
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
