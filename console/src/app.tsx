import { useEffect } from "preact/hooks";
import { LocationProvider, Route, Router, useLocation } from "preact-iso";
import { ProblemNote } from "./components/ui.tsx";
import { useLoad } from "./hooks.ts";
import { AcceptInvite } from "./screens/accept-invite.tsx";
import { AccountScreen } from "./screens/account.tsx";
import { AuditLog } from "./screens/audit.tsx";
import { SignIn, SignUp } from "./screens/auth.tsx";
import { Billing } from "./screens/billing.tsx";
import { Keys } from "./screens/keys.tsx";
import { Members } from "./screens/members.tsx";
import { Notifications } from "./screens/notifications.tsx";
import { Home, NewOrg, NotFound } from "./screens/orgs.tsx";
import { Backups } from "./screens/project-backups.tsx";
import { Branches } from "./screens/project-branches.tsx";
import { ProjectData } from "./screens/project-data.tsx";
import { Domains } from "./screens/project-domains.tsx";
import { TenantErrors } from "./screens/project-errors.tsx";
import { ProjectOverview } from "./screens/project-overview.tsx";
import { WorkspaceWebhooks } from "./screens/project-webhooks.tsx";
import { Projects } from "./screens/projects.tsx";
import { Settings } from "./screens/settings.tsx";
import { Usage } from "./screens/usage.tsx";
import { Webhooks } from "./screens/webhooks.tsx";
import { account, loadSession } from "./session.ts";

/** Screens anyone may see; every other one needs a session. */
const PUBLIC = new Set(["/sign-in", "/sign-up"]);

/** Waits for the session, then sends a signed-out visitor of a private screen to sign in (and back after). */
function Guard() {
  const location = useLocation();
  const session = useLoad(loadSession, []);
  const signedOut = account.value === null;
  const needsSession = !PUBLIC.has(location.path);
  useEffect(() => {
    if (signedOut && needsSession) {
      location.route(`/sign-in?next=${encodeURIComponent(location.url)}`, true);
    }
  }, [signedOut, needsSession, location]);
  if (session.problem) return <ProblemNote problem={session.problem} />;
  if (account.value === undefined || (signedOut && needsSession)) {
    return (
      <p class="loading" role="status">
        Loading…
      </p>
    );
  }
  return (
    <Router>
      <Route path="/sign-in" component={SignIn} />
      <Route path="/sign-up" component={SignUp} />
      <Route path="/" component={Home} />
      <Route path="/orgs/new" component={NewOrg} />
      <Route path="/account" component={AccountScreen} />
      <Route path="/accept-invite" component={AcceptInvite} />
      <Route path="/orgs/:slug" component={Projects} />
      <Route path="/orgs/:slug/members" component={Members} />
      <Route path="/orgs/:slug/keys" component={Keys} />
      <Route path="/orgs/:slug/audit" component={AuditLog} />
      <Route path="/orgs/:slug/usage" component={Usage} />
      <Route path="/orgs/:slug/webhooks" component={Webhooks} />
      <Route path="/orgs/:slug/billing" component={Billing} />
      <Route path="/orgs/:slug/settings" component={Settings} />
      <Route path="/orgs/:slug/notifications" component={Notifications} />
      <Route path="/orgs/:slug/projects/:project" component={ProjectOverview} />
      <Route path="/orgs/:slug/projects/:project/data" component={ProjectData} />
      <Route path="/orgs/:slug/projects/:project/backups" component={Backups} />
      <Route path="/orgs/:slug/projects/:project/branches" component={Branches} />
      <Route path="/orgs/:slug/projects/:project/domains" component={Domains} />
      <Route path="/orgs/:slug/projects/:project/errors" component={TenantErrors} />
      <Route path="/orgs/:slug/projects/:project/webhooks" component={WorkspaceWebhooks} />
      <Route default component={NotFound} />
    </Router>
  );
}

export function App() {
  return (
    <LocationProvider>
      <Guard />
    </LocationProvider>
  );
}
