import { useRoute } from "preact-iso";
import { api, data } from "../api.ts";
import { OrgLayout } from "../components/layout.tsx";
import { Button, Loading, Page, ProblemNote, Table, When } from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";
import { loadUnread } from "../session.ts";

/** `/orgs/:slug/notifications`: what happened that the caller should know; mark read. */
export function Notifications() {
  const { slug } = useRoute().params as { slug: string };
  const notifications = useLoad(
    () => data(api.GET("/org/{slug}/notifications", { params: { path: { slug } } })),
    [slug],
  );
  const action = useAction();
  const changed = () => {
    notifications.reload();
    void loadUnread(slug);
  };
  return (
    <OrgLayout slug={slug}>
      <Page
        title="Notifications"
        actions={
          <Button
            busy={action.busy}
            onClick={() =>
              action.run(async () => {
                await data(api.POST("/org/{slug}/notifications/read-all", { params: { path: { slug } } }));
                changed();
              })
            }
          >
            Mark all read
          </Button>
        }
      >
        <ProblemNote problem={action.problem} />
        <Loading loaded={notifications}>
          {({ notifications: list }) => (
            <Table
              label="Notifications"
              rows={list}
              empty="Nothing to tell you."
              columns={[
                { header: "When", cell: (item) => <When at={item.createdAt} /> },
                { header: "What", cell: (item) => (item.read ? item.title : <strong>{item.title}</strong>) },
                { header: "Details", cell: (item) => item.body },
                {
                  header: "Actions",
                  cell: (item) =>
                    item.read ? (
                      <span class="muted">read</span>
                    ) : (
                      <Button
                        onClick={() =>
                          action.run(async () => {
                            await data(
                              api.POST("/org/{slug}/notifications/{id}/read", {
                                params: { path: { slug, id: item.id } },
                              }),
                            );
                            changed();
                          })
                        }
                      >
                        Mark read
                      </Button>
                    ),
                },
              ]}
            />
          )}
        </Loading>
      </Page>
    </OrgLayout>
  );
}
