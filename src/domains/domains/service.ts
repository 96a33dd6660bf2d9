import type { Selectable } from "kysely";
import { DAY_MS } from "../../clock.ts";
import { type Db, isUniqueViolation } from "../../db/database.ts";
import type { DomainsTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import { ConflictError, PlanLimitError, ValidationError } from "../../errors.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { newId } from "../../lib/ids.ts";
import { randomHex } from "../../lib/tokens.ts";
import { recordAudit, recordSystemAudit } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { notifyOrgAdmins } from "../notifications/service.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { findProjectRecord } from "../owned-records.ts";
import { findProject, type ProjectRow } from "../projects/service.ts";
import { emitOrgEvent } from "../webhooks/events.ts";
import { type ChallengeResult, checkChallenge } from "./dns.ts";
import { hostnameIssue } from "./hostnames.ts";
import { forgetHost } from "./hosts.ts";

type DomainRow = Selectable<DomainsTable>;

const MINUTE_MS = 60_000;

/** Domains a project may have (DESIGN §10). */
export const DOMAINS_PER_PROJECT = 10;
/** The re-check job's first wait, doubled after each miss up to MAX_BACKOFF_MS. */
const FIRST_BACKOFF_MS = MINUTE_MS;
const MAX_BACKOFF_MS = 60 * MINUTE_MS;
const RECHECK_BATCH = 100;

export const CHALLENGE_PREFIX = "_plinth-challenge";

function publicHost(deps: Deps): string {
  return new URL(deps.config.publicUrl).hostname.toLowerCase();
}

export function toDomain(row: DomainRow, deps: Deps) {
  return {
    id: row.id,
    projectId: row.project_id,
    hostname: row.hostname,
    status: row.status as "pending" | "active" | "failed",
    verification: {
      type: "TXT" as const,
      name: `${CHALLENGE_PREFIX}.${row.hostname}`,
      value: `plinth-verification=${row.token}`,
    },
    target: { type: "CNAME" as const, value: publicHost(deps) },
    lastCheckedAt: row.last_checked_at,
    verifiedAt: row.verified_at,
    error: row.error,
    createdAt: row.created_at,
  };
}

function backoffMs(attempts: number): number {
  return Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** Math.min(attempts, 20));
}

export async function createDomain({
  ctx,
  projectSlug,
  input,
}: {
  ctx: OrgCtx;
  projectSlug: string;
  input: { hostname: string };
}) {
  authorize(ctx, "domains:manage");
  const hostname = input.hostname.trim().toLowerCase();
  const issue = hostnameIssue(hostname, publicHost(ctx.deps));
  if (issue) throw new ValidationError([{ path: "hostname", message: issue }]);
  const project = await findProject(ctx, projectSlug);
  const now = ctx.deps.clock.now();
  try {
    const row = await inOrgTransaction(ctx, async (trx) => {
      const mine = await trx.selectFrom("domains").select(["hostname"]).where("project_id", "=", project.id).execute();
      if (mine.some((domain) => domain.hostname === hostname)) {
        throw new ConflictError(`${hostname} is already a domain of this project`);
      }
      if (mine.length >= DOMAINS_PER_PROJECT) {
        throw new PlanLimitError(`a project has at most ${DOMAINS_PER_PROJECT} domains`, {
          limit: DOMAINS_PER_PROJECT,
          used: mine.length,
          planId: ctx.org.plan_id,
        });
      }
      if (await activeElsewhere(trx, hostname, project.id))
        throw new ConflictError(`${hostname} is in use by another project`);
      const domain: DomainRow = {
        id: newId("dom", now),
        project_id: project.id,
        hostname,
        status: "pending",
        token: randomHex(16),
        attempts: 0,
        next_check_at: new Date(now.getTime() + FIRST_BACKOFF_MS).toISOString(),
        last_checked_at: null,
        verified_at: null,
        error: null,
        created_at: now.toISOString(),
      };
      await trx.insertInto("domains").values(domain).execute();
      await recordAudit(trx, ctx, {
        orgId: ctx.org.id,
        action: "domain.created",
        target: { type: "domain", id: domain.id },
        data: { projectId: project.id, hostname },
      });
      return domain;
    });
    return { domain: toDomain(row, ctx.deps) };
  } catch (error) {
    // Two requests for one name at once: the unique index settles it.
    if (isUniqueViolation(error)) throw new ConflictError(`${hostname} is already a domain of this project`);
    throw error;
  }
}

