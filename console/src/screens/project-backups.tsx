import { useState } from "preact/hooks";
import { api, data } from "../api.ts";
import { ProjectLayout } from "../components/layout.tsx";
import { Badge, Button, ConfirmButton, Field, Loading, Page, ProblemNote, Table, When } from "../components/ui.tsx";
import { useAction, useInterval, useLoad } from "../hooks.ts";
import { useProjectPath } from "./project-overview.tsx";

/** `datetime-local` text for an instant, in the browser's time zone. */
function localInput(at: Date): string {
  const shifted = new Date(at.getTime() - at.getTimezoneOffset() * 60_000);
  return shifted.toISOString().slice(0, 19);
}

/** `/orgs/:slug/projects/:project/backups`: backups (create, restore, delete) and point-in-time restore. */
export function Backups() {
  const { slug, project, path } = useProjectPath();
  const backups = useLoad(
    () => data(api.GET("/org/{slug}/projects/{projectSlug}/backups", { params: { path } })),
    [slug, project],
  );
  useInterval(backups.reload, 1500, backups.value?.backups.some((backup) => backup.status === "pending") ?? false);
  const restoreWindow = useLoad(
    () => data(api.GET("/org/{slug}/projects/{projectSlug}/restore-window", { params: { path } })),
    [slug, project],
  );
  const action = useAction();
  const pitr = useAction();
  const [instant, setInstant] = useState("");
  const [notice, setNotice] = useState<string | null>(null);
  return (
    <ProjectLayout slug={slug} project={project}>
      <Page
        title="Backups"
        actions={
          <Button
            variant="primary"
            busy={action.busy}
            onClick={() =>
              action.run(async () => {
                await data(api.POST("/org/{slug}/projects/{projectSlug}/backups", { params: { path } }));
                backups.reload();
              })
            }
          >
            Create backup
          </Button>
        }
      >
        {notice ? <p role="status">{notice}</p> : null}
        <ProblemNote problem={action.problem} />
        <Loading loaded={backups}>
          {({ backups: list }) => (
            <Table
              label="Backups"
              rows={list}
              empty="No backups yet. Automatic ones are taken daily; take one now with Create backup."
              columns={[
                { header: "Taken", cell: (backup) => <When at={backup.createdAt} /> },
                { header: "Kind", cell: (backup) => backup.kind },
                { header: "Status", cell: (backup) => <Badge status={backup.status} /> },
                {
                  header: "Size",
                  cell: (backup) => (backup.sizeBytes === null ? "" : `${Math.ceil(backup.sizeBytes / 1024)} KB`),
                },
                { header: "Expires", cell: (backup) => <When at={backup.expiresAt} /> },
                {
                  header: "Actions",
                  cell: (backup) => (
                    <span class="actions">
                      {backup.status === "completed" ? (
                        <ConfirmButton
                          label="Restore"
                          variant="primary"
                          question={`Restore the project to this backup of ${new Date(backup.createdAt).toLocaleString()}? Its data since is undone (a restore can itself be undone by a point-in-time restore).`}
                          onConfirm={() =>
                            action.run(async () => {
                              await data(
                                api.POST("/org/{slug}/projects/{projectSlug}/backups/{id}/restore", {
                                  params: { path: { ...path, id: backup.id } },
                                }),
                              );
                              setNotice("Restored: the workspace is that backup now.");
                              backups.reload();
                            })
                          }
                        />
                      ) : null}
                      <ConfirmButton
                        label="Delete"
                        question="Delete this backup?"
                        onConfirm={() =>
                          action.run(async () => {
                            await data(
                              api.DELETE("/org/{slug}/projects/{projectSlug}/backups/{id}", {
                                params: { path: { ...path, id: backup.id } },
                              }),
                            );
                            backups.reload();
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
        <section class="card" aria-labelledby="pitr">
          <h2 id="pitr">Point-in-time restore</h2>
          <Loading loaded={restoreWindow}>
            {(range) => (
              <form
                class="form"
                aria-label="Point-in-time restore"
                onSubmit={async (event) => {
                  event.preventDefault();
                  const timestamp = new Date(instant).getTime();
                  const done = await pitr.run(async () => {
                    const answer = await data(
                      api.POST("/org/{slug}/projects/{projectSlug}/restore", { params: { path }, body: { timestamp } }),
                    );
                    setNotice(`Restored to ${new Date(answer.restoredTo).toLocaleString()}.`);
                  });
                  if (done) restoreWindow.reload();
                }}
              >
                <p class="muted">
                  Any instant from <When at={range.earliest} /> to now (<When at={range.latest} />
                  ): the workspace becomes exactly what was committed then.
                </p>
                <ProblemNote problem={pitr.problem} />
                <Field
                  label="Restore to"
                  name="timestamp"
                  type="datetime-local"
                  step={1}
                  required
                  min={localInput(new Date(range.earliest))}
                  max={localInput(new Date(range.latest))}
                  value={instant}
                  problem={pitr.problem}
                  onInput={(event) => setInstant(event.currentTarget.value)}
                />
                <Button type="submit" variant="danger" busy={pitr.busy}>
                  Restore to this instant
                </Button>
              </form>
            )}
          </Loading>
        </section>
      </Page>
    </ProjectLayout>
  );
}
