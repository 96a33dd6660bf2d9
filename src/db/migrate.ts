import { type Migration, sql } from "kysely";
import { type DatabaseHandle, type Db, type Dialect, isUniqueViolation } from "./database.ts";
import { foundation } from "./migrations/0001-foundation.ts";
import { jobs } from "./migrations/0002-jobs.ts";
import { projectsAndWebhooks } from "./migrations/0003-projects-webhooks.ts";
import { workspaceDispatch } from "./migrations/0004-workspace-dispatch.ts";
import { jobKinds } from "./migrations/0005-job-kinds.ts";
import { leanDeliveries } from "./migrations/0006-lean-deliveries.ts";
import { forgetIntegrationCredentials } from "./migrations/0007-forget-integration-credentials.ts";
import { fewerIndexWrites } from "./migrations/0008-fewer-index-writes.ts";
import { idempotencyKeys } from "./migrations/0009-idempotency-keys.ts";
import { attemptUrls } from "./migrations/0010-attempt-urls.ts";
import { projectsByOrg } from "./migrations/0011-projects-by-org.ts";
import { historySince } from "./migrations/0012-history-since.ts";
import { backups } from "./migrations/0013-backups.ts";
import { branches } from "./migrations/0014-branches.ts";
import { tenantErrors } from "./migrations/0015-tenant-errors.ts";
import { domains } from "./migrations/0016-domains.ts";
import { usageAndAlarms } from "./migrations/0017-usage-alarms.ts";
import { billing } from "./migrations/0018-billing.ts";
import { scim } from "./migrations/0019-scim.ts";
import { sso } from "./migrations/0020-sso.ts";
import { ssoIdentities } from "./migrations/0021-sso-identities.ts";
import { identityConsent } from "./migrations/0022-identity-consent.ts";
import { tenantErrorsAuthenticated } from "./migrations/0023-tenant-errors-authenticated.ts";
import { projectSignUp } from "./migrations/0024-project-sign-up.ts";

/** The migration set, in order. Each entry is written once and never edited after it ships. */
function migrations(dialect: Dialect): Record<string, Migration> {
  return {
    "0001-foundation": foundation(dialect),
    "0002-jobs": jobs(),
    "0003-projects-webhooks": projectsAndWebhooks(),
    "0004-workspace-dispatch": workspaceDispatch(),
    "0005-job-kinds": jobKinds(),
    "0006-lean-deliveries": leanDeliveries(dialect),
    "0007-forget-integration-credentials": forgetIntegrationCredentials(),
    "0008-fewer-index-writes": fewerIndexWrites(),
    "0009-idempotency-keys": idempotencyKeys(),
    "0010-attempt-urls": attemptUrls(),
    "0011-projects-by-org": projectsByOrg(),
    "0012-history-since": historySince(),
    "0013-backups": backups(),
    "0014-branches": branches(),
    "0015-tenant-errors": tenantErrors(),
    "0016-domains": domains(),
    "0017-usage-alarms": usageAndAlarms(),
    "0018-billing": billing(),
    "0019-scim": scim(),
    "0020-sso": sso(),
    "0021-sso-identities": ssoIdentities(),
    "0022-identity-consent": identityConsent(),
    "0023-tenant-errors-authenticated": tenantErrorsAuthenticated(),
    "0024-project-sign-up": projectSignUp(),
  };
}

/** Where applied migrations are listed: Kysely's migrator's table, which earlier releases used. */
const MIGRATION_TABLE = "kysely_migration";

/**
 * Brings the schema up to date: every migration not yet listed as applied runs, in order, in one
 * transaction with the rows that list them. Safe to run from several processes at once: on
 * PostgreSQL an advisory lock (per schema) makes them take turns, on SQLite the transaction's
 * write lock does. Nothing is introspected: Kysely's own migrator first lists every table of every
 * schema to find its table, which on PostgreSQL, with a schema per workspace, took seconds per
 * thousand projects and failed when a workspace was dropped meanwhile.
 */
export async function migrateToLatest(handle: DatabaseHandle, schema?: string): Promise<void> {
  const postgres = handle.dialect === "postgres";
  if (postgres && schema) {
    // "if not exists" is not safe against a concurrent create: processes starting together on a
    // new schema can lose that race (a unique violation on pg_namespace), with the schema made.
    await sql`create schema if not exists ${sql.id(schema)}`.execute(handle.db).catch((error: unknown) => {
      if (!isUniqueViolation(error)) throw error;
    });
  }
  const table = postgres && schema ? sql`${sql.id(schema)}.${sql.id(MIGRATION_TABLE)}` : sql.id(MIGRATION_TABLE);
  const pending = async (db: Db) => {
    const { rows } = await sql<{ name: string }>`select name from ${table}`.execute(db);
    const applied = new Set(rows.map((row) => row.name));
    return Object.entries(migrations(handle.dialect)).filter(([name]) => !applied.has(name));
  };
  // Most starts have nothing to apply: one read, no lock.
  if ((await pending(handle.db).catch(() => undefined))?.length === 0) return;
  let current = "";
  try {
    await handle.db.transaction().execute(async (trx) => {
      if (postgres)
        await sql`select pg_advisory_xact_lock(hashtext(${`plinth.migrate:${schema ?? "public"}`}))`.execute(trx);
      await sql`create table if not exists ${table} (name varchar(255) primary key, timestamp varchar(255) not null)`.execute(
        trx,
      );
      for (const [name, migration] of await pending(trx)) {
        current = name;
        await migration.up(trx);
        await sql`insert into ${table} (name, timestamp) values (${name}, ${new Date().toISOString()})`.execute(trx);
      }
    });
  } catch (error) {
    // No migration had begun when the database could not be reached or read at all.
    const what = current ? `migration ${current} failed` : "could not migrate the database";
    throw new Error(`${what}: ${String(error)}`, { cause: error });
  }
}
