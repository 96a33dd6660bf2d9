import { useState } from "preact/hooks";
import { api, data } from "../api.ts";
import { ProjectLayout } from "../components/layout.tsx";
import {
  Badge,
  Button,
  ConfirmButton,
  Field,
  Loading,
  Page,
  ProblemNote,
  Secret,
  Table,
  When,
} from "../components/ui.tsx";
import { useAction, useInterval, useLoad } from "../hooks.ts";
import { useProjectPath } from "./project-overview.tsx";

/** `/orgs/:slug/projects/:project/branches`: copies of the project's data, from now or an instant. */
export function Branches() {
  const { slug, project, path } = useProjectPath();
  const branches = useLoad(
    () => data(api.GET("/org/{slug}/projects/{projectSlug}/branches", { params: { path } })),
    [slug, project],
  );
  useInterval(branches.reload, 1500, branches.value?.branches.some((branch) => branch.status === "creating") ?? false);
  const create = useAction();
  const action = useAction();
  const [name, setName] = useState("");
  const [pr, setPr] = useState("");
  const [at, setAt] = useState("");
  const [token, setToken] = useState<string | null>(null);
  return (
    <ProjectLayout slug={slug} project={project}>
      <Page title="Branches">
        <form
          class="form card"
          aria-label="Create a branch"
          onSubmit={async (event) => {
            event.preventDefault();
            await create.run(async () => {
              const answer = await data(
                api.POST("/org/{slug}/projects/{projectSlug}/branches", {
                  params: { path },
                  body: {
                    name,
                    ...(pr ? { prNumber: Number(pr) } : {}),
                    ...(at ? { at: new Date(at).getTime() } : {}),
                  },
                }),
              );
              setToken(answer.adminToken);
              setName("");
              branches.reload();
            });
          }}
        >
          <ProblemNote problem={create.problem} />
          <Field
            label="Name"
            name="name"
            required
            maxLength={63}
            value={name}
            problem={create.problem}
            onInput={(event) => setName(event.currentTarget.value)}
          />
          <Field
            label="Pull request"
            name="prNumber"
            type="number"
            min={1}
            value={pr}
            problem={create.problem}
            onInput={(event) => setPr(event.currentTarget.value)}
          />
          <Field
            label="From an instant"
            name="at"
            type="datetime-local"
            step={1}
            hint="Empty: from now"
            value={at}
            problem={create.problem}
            onInput={(event) => setAt(event.currentTarget.value)}
          />
          <Button type="submit" variant="primary" busy={create.busy}>
            Create branch
          </Button>
        </form>
        {token ? <Secret label="Branch admin token" value={token} /> : null}
        <ProblemNote problem={action.problem} />
        <Loading loaded={branches}>
          {({ branches: list }) => (
            <Table
              label="Branches"
              rows={list}
              empty="No branches."
              columns={[
                { header: "Name", cell: (branch) => branch.name },
                { header: "Status", cell: (branch) => <Badge status={branch.status} /> },
                { header: "Pull request", cell: (branch) => branch.prNumber ?? "" },
                { header: "From", cell: (branch) => <When at={branch.sourceTimestamp} /> },
                { header: "Workspace URL", cell: (branch) => <code>{branch.workspaceUrl}</code> },
                {
                  header: "Actions",
                  cell: (branch) => (
                    <span class="actions">
                      <ConfirmButton
                        label="Reset"
                        variant="plain"
                        question={`Reset ${branch.name} to a fresh copy of the project as it is now?`}
                        onConfirm={() =>
                          action.run(async () => {
                            await data(
                              api.POST("/org/{slug}/projects/{projectSlug}/branches/{id}/reset", {
                                params: { path: { ...path, id: branch.id } },
                              }),
                            );
                            branches.reload();
                          })
                        }
                      />
                      <ConfirmButton
                        label="Delete"
                        question={`Delete ${branch.name} and its data?`}
                        onConfirm={() =>
                          action.run(async () => {
                            await data(
                              api.DELETE("/org/{slug}/projects/{projectSlug}/branches/{id}", {
                                params: { path: { ...path, id: branch.id } },
                              }),
                            );
                            branches.reload();
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
      </Page>
    </ProjectLayout>
  );
}
