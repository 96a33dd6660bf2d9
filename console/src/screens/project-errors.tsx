import { useState } from "preact/hooks";
import { api, data } from "../api.ts";
import { ProjectLayout } from "../components/layout.tsx";
import { Button, Field, Loading, Page, Select, Table, When } from "../components/ui.tsx";
import { useLoad } from "../hooks.ts";
import { useProjectPath } from "./project-overview.tsx";

/** `/orgs/:slug/projects/:project/errors`: what the workspace answered with an error lately. */
export function TenantErrors() {
  const { slug, project, path } = useProjectPath();
  const [status, setStatus] = useState("");
  const [since, setSince] = useState("");
  const [filters, setFilters] = useState({ status: "", since: "" });
  const errors = useLoad(
    () =>
      data(
        api.GET("/org/{slug}/projects/{projectSlug}/errors", {
          params: {
            path,
            query: {
              limit: 100,
              ...(filters.status ? { status: filters.status } : {}),
              ...(filters.since ? { since: new Date(filters.since).toISOString() } : {}),
            },
          },
        }),
      ),
    [slug, project, filters],
  );
  return (
    <ProjectLayout slug={slug} project={project}>
      <Page title="Errors">
        <form
          class="form inline"
          aria-label="Filter errors"
          onSubmit={(event) => {
            event.preventDefault();
            setFilters({ status, since });
          }}
        >
          <Select
            label="Status"
            name="status"
            value={status}
            problem={errors.problem}
            options={[
              ["", "Any"],
              ["4xx", "4xx"],
              ["5xx", "5xx"],
            ]}
            onChange={(event) => setStatus(event.currentTarget.value)}
          />
          <Field
            label="Since"
            name="since"
            type="datetime-local"
            value={since}
            problem={errors.problem}
            onInput={(event) => setSince(event.currentTarget.value)}
          />
          <Button type="submit">Filter</Button>
          <Button onClick={errors.reload}>Refresh</Button>
        </form>
        <Loading loaded={errors}>
          {({ errors: list }) => (
            <Table
              label="Errors"
              rows={list}
              empty="No errors: the workspace's clients are doing fine."
              columns={[
                { header: "When", cell: (error) => <When at={error.at} /> },
                { header: "Status", cell: (error) => error.status },
                { header: "Code", cell: (error) => <code>{error.code}</code> },
                { header: "Request", cell: (error) => `${error.method} ${error.path}` },
                { header: "Message", cell: (error) => error.message },
              ]}
            />
          )}
        </Loading>
      </Page>
    </ProjectLayout>
  );
}
