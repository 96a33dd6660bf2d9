import { useState } from "preact/hooks";
import { api, data } from "../api.ts";
import { ProjectLayout } from "../components/layout.tsx";
import {
  Badge,
  Button,
  ConfirmButton,
  Copyable,
  Field,
  Loading,
  Page,
  ProblemNote,
  Table,
  When,
} from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";
import { useProjectPath } from "./project-overview.tsx";

/** `/orgs/:slug/projects/:project/domains`: custom domains, the TXT record each needs, verifying. */
export function Domains() {
  const { slug, project, path } = useProjectPath();
  const domains = useLoad(
    () => data(api.GET("/org/{slug}/projects/{projectSlug}/domains", { params: { path } })),
    [slug, project],
  );
  const add = useAction();
  const action = useAction();
  const [hostname, setHostname] = useState("");
  return (
    <ProjectLayout slug={slug} project={project}>
      <Page title="Domains">
        <form
          class="form inline card"
          aria-label="Add a domain"
          onSubmit={async (event) => {
            event.preventDefault();
            const done = await add.run(() =>
              data(api.POST("/org/{slug}/projects/{projectSlug}/domains", { params: { path }, body: { hostname } })),
            );
            if (done) {
              setHostname("");
              domains.reload();
            }
          }}
        >
          <ProblemNote problem={add.problem} />
          <Field
            label="Hostname"
            name="hostname"
            required
            placeholder="shop.example.com"
            value={hostname}
            problem={add.problem}
            onInput={(event) => setHostname(event.currentTarget.value)}
          />
          <Button type="submit" variant="primary" busy={add.busy}>
            Add domain
          </Button>
        </form>
        <ProblemNote problem={action.problem} />
        <Loading loaded={domains}>
          {({ domains: list }) => (
            <Table
              label="Domains"
              rows={list}
              empty="No custom domains: the workspace answers at its workspace URL."
              columns={[
                { header: "Hostname", cell: (domain) => domain.hostname },
                { header: "Status", cell: (domain) => <Badge status={domain.status} /> },
                {
                  header: "TXT record",
                  cell: (domain) => (
                    <span class="stack">
                      <Copyable label={`the TXT record name of ${domain.hostname}`} value={domain.verification.name} />
                      <Copyable
                        label={`the TXT record value of ${domain.hostname}`}
                        value={domain.verification.value}
                      />
                    </span>
                  ),
                },
                { header: "CNAME to", cell: (domain) => <code>{domain.target.value}</code> },
                {
                  header: "Last check",
                  cell: (domain) => (domain.error ? domain.error : <When at={domain.lastCheckedAt} />),
                },
                {
                  header: "Actions",
                  cell: (domain) => (
                    <span class="actions">
                      {domain.status !== "active" ? (
                        <Button
                          onClick={() =>
                            action.run(async () => {
                              await data(
                                api.POST("/org/{slug}/projects/{projectSlug}/domains/{id}/verify", {
                                  params: { path: { ...path, id: domain.id } },
                                }),
                              );
                              domains.reload();
                            })
                          }
                        >
                          Verify
                        </Button>
                      ) : null}
                      <ConfirmButton
                        label="Remove"
                        question={`Remove ${domain.hostname}? It stops serving this project.`}
                        onConfirm={() =>
                          action.run(async () => {
                            await data(
                              api.DELETE("/org/{slug}/projects/{projectSlug}/domains/{id}", {
                                params: { path: { ...path, id: domain.id } },
                              }),
                            );
                            domains.reload();
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
