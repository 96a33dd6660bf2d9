import { useState } from "preact/hooks";
import type { WorkspaceItem } from "../../../src/client/index.ts";
import { ApiProblem, api, data, type Problem, problemOf, workspaceApi } from "../api.ts";
import { ProjectLayout } from "../components/layout.tsx";
import { Button, ConfirmButton, Field, Loading, Page, ProblemNote, Table, When } from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";
import { useProjectPath } from "./project-overview.tsx";

const PAGE = 25;

/** JSON a person typed, as an object, or a problem naming the field. */
function parseObject(text: string, field: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // Said below, with the field named.
  }
  throw new ApiProblem({
    code: "VALIDATION",
    message: 'Write a JSON object, such as {"title": "Hello"}',
    fields: { [field]: "must be a JSON object" },
  });
}

/** An item's own data, without what the server keeps (id, createdAt, updatedAt), as editable JSON. */
function ownData(item: WorkspaceItem): string {
  const { id: _id, createdAt: _created, updatedAt: _updated, ...rest } = item;
  return JSON.stringify(rest, null, 2);
}

/** `/orgs/:slug/projects/:project/data`: the workspace's collections and items, and its files. */
export function ProjectData() {
  const { slug, project, path } = useProjectPath();
  const info = useLoad(
    () => data(api.GET("/org/{slug}/projects/{projectSlug}", { params: { path } })),
    [slug, project],
  );
  return (
    <ProjectLayout slug={slug} project={project}>
      <Page title="Data">
        <Loading loaded={info}>
          {({ project: current }) =>
            current.status === "active" ? (
              <>
                <Collections projectId={current.id} />
                <Users projectId={current.id} />
                <Files projectId={current.id} />
              </>
            ) : (
              <p class="empty">The workspace serves data once the project is active (it is {current.status}).</p>
            )
          }
        </Loading>
      </Page>
    </ProjectLayout>
  );
}

function Collections({ projectId }: { projectId: string }) {
  const workspace = workspaceApi(projectId);
  const collections = useLoad(() => data(workspace.GET("/collections")), [projectId]);
  const [chosen, setChosen] = useState<string | null>(null);
  const create = useAction();
  const [slug, setSlug] = useState("");
  return (
    <section class="card" aria-labelledby="collections">
      <h2 id="collections">Collections</h2>
      <form
        class="form inline"
        aria-label="Create a collection"
        onSubmit={async (event) => {
          event.preventDefault();
          const done = await create.run(() => data(workspace.POST("/collections", { body: { slug } })));
          if (done) {
            setChosen(slug);
            setSlug("");
            collections.reload();
          }
        }}
      >
        <ProblemNote problem={create.problem} />
        <Field
          label="Collection slug"
          name="slug"
          required
          placeholder="posts"
          value={slug}
          problem={create.problem}
          onInput={(event) => setSlug(event.currentTarget.value)}
        />
        <Button type="submit" variant="primary" busy={create.busy}>
          Create collection
        </Button>
      </form>
      <Loading loaded={collections}>
        {({ collections: list }) =>
          list.length === 0 ? (
            <p class="empty">No collections yet: create one, then add items to it.</p>
          ) : (
            <fieldset class="chips">
              <legend class="visually-hidden">Collections</legend>
              {list.map((collection) => (
                <Button
                  key={collection.slug}
                  variant={chosen === collection.slug ? "primary" : "plain"}
                  aria-pressed={chosen === collection.slug}
                  onClick={() => setChosen(collection.slug)}
                >
                  {collection.name}
                </Button>
              ))}
            </fieldset>
          )
        }
      </Loading>
      {chosen ? <Items key={chosen} projectId={projectId} collection={chosen} /> : null}
    </section>
  );
}

