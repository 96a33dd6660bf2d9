import { useState } from "preact/hooks";
import { useLocation, useRoute } from "preact-iso";
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
  Select,
  Table,
  When,
} from "../components/ui.tsx";
import { useAction, useInterval, useLoad } from "../hooks.ts";

/** The route's org and project, as a path for the SDK. */
export function useProjectPath() {
  const { slug, project } = useRoute().params as { slug: string; project: string };
  return { slug, project, path: { slug, projectSlug: project } };
}

/** `/orgs/:slug/projects/:project`: the project, its status live, and its lifecycle. */
export function ProjectOverview() {
  const { slug, project, path } = useProjectPath();
  const location = useLocation();
  const loaded = useLoad(
    () => data(api.GET("/org/{slug}/projects/{projectSlug}", { params: { path } })),
    [slug, project],
  );
  useInterval(loaded.reload, 2000, loaded.value?.project.status === "provisioning");
  const action = useAction();
  const [token, setToken] = useState<string | null>(null);
  const [upgrade, setUpgrade] = useState<string | null>(null);
  const [version, setVersion] = useState("");
  const templates = useLoad(() => data(api.GET("/templates")), []);
  const lifecycle = (kind: "pause" | "resume" | "provision-retry") =>
    action.run(async () => {
      if (kind === "pause") await data(api.POST("/org/{slug}/projects/{projectSlug}/pause", { params: { path } }));
      else if (kind === "resume")
        await data(api.POST("/org/{slug}/projects/{projectSlug}/resume", { params: { path } }));
      else await data(api.POST("/org/{slug}/projects/{projectSlug}/provision-retry", { params: { path } }));
      loaded.reload();
    });
  return (
    <ProjectLayout slug={slug} project={project}>
      <Loading loaded={loaded}>
        {({ project: current }) => (
          <Page
            title={current.name}
            actions={
              <>
                {current.status === "active" ? (
                  <Button busy={action.busy} onClick={() => lifecycle("pause")}>
                    Pause
                  </Button>
                ) : null}
                {current.status === "paused" ? (
                  <Button variant="primary" busy={action.busy} onClick={() => lifecycle("resume")}>
                    Resume
                  </Button>
                ) : null}
                {current.status === "failed" ? (
                  <Button variant="primary" busy={action.busy} onClick={() => lifecycle("provision-retry")}>
                    Retry provisioning
                  </Button>
                ) : null}
              </>
            }
          >
            <ProblemNote problem={action.problem} />
            <dl class="facts">
              <dt>Status</dt>
              <dd>
                <Badge status={current.status} />
              </dd>
              <dt>Region</dt>
              <dd>{current.region}</dd>
              <dt>Environment</dt>
              <dd>{current.environment}</dd>
              <dt>Template</dt>
              <dd>{current.templateVersion}</dd>
              <dt>Workspace URL</dt>
              <dd>
                <code>{current.workspaceUrl}</code>
              </dd>
              <dt>Id</dt>
              <dd>
                <code>{current.id}</code>
              </dd>
              <dt>Created</dt>
              <dd>
                <When at={current.createdAt} />
              </dd>
            </dl>
            <ProjectDetails
              key={current.updatedAt}
              slug={slug}
              path={path}
              name={current.name}
              environment={current.environment}
              signUp={current.signUp}
              onSaved={loaded.reload}
            />
            <Deploys slug={slug} path={path} />
            <section class="card" aria-labelledby="admin-token">
              <h2 id="admin-token">Workspace admin token</h2>
              <p class="muted">
                The token that administers this project's workspace API. It is shown once; a new one stops the old one
                at once.
              </p>
              {token ? <Secret label="New workspace admin token" value={token} /> : null}
              <ConfirmButton
                label="New admin token"
                variant="plain"
                question="Make a new admin token? The current one stops working at once."
                onConfirm={() =>
                  action.run(async () => {
                    const answer = await data(
                      api.POST("/org/{slug}/projects/{projectSlug}/reprovision-admin", { params: { path } }),
                    );
                    setToken(answer.adminToken);
                  })
                }
              />
            </section>
            <section class="card" aria-labelledby="template">
              <h2 id="template">Template</h2>
              <p class="muted">Migrate the workspace forward to a version of its template, inside one transaction.</p>
              {upgrade ? <p role="status">{upgrade}</p> : null}
              <Select
                label="Template version"
                name="version"
                value={version}
                options={[
                  ["", "The latest"],
                  ...[...new Set((templates.value?.templates ?? []).flatMap((entry) => entry.versions))].map(
                    (candidate) => [candidate, candidate] as const,
                  ),
                ]}
                onChange={(event) => setVersion(event.currentTarget.value)}
              />
              <Button
                busy={action.busy}
                onClick={() =>
                  action.run(async () => {
                    const answer = await data(
                      api.POST("/org/{slug}/projects/{projectSlug}/upgrade", {
                        params: { path, ...(version ? { query: { version } } : {}) },
                      }),
                    );
                    setUpgrade(
                      answer.status === "upgraded"
                        ? `Upgraded from ${answer.from} to ${answer.to}.`
                        : answer.status === "skipped"
                          ? `Already current: ${answer.reason}`
                          : `The upgrade failed: ${answer.error}`,
                    );
                    loaded.reload();
                  })
                }
              >
                Upgrade template
              </Button>
            </section>
            <section class="card danger-zone" aria-labelledby="danger">
              <h2 id="danger">Danger zone</h2>
              <ConfirmButton
                label="Delete project"
                question={`Delete ${current.name}? Its workspace is purged after the purge delay; until then it cannot be used.`}
                onConfirm={() =>
                  action.run(async () => {
                    await data(api.DELETE("/org/{slug}/projects/{projectSlug}", { params: { path } }));
                    location.route(`/orgs/${slug}`);
                  })
                }
              />
            </section>
          </Page>
        )}
      </Loading>
    </ProjectLayout>
  );
}

