import type { ComponentChildren } from "preact";
import { useEffect } from "preact/hooks";
import { useLocation } from "preact-iso";
import { account, loadUnread, orgs, signOut, unread } from "../session.ts";
import { Button } from "./ui.tsx";

/** The bar on every signed-in screen: the product, the org switcher, the account and Sign out. */
function TopBar({ slug }: { slug?: string }) {
  const location = useLocation();
  useEffect(() => {
    if (slug) void loadUnread(slug).catch(() => undefined);
  }, [slug]);
  return (
    <header class="topbar">
      <a class="brand" href="/">
        Plinth
      </a>
      {orgs.value.length > 0 ? (
        <label class="switcher">
          <span class="visually-hidden">Organization</span>
          <select
            value={slug ?? ""}
            onChange={(event) => {
              const next = event.currentTarget.value;
              location.route(next === "+new" ? "/orgs/new" : `/orgs/${next}`);
            }}
          >
            {slug === undefined ? <option value="">Choose an organization</option> : null}
            {orgs.value.map((org) => (
              <option key={org.slug} value={org.slug}>
                {org.name}
              </option>
            ))}
            <option value="+new">New organization…</option>
          </select>
        </label>
      ) : null}
      <span class="spacer" />
      {slug ? (
        <a class="bell" href={`/orgs/${slug}/notifications`}>
          Notifications{unread.value > 0 ? <span class="count"> ({unread.value} unread)</span> : null}
        </a>
      ) : null}
      <a class="who" href="/account">
        {account.value?.email}
      </a>
      <Button
        onClick={async () => {
          await signOut();
          location.route("/sign-in");
        }}
      >
        Sign out
      </Button>
    </header>
  );
}

/** A navigation link, marked as the current page when it is. */
function NavLink({ href, children, exact = false }: { href: string; children: ComponentChildren; exact?: boolean }) {
  const { path } = useLocation();
  const current = exact ? path === href : path === href || path.startsWith(`${href}/`);
  return (
    <a href={href} aria-current={current ? "page" : undefined}>
      {children}
    </a>
  );
}

/** An org's screens: its navigation beside the screen. */
export function OrgLayout({ slug, children }: { slug: string; children: ComponentChildren }) {
  const base = `/orgs/${slug}`;
  return (
    <div class="shell">
      <TopBar slug={slug} />
      <div class="body">
        <nav class="sidebar" aria-label="Organization">
          <NavLink href={base} exact>
            Projects
          </NavLink>
          <NavLink href={`${base}/members`}>Members</NavLink>
          <NavLink href={`${base}/keys`}>API keys</NavLink>
          <NavLink href={`${base}/webhooks`}>Webhooks</NavLink>
          <NavLink href={`${base}/usage`}>Usage</NavLink>
          <NavLink href={`${base}/billing`}>Billing</NavLink>
          <NavLink href={`${base}/audit`}>Audit log</NavLink>
          <NavLink href={`${base}/settings`}>Settings</NavLink>
        </nav>
        <main>{children}</main>
      </div>
    </div>
  );
}

/** A project's screens: the org's navigation, and the project's tabs above the screen. */
export function ProjectLayout({
  slug,
  project,
  children,
}: {
  slug: string;
  project: string;
  children: ComponentChildren;
}) {
  const base = `/orgs/${slug}/projects/${project}`;
  return (
    <OrgLayout slug={slug}>
      <p class="crumbs">
        <a href={`/orgs/${slug}`}>Projects</a> / <span>{project}</span>
      </p>
      <nav class="tabs" aria-label="Project">
        <NavLink href={base} exact>
          Overview
        </NavLink>
        <NavLink href={`${base}/data`}>Data</NavLink>
        <NavLink href={`${base}/backups`}>Backups</NavLink>
        <NavLink href={`${base}/branches`}>Branches</NavLink>
        <NavLink href={`${base}/domains`}>Domains</NavLink>
        <NavLink href={`${base}/errors`}>Errors</NavLink>
        <NavLink href={`${base}/webhooks`}>Workspace webhooks</NavLink>
      </nav>
      {children}
    </OrgLayout>
  );
}

/** A screen outside any org (signing in, creating the first org). */
export function PlainLayout({ children, signedIn = false }: { children: ComponentChildren; signedIn?: boolean }) {
  return (
    <div class="shell">
      {signedIn ? (
        <TopBar />
      ) : (
        <header class="topbar">
          <a class="brand" href="/">
            Plinth
          </a>
        </header>
      )}
      <main class="narrow">{children}</main>
    </div>
  );
}
