import { useState } from "preact/hooks";
import { useRoute } from "preact-iso";
import { api, data } from "../api.ts";
import { OrgLayout } from "../components/layout.tsx";
import { Button, Field, Loading, Page, Table, When } from "../components/ui.tsx";
import { useLoad } from "../hooks.ts";

const PAGE = 50;

/** `/orgs/:slug/audit`: the audit log, newest first, by action and time, paged. */
export function AuditLog() {
  const { slug } = useRoute().params as { slug: string };
  const [action, setAction] = useState("");
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const [filters, setFilters] = useState({ action: "", from: "", to: "" });
  const [offset, setOffset] = useState(0);
  const events = useLoad(
    () =>
      data(
        api.GET("/org/{slug}/audit", {
          params: {
            path: { slug },
            query: {
              limit: PAGE,
              offset,
              ...(filters.action ? { action: filters.action } : {}),
              ...(filters.from ? { from: new Date(filters.from).toISOString() } : {}),
              ...(filters.to ? { to: new Date(filters.to).toISOString() } : {}),
            },
          },
        }),
      ),
    [slug, filters, offset],
  );
  return (
    <OrgLayout slug={slug}>
      <Page title="Audit log">
        <form
          class="form inline"
          aria-label="Filter the audit log"
          onSubmit={(event) => {
            event.preventDefault();
            setOffset(0);
            setFilters({ action, from, to });
          }}
        >
          <Field
            label="Action"
            name="action"
            placeholder="project.*"
            value={action}
            problem={events.problem}
            onInput={(event) => setAction(event.currentTarget.value)}
          />
          <Field
            label="From"
            name="from"
            type="datetime-local"
            value={from}
            problem={events.problem}
            onInput={(event) => setFrom(event.currentTarget.value)}
          />
          <Field
            label="To"
            name="to"
            type="datetime-local"
            value={to}
            problem={events.problem}
            onInput={(event) => setTo(event.currentTarget.value)}
          />
          <Button type="submit">Filter</Button>
        </form>
        <Loading loaded={events}>
          {({ events: list }) => (
            <>
              <Table
                label="Audit events"
                rows={list}
                empty="Nothing in the audit log for that."
                columns={[
                  { header: "When", cell: (event) => <When at={event.createdAt} /> },
                  { header: "Action", cell: (event) => <code>{event.action}</code> },
                  { header: "Actor", cell: (event) => event.actor.email ?? `${event.actor.type} ${event.actor.id}` },
                  { header: "Target", cell: (event) => `${event.target.type} ${event.target.id}` },
                  { header: "Address", cell: (event) => event.ip ?? "" },
                ]}
              />
              <div class="actions pager">
                <Button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
                  Newer
                </Button>
                <Button disabled={list.length < PAGE} onClick={() => setOffset(offset + PAGE)}>
                  Older
                </Button>
              </div>
            </>
          )}
        </Loading>
      </Page>
    </OrgLayout>
  );
}