function Items({ projectId, collection }: { projectId: string; collection: string }) {
  const workspace = workspaceApi(projectId);
  const [offset, setOffset] = useState(0);
  const items = useLoad(
    () =>
      data(workspace.GET("/items/{collection}", { params: { path: { collection }, query: { limit: PAGE, offset } } })),
    [projectId, collection, offset],
  );
  const create = useAction();
  const action = useAction();
  const [draft, setDraft] = useState('{\n  "title": "Hello"\n}');
  const [editing, setEditing] = useState<{ id: string; text: string } | null>(null);
  const item = (id: string) => ({ path: { collection, id } });
  return (
    <div class="items">
      <h3>Items in {collection}</h3>
      <form
        class="form"
        aria-label="Add an item"
        onSubmit={async (event) => {
          event.preventDefault();
          const done = await create.run(() =>
            data(
              workspace.POST("/items/{collection}", {
                params: { path: { collection } },
                body: parseObject(draft, "item"),
              }),
            ),
          );
          if (done) items.reload();
        }}
      >
        <ProblemNote problem={create.problem} />
        <JsonField label="New item (JSON)" name="item" value={draft} problem={create.problem} onInput={setDraft} />
        <Button type="submit" variant="primary" busy={create.busy}>
          Add item
        </Button>
      </form>
      <ProblemNote problem={action.problem} />
      {editing ? (
        <form
          class="form card"
          aria-label="Edit an item"
          onSubmit={async (event) => {
            event.preventDefault();
            const done = await action.run(() =>
              data(
                workspace.PATCH("/items/{collection}/{id}", {
                  params: item(editing.id),
                  body: parseObject(editing.text, "edit"),
                }),
              ),
            );
            if (done) {
              setEditing(null);
              items.reload();
            }
          }}
        >
          <JsonField
            label={`Item ${editing.id} (JSON)`}
            name="edit"
            value={editing.text}
            problem={action.problem}
            onInput={(text) => setEditing({ ...editing, text })}
          />
          <div class="actions">
            <Button type="submit" variant="primary" busy={action.busy}>
              Save
            </Button>
            <Button onClick={() => setEditing(null)}>Cancel</Button>
          </div>
        </form>
      ) : null}
      <Loading loaded={items}>
        {({ items: list }) => (
          <>
            <Table
              label={`Items in ${collection}`}
              rows={list}
              empty="No items in this collection yet."
              columns={[
                { header: "Id", cell: (row) => <code>{row.id}</code> },
                { header: "Data", cell: (row) => <code class="json">{ownData(row).replace(/\s+/g, " ")}</code> },
                { header: "Updated", cell: (row) => <When at={row.updatedAt} /> },
                {
                  header: "Actions",
                  cell: (row) => (
                    <span class="actions">
                      <Button onClick={() => setEditing({ id: row.id, text: ownData(row) })}>Edit</Button>
                      <ConfirmButton
                        label="Delete"
                        question={`Delete item ${row.id}?`}
                        onConfirm={() =>
                          action.run(async () => {
                            await data(workspace.DELETE("/items/{collection}/{id}", { params: item(row.id) }));
                            items.reload();
                          })
                        }
                      />
                    </span>
                  ),
                },
              ]}
            />
            <div class="actions pager">
              <Button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
                Previous
              </Button>
              <Button disabled={list.length < PAGE} onClick={() => setOffset(offset + PAGE)}>
                Next
              </Button>
            </div>
          </>
        )}
      </Loading>
    </div>
  );
}

function JsonField({
  label,
  name,
  value,
  problem,
  onInput,
}: {
  label: string;
  name: string;
  value: string;
  problem: Problem | undefined;
  onInput(text: string): void;
}) {
  const id = `json-${name}`;
  const error = problem?.fields[name];
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <textarea
        id={id}
        rows={5}
        spellcheck={false}
        aria-invalid={error ? true : undefined}
        value={value}
        onInput={(event) => onInput(event.currentTarget.value)}
      />
      {error ? <div class="field-error">{error}</div> : null}
    </div>
  );
}

