import { useState } from "preact/hooks";
import { useRoute } from "preact-iso";
import type { Project } from "../../../src/client/index.ts";
import { api, data } from "../api.ts";
import { OrgLayout } from "../components/layout.tsx";
import { Badge, Button, Field, Loading, Page, ProblemNote, Secret, Select, Table } from "../components/ui.tsx";
import { useAction, useInterval, useLoad } from "../hooks.ts";

export const REGIONS = ["", "ist", "fra", "ams", "lhr", "sjc", "iad", "sin", "syd"] as const;

/** `/orgs/:slug`: the org's projects, their status followed live, and creating one. */
export function Projects() {
  const { slug } = useRoute().params as { slug: string };
  const projects = useLoad(() => data(api.GET("/org/{slug}/projects", { params: { path: { slug } } })), [slug]);
  const busy = projects.value?.projects.some((project) => project.status === "provisioning") ?? false;
  useInterval(projects.reload, 2000, busy);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<{ project: Project; adminToken: string } | null>(null);
  return (
    <OrgLayout slug={slug}>
      <Page
        title="Projects"
        actions={
          creating ? null : (
            <Button variant="primary" onClick={() => setCreating(true)}>
              New project
            </Button>
          )
        }
      >
        {creating ? (
          <NewProject
            slug={slug}
            onCancel={() => setCreating(false)}
            onCreated={(answer) => {
              setCreating(false);
              setCreated(answer);
              projects.reload();
            }}
          />
        ) : null}
        {created ? (
          <div class="card">
            <p>
              Created <a href={`/orgs/${slug}/projects/${created.project.slug}`}>{created.project.name}</a>: its
              workspace is provisioned in the background.
            </p>
            <Secret label="Workspace admin token" value={created.adminToken} />
          </div>
        ) : null}
        <Loading loaded={projects}>
          {({ projects: list }) => (
            <Table
              label="Projects"
              rows={list}
              empty="No projects yet. A project is a backend of its own: create one to start."
              columns={[
                {
                  header: "Name",
                  cell: (project) => <a href={`/orgs/${slug}/projects/${project.slug}`}>{project.name}</a>,
                },
                { header: "Status", cell: (project) => <Badge status={project.status} /> },
                { header: "Environment", cell: (project) => project.environment },
                { header: "Region", cell: (project) => project.region },
              ]}
            />
          )}
        </Loading>
      </Page>
    </OrgLayout>
  );
}

function NewProject({
  slug,
  onCancel,
  onCreated,
}: {
  slug: string;
  onCancel(): void;
  onCreated(answer: { project: Project; adminToken: string }): void;
}) {
  const [name, setName] = useState("");
  const [region, setRegion] = useState("");
  const [template, setTemplate] = useState("");
  const templates = useLoad(() => data(api.GET("/templates")), []);
  const action = useAction();
  return (
    <form
      class="form card"
      aria-label="New project"
      onSubmit={async (event) => {
        event.preventDefault();
        await action.run(async () => {
          const answer = await data(
            api.POST("/org/{slug}/projects", {
              params: { path: { slug } },
              body: {
                name,
                ...(region ? { region: region as (typeof REGIONS)[number] & string } : {}),
                ...(template ? { template } : {}),
              } as never,
            }),
          );
          onCreated(answer);
        });
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
        label="Region"
        name="region"
        value={region}
        problem={action.problem}
        options={REGIONS.map((code) => [code, code || "The organization's default"] as const)}
        onChange={(event) => setRegion(event.currentTarget.value)}
      />
      <Select
        label="Template"
        name="template"
        value={template}
        problem={action.problem}
        options={[
          ["", "The latest default"],
          ...(templates.value?.templates ?? []).flatMap((entry) =>
            entry.versions.map((version) => [`${entry.name}@${version}`, `${entry.name} ${version}`] as const),
          ),
        ]}
        onChange={(event) => setTemplate(event.currentTarget.value)}
      />
      <div class="actions">
        <Button type="submit" variant="primary" busy={action.busy}>
          Create project
        </Button>
        <Button onClick={onCancel}>Cancel</Button>
      </div>
    </form>
  );
}
