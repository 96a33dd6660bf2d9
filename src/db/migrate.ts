import { DEFAULT_MIGRATION_TABLE, type Migration, type MigrationProvider, Migrator, sql } from "kysely";
import { type DatabaseHandle, type Dialect, isUniqueViolation } from "./database.ts";
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
  };
}

class StaticMigrationProvider implements MigrationProvider {
  constructor(private readonly dialect: Dialect) {}

  async getMigrations(): Promise<Record<string, Migration>> {
    return migrations(this.dialect);
  }
}

/**
 * Brings the schema up to date. Safe to run from several processes at once: Kysely's migrator
 * takes a lock (an advisory lock on PostgreSQL) before it looks at what has been applied.
 */
export async function migrateToLatest(handle: DatabaseHandle, schema?: string): Promise<void> {
  if (handle.dialect === "postgres" && schema) {
    // "if not exists" is not safe against a concurrent create: processes starting together on a
    // new schema can lose that race (a unique violation on pg_namespace), with the schema made.
    await sql`create schema if not exists ${sql.id(schema)}`.execute(handle.db).catch((error: unknown) => {
      if (!isUniqueViolation(error)) throw error;
    });
  }
  if (await upToDate(handle, schema)) return;
  const migrator = new Migrator({
    db: handle.db,
    provider: new StaticMigrationProvider(handle.dialect),
    ...(handle.dialect === "postgres" && schema ? { migrationTableSchema: schema } : {}),
  });
  // Kysely's migrator looks its tables up by introspecting every schema of the database; a
  // workspace schema dropped at that moment (a purge, a failed provisioning's clean-up) makes the
  // lookup fail with "schema … does not exist". Nothing was changed, so it is simply tried again.
  let outcome = await migrator.migrateToLatest();
  for (let attempt = 1; attempt < 5 && isVanishedSchema(outcome.error); attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    outcome = await migrator.migrateToLatest();
  }
  const { error, results } = outcome;
  if (error) {
    const failed = results?.find((result) => result.status === "Error");
    // No migration failed when the database could not be reached or read at all.
    const what = failed ? `migration ${failed.migrationName} failed` : "could not migrate the database";
    throw new Error(`${what}: ${String(error)}`, { cause: error });
  }
}

/**
 * Whether every migration has been applied, read straight from Kysely's table. Kysely's migrator
 * first introspects every table of every schema to find its own, which on PostgreSQL with a
 * schema per workspace takes seconds per thousand projects: a start with nothing to apply (most
 * starts) need not pay for it.
 */
async function upToDate(handle: DatabaseHandle, schema: string | undefined): Promise<boolean> {
  const table =
    handle.dialect === "postgres" && schema
      ? sql`${sql.id(schema)}.${sql.id(DEFAULT_MIGRATION_TABLE)}`
      : sql.id(DEFAULT_MIGRATION_TABLE);
  try {
    const { rows } = await sql<{ name: string }>`select name from ${table}`.execute(handle.db);
    const applied = new Set(rows.map((row) => row.name));
    return Object.keys(migrations(handle.dialect)).every((name) => applied.has(name));
  } catch {
    // No such table yet (a new database): the migrator makes it.
    return false;
  }
}

function isVanishedSchema(error: unknown): boolean {
  return error instanceof Error && /schema "[^"]+" does not exist/.test(error.message);
}
