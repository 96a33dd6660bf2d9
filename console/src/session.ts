import { signal } from "@preact/signals";
import type { Account, ControlPaths } from "../../src/client/index.ts";
import { api, data } from "./api.ts";

type OrgMembership = ControlPaths["/orgs"]["get"]["responses"][200]["content"]["application/json"]["orgs"][number];

/** The signed-in account: undefined until known, null when signed out. */
export const account = signal<Account | null | undefined>(undefined);
/** The orgs the account belongs to, with its role in each. */
export const orgs = signal<OrgMembership[]>([]);

/** Reads who is signed in (the session cookie) and their orgs; a visitor without one is signed out. */
export async function loadSession(): Promise<void> {
  // get-session answers null rather than 401 when signed out: a first visit logs no failed request.
  const session = await data(api.GET("/auth/get-session"));
  if (!session) {
    account.value = null;
    orgs.value = [];
    return;
  }
  account.value = (await data(api.GET("/account"))).account;
  await loadOrgs();
}

export async function loadOrgs(): Promise<void> {
  orgs.value = (await data(api.GET("/orgs"))).orgs;
}

export async function signOut(): Promise<void> {
  await data(api.POST("/auth/sign-out"));
  account.value = null;
  orgs.value = [];
}

/** The caller's role in the org `slug`, once known. */
export function roleIn(slug: string): string | undefined {
  return orgs.value.find((org) => org.slug === slug)?.role;
}

/** Unread notifications of the org on screen, for the bar's count. */
export const unread = signal<number>(0);

export async function loadUnread(slug: string): Promise<void> {
  const answer = await api.GET("/org/{slug}/notifications", { params: { path: { slug }, query: { unread: "true" } } });
  unread.value = answer.data?.notifications.length ?? 0;
}