async function activeElsewhere(db: Db, hostname: string, projectId: string): Promise<boolean> {
  const row = await db
    .selectFrom("domains")
    .select("id")
    .where("hostname", "=", hostname)
    .where("status", "=", "active")
    .where("project_id", "!=", projectId)
    .executeTakeFirst();
  return row !== undefined;
}

export async function listDomains({ ctx, projectSlug }: { ctx: OrgCtx; projectSlug: string }) {
  authorize(ctx, "projects:read");
  const project = await findProject(ctx, projectSlug);
  const rows = await ctx.deps.db
    .selectFrom("domains")
    .selectAll()
    .where("project_id", "=", project.id)
    .orderBy("id")
    .execute();
  return { domains: rows.map((row) => toDomain(row, ctx.deps)) };
}

function findDomain(ctx: OrgCtx, project: ProjectRow, id: string): Promise<DomainRow> {
  return findProjectRecord(ctx.deps.db, "domains", "dom", project.id, id, "domain");
}

export async function deleteDomain({ ctx, projectSlug, id }: { ctx: OrgCtx; projectSlug: string; id: string }) {
  authorize(ctx, "domains:manage");
  const project = await findProject(ctx, projectSlug);
  const domain = await findDomain(ctx, project, id);
  await inOrgTransaction(ctx, async (trx) => {
    await trx.deleteFrom("domains").where("id", "=", domain.id).execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "domain.deleted",
      target: { type: "domain", id: domain.id },
      data: { projectId: project.id, hostname: domain.hostname },
    });
  });
  forgetHost(domain.hostname);
}

/**
 * Looks the domain's TXT record up now: a match makes it active, else it keeps (or, when it had
 * failed, stays) its status with `error` saying what was found; the re-check job's backoff
 * starts over.
 */
export async function verifyDomain({ ctx, projectSlug, id }: { ctx: OrgCtx; projectSlug: string; id: string }) {
  authorize(ctx, "domains:manage");
  const project = await findProject(ctx, projectSlug);
  const domain = await findDomain(ctx, project, id);
  if (domain.status === "active") return { domain: toDomain(domain, ctx.deps) };
  const result = await checkDomain(ctx.deps, domain);
  const settled = await settleCheck(ctx.deps, domain, project, result, { manual: true }, (trx, entry) =>
    recordAudit(trx, ctx, entry),
  );
  return { domain: toDomain(settled, ctx.deps) };
}

function checkDomain(deps: Deps, domain: DomainRow): Promise<ChallengeResult> {
  return checkChallenge(deps.config, `${CHALLENGE_PREFIX}.${domain.hostname}`, `plinth-verification=${domain.token}`);
}

type AuditEntry = Parameters<typeof recordSystemAudit>[2];

/**
 * Writes a check's outcome: active on a match (unless the name became active elsewhere first),
 * else the error and the next check. `manual`: asked for through the API (the backoff starts
 * over; a failed domain stays failed unless it matched).
 */
