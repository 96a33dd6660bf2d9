import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import { ValidationError } from "../../errors.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { parseInstant } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { authorize } from "../orgs/access.ts";
import { findProject } from "../projects/service.ts";
import { TENANT_ERRORS_LIMIT } from "./schemas.ts";

/** How long tenant errors are kept (DESIGN §10). */
export const TENANT_ERRORS_DAYS = 7;

/** A `status` filter: a class (`4xx`, `5xx`) or one code. */
function statusRange(status: string): [number, number] {
  const text = status.trim().toLowerCase();
  const family = /^([45])xx$/.exec(text);
  if (family) return [Number(family[1]) * 100, Number(family[1]) * 100 + 99];
  if (/^[1-5]\d\d$/.test(text)) return [Number(text), Number(text)];
  throw new ValidationError([{ path: "status", message: "must be 4xx, 5xx or a status code such as 404" }]);
}

/** The project's recorded workspace API errors, newest first. */
export async function listTenantErrors({
  ctx,
  projectSlug,
  query,
}: {
  ctx: OrgCtx;
  projectSlug: string;
  query: { limit?: number; offset?: number; status?: string; since?: string; authenticated?: "true" | "false" };
}) {
  authorize(ctx, "projects:read");
  const range = query.status === undefined ? undefined : statusRange(query.status);
  let since: string | undefined;
  if (query.since !== undefined) {
    const parsed = parseInstant(query.since);
    if (parsed === null)
      throw new ValidationError([{ path: "since", message: "must be ISO-8601 or Unix milliseconds" }]);
    since = parsed;
  }
  const project = await findProject(ctx, projectSlug);
  let select = ctx.deps.db
    .selectFrom("tenant_errors")
    .selectAll()
    .where("project_id", "=", project.id)
    .orderBy("id", "desc")
    .limit(query.limit ?? TENANT_ERRORS_LIMIT)
    .offset(query.offset ?? 0);
  if (range) select = select.where("status", ">=", range[0]).where("status", "<=", range[1]);
  if (since) select = select.where("at", ">=", since);
  if (query.authenticated) select = select.where("authenticated", "=", query.authenticated === "true" ? 1 : 0);
  const rows = await select.execute();
  return {
    errors: rows.map((row) => ({
      id: row.id,
      at: row.at,
      method: row.method,
      path: row.path,
      status: Number(row.status),
      code: row.code,
      message: row.message,
      requestId: row.request_id,
      authenticated: Number(row.authenticated) === 1,
    })),
  };
}

/** Deletes tenant errors older than TENANT_ERRORS_DAYS, a batch at a time. */
export async function pruneTenantErrors(deps: Deps, batch = 5_000): Promise<void> {
  const before = new Date(deps.clock.now().getTime() - TENANT_ERRORS_DAYS * DAY_MS).toISOString();
  for (;;) {
    const oldest = deps.db.selectFrom("tenant_errors").select("id").where("at", "<", before).limit(batch);
    const result = await deps.db.deleteFrom("tenant_errors").where("id", "in", oldest).executeTakeFirst();
    if (Number(result.numDeletedRows) < batch) return;
  }
}

export function tenantErrorJobs(deps: Deps): JobHandlers {
  return { "tenant_errors.prune": { handle: () => pruneTenantErrors(deps) } };
}

export const tenantErrorSchedule: RecurringJob[] = [
  { name: "tenant_errors.prune", everyMs: DAY_MS / 24, kind: "tenant_errors.prune" },
];