/** Uploads a file with its progress (fetch cannot report an upload's), as the session's admin. */
function upload(projectId: string, file: File, onProgress: (pct: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", `/w/${projectId}/api/files`);
    request.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(Math.round((event.loaded / event.total) * 100));
    };
    request.onload = () => {
      if (request.status >= 200 && request.status < 300) return resolve();
      let envelope: unknown;
      try {
        envelope = JSON.parse(request.responseText);
      } catch {
        envelope = undefined;
      }
      reject(new ApiProblem(problemOf(envelope, new Response(null, { status: request.status }))));
    };
    request.onerror = () =>
      reject(new ApiProblem({ code: "NETWORK", message: "The upload failed: no answer", fields: {} }));
    const form = new FormData();
    form.append("file", file);
    request.send(form);
  });
}

function Files({ projectId }: { projectId: string }) {
  const workspace = workspaceApi(projectId);
  const files = useLoad(() => data(workspace.GET("/files")), [projectId]);
  const action = useAction();
  const [progress, setProgress] = useState<number | null>(null);
  return (
    <section class="card" aria-labelledby="files">
      <h2 id="files">Files</h2>
      <div class="field">
        <label for="file-upload">Upload a file</label>
        <input
          id="file-upload"
          type="file"
          onChange={async (event) => {
            const file = event.currentTarget.files?.[0];
            if (!file) return;
            const input = event.currentTarget;
            await action.run(() => upload(projectId, file, setProgress));
            setProgress(null);
            input.value = "";
            files.reload();
          }}
        />
        {progress !== null ? <progress max={100} value={progress} aria-label="Upload progress" /> : null}
      </div>
      <ProblemNote problem={action.problem} />
      <Loading loaded={files}>
        {({ files: list }) => (
          <Table
            label="Files"
            rows={list}
            empty="No files yet."
            columns={[
              {
                header: "Name",
                cell: (file) => (
                  <a href={`/w/${projectId}/api/files/${file.id}`} download={file.name}>
                    {file.name}
                  </a>
                ),
              },
              { header: "Type", cell: (file) => file.contentType },
              { header: "Size", cell: (file) => `${Math.ceil(file.size / 1024)} KB` },
              { header: "Uploaded", cell: (file) => <When at={file.createdAt} /> },
              {
                header: "Actions",
                cell: (file) => (
                  <ConfirmButton
                    label="Delete"
                    question={`Delete ${file.name}?`}
                    onConfirm={() =>
                      action.run(async () => {
                        await data(workspace.DELETE("/files/{id}", { params: { path: { id: file.id } } }));
                        files.reload();
                      })
                    }
                  />
                ),
              },
            ]}
          />
        )}
      </Loading>
    </section>
  );
}

function Users({ projectId }: { projectId: string }) {
  const workspace = workspaceApi(projectId);
  const [offset, setOffset] = useState(0);
  const users = useLoad(
    () => data(workspace.GET("/users", { params: { query: { limit: PAGE, offset } } })),
    [projectId, offset],
  );
  const action = useAction();
  return (
    <section class="card" aria-labelledby="users">
      <h2 id="users">Users</h2>
      <p class="muted">The people who signed up to this project's workspace (its own users, not the organization's).</p>
      <ProblemNote problem={action.problem} />
      <Loading loaded={users}>
        {({ users: list }) => (
          <>
            <Table
              label="Workspace users"
              rows={list}
              empty="No users have signed up yet."
              columns={[
                { header: "Email", cell: (user) => user.email },
                { header: "Signed up", cell: (user) => <When at={user.createdAt} /> },
                {
                  header: "Actions",
                  cell: (user) => (
                    <ConfirmButton
                      label="Delete"
                      question={`Delete ${user.email}? Their sessions end at once.`}
                      onConfirm={() =>
                        action.run(async () => {
                          await data(workspace.DELETE("/users/{id}", { params: { path: { id: user.id } } }));
                          users.reload();
                        })
                      }
                    />
                  ),
                },
              ]}
            />
            <div class="actions pager">
              <Button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
                Previous users
              </Button>
              <Button disabled={list.length < PAGE} onClick={() => setOffset(offset + PAGE)}>
                Next users
              </Button>
            </div>
          </>
        )}
      </Loading>
    </section>
  );
}
