import type { Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { Hono } from "hono";
import { createApp } from "./app.ts";
import { createAuth } from "./auth/better-auth.ts";
import { resolveAuthSecret } from "./auth/secret.ts";
import { type Clock, systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import { openDatabase } from "./db/database.ts";
import { migrateToLatest } from "./db/migrate.ts";
import type { Deps } from "./deps.ts";
import type { AppEnv } from "./http/context.ts";
import { RateLimiter } from "./http/rate-limit.ts";
import { createLogger, type Logger } from "./logger.ts";
import { createMailer } from "./mail/mailer.ts";

export interface RunningServer {
  url: string;
  port: number;
  deps: Deps;
  app: Hono<AppEnv>;
  /** Stops accepting, lets in-flight requests finish (bounded), flushes counters, closes the database. */
  close(): Promise<void>;
}

export interface StartOptions {
  config: Config;
  clock?: Clock;
  log?: Logger;
}

/** Opens the database, applies migrations and serves the API. Used by `plinth` and by the tests. */
export async function startServer({ config, clock = systemClock, log = createLogger(config) }: StartOptions) {
  const database = openDatabase(config);
  await migrateToLatest(database, config.databaseSchema);
  const mailer = createMailer({ smtpUrl: config.smtpUrl, from: config.mailFrom, log });
  const deps: Deps = { db: database.db, dialect: database.dialect, config, clock, log, mailer };
  const auth = createAuth({
    db: database.db,
    dialect: database.dialect,
    config,
    secret: resolveAuthSecret(config.authSecret, config.dataDir),
    log,
  });
  const limiter = new RateLimiter(database.db, clock, log);
  limiter.start();
  const app = createApp({ deps, auth, limiter });

  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, () => resolve(s));
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ port, dialect: database.dialect }, "plinth listening");

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      await new Promise<void>((resolve) => {
        const http = server as HttpServer;
        // Keep-alive connections go idle as their last request finishes; close them as they do.
        const reaper = setInterval(() => http.closeIdleConnections(), 50);
        const deadline = setTimeout(() => http.closeAllConnections(), config.shutdownTimeoutMs);
        deadline.unref();
        http.close(() => {
          clearInterval(reaper);
          clearTimeout(deadline);
          resolve();
        });
        http.closeIdleConnections();
      });
      await limiter.stop();
      mailer.close();
      await database.close();
    })();
    return closing;
  };

  const host = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  return { url: `http://${host}:${port}`, port, deps, app, close } satisfies RunningServer;
}