type ProjectPath = { slug: string; projectSlug: string };

/** A project's name, environment and workspace sign-up switch, changed in place. */
function ProjectDetails({
  path,
  name: current,
  environment: currentEnvironment,
  signUp: currentSignUp,
  onSaved,
}: {
  slug: string;
  path: ProjectPath;
  name: string;
  environment: "production" | "staging" | "development";
  signUp: "open" | "closed";
  onSaved(): void;
}) {
  const [name, setName] = useState(current);
  const [environment, setEnvironment] = useState(currentEnvironment);
  const [signUp, setSignUp] = useState(currentSignUp);
  const action = useAction();
  return (
    <form
      class="form inline card"
      aria-label="Project details"
      onSubmit={async (event) => {
        event.preventDefault();
        const done = await action.run(() =>
          data(
            api.PATCH("/org/{slug}/projects/{projectSlug}", { params: { path }, body: { name, environment, signUp } }),
          ),
        );
        if (done) onSaved();
      }}
    >
      <ProblemNote problem={action.problem} />
      <Field
        label="Project name"
        name="name"
        required
        minLength={2}
        maxLength={60}
        value={name}
        problem={action.problem}
        onInput={(event) => setName(event.currentTarget.value)}
      />
      <Select
        label="Environment"
        name="environment"
        value={environment}
        problem={action.problem}
        options={["production", "staging", "development"]}
        onChange={(event) => setEnvironment(event.currentTarget.value as typeof environment)}
      />
      <Select
        label="Workspace sign-up"
        name="signUp"
        value={signUp}
        problem={action.problem}
        options={["open", "closed"]}
        onChange={(event) => setSignUp(event.currentTarget.value as typeof signUp)}
      />
      <Button type="submit" busy={action.busy}>
        Save details
      </Button>
    </form>
  );
}

/** What was done to the project's workspace: provisions, upgrades, resumes, restores. */
function Deploys({ slug, path }: { slug: string; path: ProjectPath }) {
  const deploys = useLoad(
    () => data(api.GET("/org/{slug}/projects/{projectSlug}/deploys", { params: { path } })),
    [slug, path.projectSlug],
  );
  return (
    <section class="card" aria-labelledby="deploys">
      <h2 id="deploys">Deploys</h2>
      <Loading loaded={deploys}>
        {({ deploys: list }) => (
          <Table
            label="Deploys"
            rows={list}
            empty="Nothing deployed yet."
            columns={[
              { header: "When", cell: (deploy) => <When at={deploy.createdAt} /> },
              { header: "Kind", cell: (deploy) => deploy.kind },
              { header: "Status", cell: (deploy) => <Badge status={deploy.status} /> },
              {
                header: "Template",
                cell: (deploy) => [deploy.fromVersion, deploy.toVersion].filter(Boolean).join(" → "),
              },
              { header: "Error", cell: (deploy) => deploy.error ?? "" },
            ]}
          />
        )}
      </Loading>
    </section>
  );
}
