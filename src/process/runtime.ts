import { resolveAuthSecret } from "../auth/secret.ts";
import { type Clock, systemClock } from "../clock.ts";
import type { Config } from "../config.ts";
import { type DatabaseHandle, openDatabase } from "../db/database.ts";
import { migrateToLatest } from "../db/migrate.ts";
import type { Deps } from "../deps.ts";
import { alarmJobs, alarmSchedule } from "../domains/alarms/service.ts";
import { historyJobs, historySchedule } from "../domains/backups/jobs.ts";
import { billingJobs, billingSchedule } from "../domains/billing/jobs.ts";
import { branchJobs, branchSchedule } from "../domains/branches/jobs.ts";
import { domainJobs, domainSchedule } from "../domains/domains/service.ts";
import { exportJobs, exportSchedule } from "../domains/exports/jobs.ts";
import { resealSsoSecrets } from "../domains/identity/sso/service.ts";
import { resealIntegrationSecrets } from "../domains/integrations/service.ts";
import { invitationJobs } from "../domains/members/jobs.ts";
import { projectJobs, projectSchedule } from "../domains/projects/jobs.ts";
import { tenantErrorJobs, tenantErrorSchedule } from "../domains/tenant-errors/service.ts";
import { usageJobs, usageSchedule } from "../domains/usage/service.ts";
import { deliveryJobs, deliverySchedule } from "../domains/webhooks/delivery-jobs.ts";
import { dispatchJobs, dispatchSchedule, WorkspaceDispatcher } from "../domains/workspace/dispatch.ts";
import { fileJobs, fileSchedule } from "../domains/workspace/files.ts";
import { defaultMaxOpen, WorkspacePool } from "../domains/workspace/pool.ts";
import { localStore, type WorkspaceStore } from "../domains/workspace/store.ts";
import { maintenanceJobs, maintenanceSchedule } from "../jobs/maintenance.ts";
import { JobQueue } from "../jobs/queue.ts";
import { Worker } from "../jobs/worker.ts";
import { createOutboundClient } from "../lib/outbound.ts";
import { SecretBox } from "../lib/secret-box.ts";
import { createLogger, type Logger } from "../logger.ts";
import { createMailer } from "../mail/mailer.ts";
import { openBlobStore, prepareBlobStore } from "../storage/open.ts";

export interface StartOptions {
  config: Config;
  clock?: Clock;
  log?: Logger;
}

/**
 * Opens the database and builds what every part of Plinth depends on. `migrate: false` is for a
 * worker thread, whose server applied the migrations before starting it.
 */
export async function openDeps(
  { config, clock = systemClock, log = createLogger(config) }: StartOptions,
  { migrate = true }: { migrate?: boolean } = {},
): Promise<{ deps: Deps; database: DatabaseHandle }> {
  const database = openDatabase(config, log);
  if (migrate) await migrateToLatest(database, config.databaseSchema);
  const mailer = createMailer({ smtpUrl: config.smtpUrl, from: config.mailFrom, log });
  const jobs = new JobQueue(database.dialect, clock, config.databaseSchema);
  const outbound = createOutboundClient({
    timeoutMs: config.webhookTimeoutMs,
    allowPrivate: config.allowPrivateWebhookUrls,
  });
  const deps: Deps = {
    db: database.db,
    dialect: database.dialect,
    reader: database.reader,
    config,
    clock,
    log,
    mailer,
    jobs,
    outbound,
    secrets: secretBox(config),
    storage: openBlobStore(config, log),
  };
  // Values sealed under a previous key, or written before sealing: sealed anew with the current one.
  if (migrate) {
    try {
      await prepareBlobStore(deps.storage, log);
      await resealSsoSecrets(deps);
      await resealIntegrationSecrets(deps);
    } catch (error) {
      await database.close();
      throw error;
    }
  }
  return { deps, database };
}

/**
 * What seals secrets at rest: ENCRYPTION_KEY, else a key derived from the auth secret. The auth
 * secret still opens what it sealed once ENCRYPTION_KEY is set, so setting one needs no step.
 */
