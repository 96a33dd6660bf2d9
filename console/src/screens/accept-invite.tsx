import { useEffect, useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { api, data } from "../api.ts";
import { PlainLayout } from "../components/layout.tsx";
import { Button, ProblemNote } from "../components/ui.tsx";
import { useAction } from "../hooks.ts";
import { account, loadOrgs } from "../session.ts";

/**
 * `/accept-invite?token=…`, where an invitation mail links to: joins the org as the signed-in
 * account (the guard has a visitor sign in or up first, and brings them back here).
 */
export function AcceptInvite() {
  const location = useLocation();
  // Kept, then taken out of the address bar: the token is a secret until it is used.
  const [token] = useState(location.query.token ?? "");
  useEffect(() => {
    if (location.query.token) history.replaceState(null, "", "/accept-invite");
  }, [location.query.token]);
  const action = useAction();
  return (
    <PlainLayout signedIn>
      <h1>Join an organization</h1>
      {token ? (
        <>
          <p>
            You were invited to an organization on Plinth. You will join it as <strong>{account.value?.email}</strong>:
            the invitation must have been sent to that address.
          </p>
          <ProblemNote problem={action.problem} />
          <Button
            variant="primary"
            busy={action.busy}
            onClick={async () => {
              let slug = "";
              const done = await action.run(async () => {
                slug = (await data(api.POST("/invitations/accept", { body: { token } }))).orgSlug;
                await loadOrgs();
              });
              if (done) location.route(`/orgs/${slug}`);
            }}
          >
            Accept invitation
          </Button>
        </>
      ) : (
        <p>This link holds no invitation: open the link from the invitation mail again.</p>
      )}
    </PlainLayout>
  );
}