async function settleCheck(
  deps: Deps,
  domain: DomainRow,
  project: Pick<ProjectRow, "id" | "slug" | "org_id">,
  result: ChallengeResult,
  { manual }: { manual: boolean },
  audit: (trx: Db, entry: AuditEntry) => Promise<void>,
): Promise<DomainRow> {
  const now = deps.clock.now();
  const at = now.toISOString();
  const miss = async (error: string) => {
    const attempts = manual ? 0 : domain.attempts + 1;
    const row = await deps.db
      .updateTable("domains")
      .set({
        error,
        last_checked_at: at,
        attempts,
        next_check_at: domain.status === "failed" ? null : new Date(now.getTime() + backoffMs(attempts)).toISOString(),
      })
      .where("id", "=", domain.id)
      .returningAll()
      .executeTakeFirst();
    return row ?? { ...domain, error, last_checked_at: at };
  };
  if (!result.ok) return miss(result.error);
  try {
    const settled = await deps.db.transaction().execute(async (trx) => {
      if (await activeElsewhere(trx, domain.hostname, domain.project_id)) {
        throw new ConflictError("active elsewhere");
      }
      const row = await trx
        .updateTable("domains")
        .set({ status: "active", verified_at: at, last_checked_at: at, error: null, next_check_at: null })
        .where("id", "=", domain.id)
        .where("status", "!=", "active")
        .returningAll()
        .executeTakeFirst();
      if (!row) return { ...domain, status: "active" };
      await audit(trx, {
        orgId: project.org_id,
        action: "domain.verified",
        target: { type: "domain", id: domain.id },
        data: { projectId: project.id, hostname: domain.hostname },
      });
      await emitOrgEvent(trx, deps, {
        orgId: project.org_id,
        kind: "domain.verified",
        payload: { domainId: domain.id, hostname: domain.hostname, projectId: project.id, projectSlug: project.slug },
      });
      return row;
    });
    // Served here at once, once committed (other processes within seconds, see hosts.ts).
    forgetHost(domain.hostname);
    return settled;
  } catch (error) {
    if (error instanceof ConflictError || isUniqueViolation(error)) {
      return miss(`the TXT record matches, but ${domain.hostname} is active on another project`);
    }
    throw error;
  }
}

/**
 * The `domains.recheck` job: looks pending domains up again when their backoff has passed, and
 * marks those still unverified after DOMAIN_VERIFY_DAYS `failed`, notifying the org's admins.
 */
export async function recheckDomains(deps: Deps): Promise<void> {
  const now = deps.clock.now();
  const due = await deps.db
    .selectFrom("domains")
    .innerJoin("projects", "projects.id", "domains.project_id")
    .selectAll("domains")
    .select(["projects.slug as project_slug", "projects.org_id as org_id"])
    .where("domains.status", "=", "pending")
    .where("domains.next_check_at", "<=", now.toISOString())
    .where("projects.deleted_at", "is", null)
    .orderBy("domains.next_check_at")
    .limit(RECHECK_BATCH)
    .execute();
  const deadline = now.getTime() - deps.config.domainVerifyDays * DAY_MS;
  for (const { project_slug, org_id, ...domain } of due) {
    const project = { id: domain.project_id, slug: project_slug, org_id };
    const result = await checkDomain(deps, domain);
    if (!result.ok && Date.parse(domain.created_at) <= deadline) {
      const error = `not verified within ${deps.config.domainVerifyDays} days: ${result.error}`;
      await deps.db.transaction().execute(async (trx) => {
        const failed = await trx
          .updateTable("domains")
          .set({ status: "failed", error, last_checked_at: now.toISOString(), next_check_at: null })
          .where("id", "=", domain.id)
          .where("status", "=", "pending")
          .executeTakeFirst();
        if (Number(failed.numUpdatedRows) === 0) return;
        await recordSystemAudit(trx, deps, {
          orgId: org_id,
          action: "domain.failed",
          target: { type: "domain", id: domain.id },
          data: { projectId: project.id, hostname: domain.hostname },
        });
        await notifyOrgAdmins(trx, deps, {
          orgId: org_id,
          kind: "domain.failed",
          title: `Domain ${domain.hostname} could not be verified`,
          body: error,
          data: { domainId: domain.id, projectId: project.id, hostname: domain.hostname },
        });
      });
      continue;
    }
    await settleCheck(deps, domain, project, result, { manual: false }, (trx, entry) =>
      recordSystemAudit(trx, deps, entry),
    );
  }
}

export function domainJobs(deps: Deps): JobHandlers {
  return { "domains.recheck": { handle: () => recheckDomains(deps) } };
}

export const domainSchedule: RecurringJob[] = [
  { name: "domains.recheck", everyMs: MINUTE_MS, kind: "domains.recheck" },
];