function secretBox(config: Config): SecretBox {
  const authSecret = resolveAuthSecret(config.authSecret, config.dataDir);
  if (!config.encryptionKey) return new SecretBox(authSecret, config.previousEncryptionKeys);
  return new SecretBox(config.encryptionKey, [...config.previousEncryptionKeys, authSecret]);
}

export async function closeDeps(deps: Deps, database: DatabaseHandle): Promise<void> {
  deps.mailer.close();
  await deps.outbound.close();
  await database.close();
}

/** The process's pool of open workspaces (see WorkspacePool). */
export function workspacePool(deps: Deps): WorkspacePool {
  return new WorkspacePool(deps, deps.config.workspaceMaxOpen ?? defaultMaxOpen());
}

/** The job handlers and recurring jobs of every domain. */
export function createWorker(deps: Deps, dispatcher: WorkspaceDispatcher, store: WorkspaceStore): Worker {
  return new Worker(
    deps,
    {
      ...maintenanceJobs(deps),
      ...invitationJobs(deps),
      ...projectJobs(deps),
      ...deliveryJobs(deps),
      ...dispatchJobs(dispatcher),
      ...fileJobs(deps, store),
      ...historyJobs(deps, store),
      ...tenantErrorJobs(deps),
      ...domainJobs(deps),
      ...usageJobs(deps),
      ...alarmJobs(deps),
      ...billingJobs(deps),
      ...branchJobs(deps, store),
      ...exportJobs(deps),
    },
    {
      concurrency: deps.config.workers,
      pollMs: deps.config.workerPollMs,
      recurring: [
        ...maintenanceSchedule,
        ...projectSchedule,
        ...deliverySchedule,
        ...dispatchSchedule,
        ...fileSchedule,
        ...historySchedule,
        ...tenantErrorSchedule,
        ...domainSchedule,
        ...usageSchedule,
        ...alarmSchedule,
        ...billingSchedule,
        ...branchSchedule,
        ...exportSchedule,
      ],
    },
  );
}

export interface RunningWorker {
  deps: Deps;
  /** Moves a project's outbox on (its server wrote to it and committed). */
  dispatch(projectId: string): void;
  close(): Promise<void>;
}

export interface WorkerStartOptions {
  /** A worker thread of a server: the server migrated, and outboxes left by a crash are swept at start. */
  inThread?: boolean;
  /**
   * Where workspaces are read: the server's, for its worker thread on SQLite (a process opens each
   * workspace once); else this worker's own pool.
   */
  store?: WorkspaceStore;
}

/** Runs jobs only, with `config.workers` slots (at least one): `plinth worker`, or a server's worker thread. */
export async function startWorker(options: StartOptions, { inThread = false, store }: WorkerStartOptions = {}) {
  const { deps, database } = await openDeps(options, { migrate: !inThread });
  const workerDeps = { ...deps, config: { ...deps.config, workers: Math.max(1, deps.config.workers) } };
  const pool = store ? undefined : workspacePool(workerDeps);
  const workspaces = store ?? localStore(pool as WorkspacePool, deps.dialect);
  const dispatcher = new WorkspaceDispatcher(workerDeps, workspaces);
  const worker = createWorker(workerDeps, dispatcher, workspaces);
  await worker.start();
  // Events a crash left in workspace outboxes go out now rather than at the next recurring sweep.
  void dispatcher.sweep().catch((error: unknown) => deps.log.error({ err: error }, "start-up sweep failed"));
  if (!inThread) deps.log.info({ worker: worker.id, dialect: deps.dialect }, "plinth worker running");
  let closing: Promise<void> | undefined;
  const running: RunningWorker = {
    deps,
    dispatch: (projectId) => dispatcher.schedule(projectId),
    close: () => {
      closing ??= (async () => {
        await worker.stop(deps.config.shutdownTimeoutMs);
        await dispatcher.settle();
        await pool?.closeAll();
        await closeDeps(deps, database);
      })();
      return closing;
    },
  };
  return running;
}
