import { useState } from "preact/hooks";
import { useRoute } from "preact-iso";
import { api, data } from "../api.ts";
import { OrgLayout } from "../components/layout.tsx";
import {
  Badge,
  Button,
  ConfirmButton,
  Field,
  Loading,
  Page,
  ProblemNote,
  Select,
  Table,
  When,
} from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";
import { account } from "../session.ts";

const ROLES = ["viewer", "developer", "admin", "owner"] as const;
type Role = (typeof ROLES)[number];

/** `/orgs/:slug/members`: members and invitations; invite, change a role, remove, resend. */
export function Members() {
  const { slug } = useRoute().params as { slug: string };
  const members = useLoad(() => data(api.GET("/org/{slug}/members", { params: { path: { slug } } })), [slug]);
  const action = useAction();
  const [email, setEmail] = useState("");
  const [role, setRole] = useState<Role>("developer");
  const invite = useAction();
  const [notice, setNotice] = useState<string | null>(null);
  const path = (id: string) => ({ path: { slug, id } });
  return (
    <OrgLayout slug={slug}>
      <Page title="Members">
        <form
          class="form inline card"
          aria-label="Invite a member"
          onSubmit={async (event) => {
            event.preventDefault();
            const done = await invite.run(() =>
              data(
                api.POST("/org/{slug}/invitations", {
                  params: { path: { slug } },
                  body: { email, role: role as Exclude<Role, "owner"> },
                }),
              ),
            );
            if (done) {
              setNotice(`Invited ${email}: the invitation is on its way by e-mail.`);
              setEmail("");
              members.reload();
            }
          }}
        >
          <ProblemNote problem={invite.problem} />
          <Field
            label="Email"
            name="email"
            type="email"
            required
            value={email}
            problem={invite.problem}
            onInput={(event) => setEmail(event.currentTarget.value)}
          />
          <Select
            label="Role"
            name="role"
            value={role}
            problem={invite.problem}
            options={["viewer", "developer", "admin"]}
            onChange={(event) => setRole(event.currentTarget.value as Role)}
          />
          <Button type="submit" variant="primary" busy={invite.busy}>
            Invite
          </Button>
        </form>
        {notice ? <p role="status">{notice}</p> : null}
        <ProblemNote problem={action.problem} />
        <Loading loaded={members}>
          {({ members: list }) => (
            <Table
              label="Members"
              rows={list}
              empty="No members."
              columns={[
                { header: "Email", cell: (member) => member.email },
                { header: "Name", cell: (member) => member.name ?? "" },
                {
                  header: "Role",
                  cell: (member) => (
                    <label>
                      <span class="visually-hidden">Role of {member.email}</span>
                      <select
                        value={member.role}
                        onChange={(event) =>
                          action.run(async () => {
                            await data(
                              api.PATCH("/org/{slug}/members/{id}", {
                                params: path(member.id),
                                body: { role: event.currentTarget.value as Role },
                              }),
                            );
                            members.reload();
                          })
                        }
                      >
                        {ROLES.map((candidate) => (
                          <option key={candidate} value={candidate}>
                            {candidate}
                          </option>
                        ))}
                      </select>
                    </label>
                  ),
                },
                { header: "Status", cell: (member) => <Badge status={member.status} /> },
                { header: "Since", cell: (member) => <When at={member.joinedAt ?? member.invitedAt} /> },
                {
                  header: "Actions",
                  cell: (member) => (
                    <span class="actions">
                      {member.status === "invited" || member.status === "expired" ? (
                        <Button
                          onClick={() =>
                            action.run(async () => {
                              await data(api.POST("/org/{slug}/members/{id}/resend", { params: path(member.id) }));
                              setNotice(`Sent ${member.email}'s invitation again.`);
                              members.reload();
                            })
                          }
                        >
                          Resend
                        </Button>
                      ) : null}
                      <ConfirmButton
                        label={member.accountId === account.value?.id ? "Leave" : "Remove"}
                        question={
                          member.status === "invited"
                            ? `Revoke the invitation of ${member.email}?`
                            : `Remove ${member.email} from this organization?`
                        }
                        onConfirm={() =>
                          action.run(async () => {
                            await data(api.DELETE("/org/{slug}/members/{id}", { params: path(member.id) }));
                            members.reload();
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
    </OrgLayout>
  );
}
