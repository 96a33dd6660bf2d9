/**
 * What the project tests (projects.test.ts, project-workers.test.ts) share: their regions and
 * limits, calls bound to one app, and reads of what the calls stored.
 */
import { existsSync } from "node:fs";
import { sql } from "kysely";
import type { Deps } from "../src/deps.ts";
import { dropWorkspace, workspaceFile, workspaceSchema } from "../src/domains/projects/workspace-db.ts";
import { call, dialect, expectStatus, type TestApp, until } from "./harness.ts";

/** Every region of the enum. */
export const ALL_REGIONS = ["ist", "fra", "ams", "lhr", "sjc", "iad", "sin", "syd"];
export const LOOSE_LIMITS = { AUTH_RATE_LIMIT_PER_MINUTE: "10000", RATE_LIMIT_PER_MINUTE: "100000" };

export type Principal = { cookie?: string; token?: string };

/** A call's credentials from a principal: its cookie, or else its token. */
export function as(who: Principal | undefined): Principal {
  if (!who) return {};
  return who.cookie ? { cookie: who.cookie } : { token: who.token as string };
}

/** Request helpers bound to one running app. */
export function api(getApp: () => TestApp) {
  const base = (slug: string) => `/org/${slug}/projects`;
  const self = {
    create(slug: string, who: Principal | undefined, body: unknown) {
      return call(getApp(), "POST", base(slug), { ...as(who), body });
    },
    get(slug: string, projectSlug: string, who: Principal | undefined) {
      return call(getApp(), "GET", `${base(slug)}/${projectSlug}`, as(who));
    },
    list(slug: string, who: Principal | undefined) {
      return call(getApp(), "GET", base(slug), as(who));
    },
    patch(slug: string, projectSlug: string, who: Principal | undefined, body: unknown) {
      return call(getApp(), "PATCH", `${base(slug)}/${projectSlug}`, { ...as(who), body });
    },
    remove(slug: string, projectSlug: string, who: Principal | undefined) {
      return call(getApp(), "DELETE", `${base(slug)}/${projectSlug}`, as(who));
    },
    action(slug: string, projectSlug: string, who: Principal | undefined, action: string) {
      return call(getApp(), "POST", `${base(slug)}/${projectSlug}/${action}`, as(who));
    },
    deploys(slug: string, projectSlug: string, who: Principal | undefined) {
      return call(getApp(), "GET", `${base(slug)}/${projectSlug}/deploys`, as(who));
    },
    overview(slug: string, who: Principal | undefined) {
      return call(getApp(), "GET", `/org/${slug}/overview`, as(who));
    },
    async audit(slug: string, owner: Principal): Promise<any[]> {
      const res = await call(getApp(), "GET", `/org/${slug}/audit?limit=500`, as(owner));
      expectStatus(res, 200);
      return res.body.events;
    },
    /** Polls the project until it leaves `provisioning`; returns it. */
    async settle(slug: string, projectSlug: string, who: Principal): Promise<any> {
      const res = await until(
        `project ${projectSlug} settling`,
        async () => {
          const read = await self.get(slug, projectSlug, who);
          return read.status !== 200 || read.body.project.status !== "provisioning" ? read : undefined;
        },
        15_000,
      );
      expectStatus(res, 200);
      return res.body.project;
    },
    /** Creates a project as `who`, expecting 201, and returns it with its one-time admin token. */
    async created(slug: string, who: Principal, body: Record<string, unknown>): Promise<any> {
      const res = await self.create(slug, who, body);
      expectStatus(res, 201);
      return res.body.project;
    },
    /** Creates a project and waits until provisioning has settled; returns the settled project. */
    async provisioned(slug: string, who: Principal, body: Record<string, unknown>): Promise<any> {
      const project = await self.created(slug, who, body);
      const settled = await self.settle(slug, project.slug, who);
      return { ...settled, adminToken: project.adminToken };
    },
  };
  return self;
}

export async function storedProject(deps: Deps, id: string) {
  return deps.db.selectFrom("projects").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
}

/** On PostgreSQL workspaces are schemas outside the app's test schema; remove them with the app. */
export async function dropAllWorkspaces(deps: Deps): Promise<void> {
  if (dialect !== "postgres") return;
  // A worker still provisioning would create its schema after the drop.
  await until(
    "provisioning to settle before cleanup",
    async () =>
      (await deps.db.selectFrom("projects").select("id").where("status", "=", "provisioning").execute()).length === 0,
    15_000,
  ).catch(() => {});
  const rows = await deps.db.selectFrom("projects").select("id").execute();
  for (const { id } of rows) await dropWorkspace(deps, id);
}

export async function workspaceExists(deps: Deps, projectId: string): Promise<boolean> {
  if (deps.dialect === "postgres") {
    const result = await sql<{ n: number }>`select count(*)::int as n from information_schema.schemata
      where schema_name = ${workspaceSchema(projectId)}`.execute(deps.db);
    return (result.rows[0]?.n ?? 0) > 0;
  }
  return existsSync(workspaceFile(deps, projectId));
}

export function userRow(id: string, email: string) {
  const at = new Date().toISOString();
  return { id, email, password_hash: "x", created_at: at, updated_at: at };
}
