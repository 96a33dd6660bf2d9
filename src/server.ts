import type { Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type Http2Bindings, type HttpBindings, serve } from "@hono/node-server";
import type { Hono } from "hono";
import { createApp } from "./app.ts";
import { createAuth } from "./auth/better-auth.ts";
import { resolveAuthSecret } from "./auth/secret.ts";
import { type Clock, systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import { type DatabaseHandle, openDatabase } from "./db/database.ts";
import { migrateToLatest } from "./db/migrate.ts";
import type { Deps } from "./deps.ts";
import { invitationJobs } from "./domains/members/service.ts";
import { projectJobs, projectSchedule } from "./domains/projects/jobs.ts";
import { deliveryJobs, deliverySchedule } from "./domains/webhooks/delivery.ts";
import { WorkspaceDatabases } from "./domains/workspace/databases.ts";
import { dispatchJobs, dispatchSchedule, WorkspaceDispatcher } from "./domains/workspace/dispatch.ts";
import type { AppEnv } from "./http/context.ts";
import { RateLimiter } from "./http/rate-limit.ts";
import { maintenanceJobs, maintenanceSchedule } from "./jobs/maintenance.ts";
import { JobQueue } from "./jobs/queue.ts";
import { Worker } from "./jobs/worker.ts";
import { createOutboundClient } from "./lib/outbound.ts";
import { createLogger, type Logger } from "./logger.ts";
import { createMailer } from "./mail/mailer.ts";

export interface StartOptions {
  config: Config;
  clock?: Clock;
  log?: Logger;
}

/** Opens the database (applying migrations) and builds what every part of Plinth depends on. */
async function openDeps({ config, clock = systemClock, log = createLogger(config) }: StartOptions) {
  const database = openDatabase(config);
  await migrateToLatest(database, config.databaseSchema);
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
  };
  return { deps, database };
}

/** Open workspace databases kept per process (least recently used closed first). */
const WORKSPACE_CACHE_SIZE = 256;

/** The job handlers and recurring jobs of every domain. */
function createWorker(deps: Deps, dispatcher: WorkspaceDispatcher): Worker {
  return new Worker(
    deps,
    {
      ...maintenanceJobs(deps),
      ...invitationJobs(deps),
      ...projectJobs(deps),
      ...deliveryJobs(deps),
      ...dispatchJobs(dispatcher),
    },
    {
      concurrency: deps.config.workers,
      pollMs: deps.config.workerPollMs,
      recurring: [...maintenanceSchedule, ...projectSchedule, ...deliverySchedule, ...dispatchSchedule],
    },
  );
}

async function closeDeps(deps: Deps, database: DatabaseHandle): Promise<void> {
  deps.mailer.close();
  await deps.outbound.close();
  await database.close();
}

export interface RunningServer {
  url: string;
  port: number;
  deps: Deps;
  app: Hono<AppEnv>;
  /** Stops accepting, lets in-flight requests and jobs finish (bounded), then closes the database. */
  close(): Promise<void>;
}

/** Serves the API, and runs `config.workers` job slots in the same process. */
export async function startServer(options: StartOptions): Promise<RunningServer> {
  const { deps, database } = await openDeps(options);
  const { config, log, clock } = deps;
  const auth = createAuth({
    db: deps.db,
    dialect: deps.dialect,
    config,
    secret: resolveAuthSecret(config.authSecret, config.dataDir),
    log,
  });
  const limiter = new RateLimiter(deps.db, clock, log);
  limiter.start();
  const databases = new WorkspaceDatabases(deps, WORKSPACE_CACHE_SIZE);
  const dispatcher = new WorkspaceDispatcher(deps, databases);
  const worker = config.workers > 0 ? createWorker(deps, dispatcher) : undefined;
  await worker?.start();
  // Events a crash left in workspace outboxes go out now rather than at the next daily sweep.
  if (worker) void dispatcher.sweep(true).catch((error: unknown) => log.error({ err: error }, "start-up sweep failed"));
  const app = createApp({ deps, auth, limiter, workspace: { deps, auth, databases, dispatcher, limiter } });

  const inFlight = new InFlight();
  const server = await new Promise<HttpServer>((resolve) => {
    // This server is HTTP/1.1, so the bindings are always the node:http request and response.
    const fetch = (request: Request, env: HttpBindings | Http2Bindings) =>
      inFlight.track(() => app.fetch(request, env as HttpBindings));
    const s = serve({ fetch, port: config.port, hostname: config.host }, () => resolve(s as HttpServer));
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ port, dialect: deps.dialect, workers: config.workers }, "plinth listening");

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      await Promise.all([
        drainHttp(server, inFlight, config.shutdownTimeoutMs),
        worker?.stop(config.shutdownTimeoutMs),
      ]);
      await dispatcher.settle();
      await limiter.stop();
      await databases.closeAll();
      await closeDeps(deps, database);
    })();
    return closing;
  };

  const host = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  return { url: `http://${host}:${port}`, port, deps, app, close };
}

export interface RunningWorker {
  deps: Deps;
  close(): Promise<void>;
}

/** Runs jobs only (`plinth worker`), with `config.workers` slots (at least one). */
export async function startWorker(options: StartOptions): Promise<RunningWorker> {
  const { deps, database } = await openDeps(options);
  const workerDeps = { ...deps, config: { ...deps.config, workers: Math.max(1, deps.config.workers) } };
  const dispatcher = new WorkspaceDispatcher(workerDeps, new WorkspaceDatabases(workerDeps, WORKSPACE_CACHE_SIZE));
  const worker = createWorker(workerDeps, dispatcher);
  await worker.start();
  deps.log.info({ worker: worker.id, dialect: deps.dialect }, "plinth worker running");
  let closing: Promise<void> | undefined;
  return {
    deps,
    close: () => {
      closing ??= worker.stop(deps.config.shutdownTimeoutMs).then(() => closeDeps(deps, database));
      return closing;
    },
  };
}

/** Counts requests whose handlers are still running, which can outlive their connection. */
class InFlight {
  private count = 0;
  private idle: (() => void) | undefined;

  async track(handle: () => Response | Promise<Response>): Promise<Response> {
    this.count++;
    try {
      return await handle();
    } finally {
      this.count--;
      if (this.count === 0) this.idle?.();
    }
  }

  drained(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.idle = resolve;
    });
  }
}

/**
 * Stops accepting connections and waits (bounded) until every connection has closed and every
 * handler has returned: a client that hangs up does not stop its handler, which must not find
 * the database closed under it.
 */
function drainHttp(server: HttpServer, inFlight: InFlight, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    // Keep-alive connections go idle as their last request finishes; close them as they do.
    const reaper = setInterval(() => server.closeIdleConnections(), 50);
    const deadline = setTimeout(() => {
      clearInterval(reaper);
      server.closeAllConnections();
      resolve();
    }, timeoutMs);
    deadline.unref();
    server.close(() => {
      inFlight.drained().then(() => {
        clearInterval(reaper);
        clearTimeout(deadline);
        resolve();
      });
    });
    server.closeIdleConnections();
  });
}
