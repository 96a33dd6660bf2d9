import { randomUUID } from "node:crypto";
import { createServer, type Server as HttpServer, type ServerResponse, STATUS_CODES } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { getRequestListener, type Http2Bindings, type HttpBindings, RequestError } from "@hono/node-server";
import type { Hono } from "hono";
import { createApp } from "../app.ts";
import { createAuth } from "../auth/better-auth.ts";
import { ConsoleSessions } from "../auth/console-sessions.ts";
import { resolveAuthSecret } from "../auth/secret.ts";
import type { Deps } from "../deps.ts";
import { customDomainRouter } from "../domains/domains/hosts.ts";
import { TenantErrorRecorder } from "../domains/tenant-errors/recorder.ts";
import { UsageMeter } from "../domains/usage/meter.ts";
import { WorkspaceDispatcher } from "../domains/workspace/dispatch.ts";
import type { WorkspacePool } from "../domains/workspace/pool.ts";
import { localStore } from "../domains/workspace/store.ts";
import type { ErrorCode } from "../errors.ts";
import type { AppEnv } from "../http/context.ts";
import { errorBody } from "../http/envelope.ts";
import { RateLimiter } from "../http/rate-limit.ts";
import { SIGN_IN_FAILURE_WINDOW_MS, SignInFailures } from "../http/sign-in-failures.ts";
import { readyJobs } from "../jobs/queue.ts";
import { metricsText, setGaugeSources } from "../lib/metrics.ts";
import { closeDeps, createWorker, openDeps, type StartOptions, workspacePool } from "./runtime.ts";
import { WorkerThread } from "./worker-thread.ts";

export { type RunningWorker, type StartOptions, startWorker } from "./runtime.ts";

export interface RunningServer {
  url: string;
  port: number;
  deps: Deps;
  app: Hono<AppEnv>;
  /** The workspaces this process has open. */
  workspaces: WorkspacePool;
  /** Where this process counts workspace requests (flush it to see them in usage at once). */
  usage: UsageMeter;
  /** Stops accepting, lets in-flight requests and jobs finish (bounded), then closes the database. */
  close(): Promise<void>;
}

/**
 * Serves the API, and runs `config.workers` job slots in the same process: on a worker thread
 * of their own (`config.workerThread`), or on the API's event loop. A server given its own clock
 * (the tests' manual clock) runs them on the event loop, where that clock reaches them.
 */
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
  const sessions = new ConsoleSessions(deps, auth);
  const limiter = new RateLimiter(deps.db, clock, log);
  limiter.start();
  const failureLimiter = new RateLimiter(deps.db, clock, log, SIGN_IN_FAILURE_WINDOW_MS);
  failureLimiter.start();
  const signInFailures = new SignInFailures(failureLimiter, config.signInFailuresPerAccount);
  const pool = workspacePool(deps);
  const store = localStore(pool, deps.dialect);
  const threaded = config.workers > 0 && config.workerThread && options.clock === undefined;
  const thread = threaded ? await WorkerThread.start(deps, store) : undefined;
  const dispatcher = new WorkspaceDispatcher(deps, store, {
    ...(thread ? { forward: (projectId: string) => thread.dispatch(projectId) } : {}),
  });
  const worker = config.workers > 0 && !thread ? createWorker(deps, dispatcher, store) : undefined;
  await worker?.start();
  // Events a crash left in workspace outboxes go out now rather than at the next recurring sweep
  // (a worker thread sweeps as it starts).
  if (worker) void dispatcher.sweep().catch((error: unknown) => log.error({ err: error }, "start-up sweep failed"));
  const inFlight = new InFlight();
  const routeCustomDomain = customDomainRouter(deps);
  const tenantErrors = new TenantErrorRecorder(deps);
  const meter = new UsageMeter(deps);
  const app = createApp({
    deps,
    auth,
    sessions,
    limiter,
    signInFailures,
    workspace: { deps, sessions, pool, dispatcher, limiter, signInFailures, errors: tenantErrors, meter },
    shuttingDown: () => inFlight.closing,
    metrics: async () => metricsText(thread ? [await thread.metrics()] : []),
  });
  const unsetGauges = setGaugeSources({ readyJobs: () => readyJobs(deps), workspacesOpen: () => pool.size });
  const server = await new Promise<HttpServer>((resolve, reject) => {
    // This server is HTTP/1.1, so the bindings are always the node:http request and response.
    const fetch = (request: Request, env: HttpBindings | Http2Bindings) => {
      const { incoming, outgoing } = env as HttpBindings;
      // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400. Node would answer it itself,
      // with no body (see `requireHostHeader` below).
      if (incoming.headers.host === undefined && incoming.httpVersion === "1.1") {
        return badRequest("malformed request: an HTTP/1.1 request needs a Host header");
      }
      return inFlight.track(outgoing, async () => {
        // A custom domain's host: `/api/…` there is its project's workspace API.
        const lookup = routeCustomDomain(request.url, incoming.headers.host);
        const rewritten =
          lookup &&
          (await lookup.catch((error: unknown) => {
            log.error({ err: error }, "looking a custom domain up failed");
            return null;
          }));
        const routed = rewritten
          ? new Request(rewritten, {
              method: request.method,
              headers: request.headers,
              ...(request.method === "GET" || request.method === "HEAD" ? {} : { body: request.body, duplex: "half" }),
            })
          : request;
        return app.fetch(routed, env as HttpBindings);
      });
    };
    const s = createServer(
      { requireHostHeader: false },
      getRequestListener(fetch, { hostname: config.host, errorHandler: unreadableRequest }),
    );
    s.on("clientError", answerClientError);
    // The address is taken, or HOST is not an address of this machine.
    s.once("error", (error) => reject(new Error(`cannot listen on ${config.host}:${config.port}: ${error.message}`)));
    s.listen(config.port, config.host, () => resolve(s));
  });
  const port = (server.address() as AddressInfo).port;
  log.info(
    { port, dialect: deps.dialect, workers: config.workers, workerThread: thread !== undefined },
    "plinth listening",
  );

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      inFlight.close();
      // Still accepting, so that what a load balancer sends before it notices (by health's 503
      // or by the closed connections) is served rather than reset in the listener's backlog.
      if (config.shutdownDelayMs > 0) await sleep(config.shutdownDelayMs);
      await Promise.all([
        drainHttp(server, inFlight, config.shutdownTimeoutMs),
        worker?.stop(config.shutdownTimeoutMs),
        thread?.stop(),
      ]);
      await dispatcher.settle();
      await tenantErrors.close();
      await meter.close();
      await Promise.all([limiter.stop(), failureLimiter.stop()]);
      await pool.closeAll();
      await closeDeps(deps, database);
      unsetGauges();
    })();
    return closing;
  };

  const host = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  return { url: `http://${host}:${port}`, port, deps, app, workspaces: pool, usage: meter, close };
}

/**
 * Counts requests whose handlers are still running, which can outlive their connection. Once
 * closing, their responses (and those of any that arrive meanwhile on a kept-alive connection) say
 * `Connection: close`, so that no client sends another request on a connection about to close.
 */
class InFlight {
  private count = 0;
  private idle: (() => void) | undefined;
  private ending = false;

  /** Whether `close` has been called. */
  get closing(): boolean {
    return this.ending;
  }

  async track(response: ServerResponse | undefined, handle: () => Response | Promise<Response>): Promise<Response> {
    this.count++;
    try {
      return await handle();
    } finally {
      // The response is written once this returns, so closing by now is early enough. (Not a set
      // of the live responses: keying a Set by each ServerResponse made every request ~10% dearer
      // in bench/workspace.)
      if (this.ending && response) lastOnConnection(response);
      this.count--;
      if (this.count === 0) this.idle?.();
    }
  }

  /** From now on every response ends its connection. */
  close(): void {
    this.ending = true;
  }

  drained(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.idle = resolve;
    });
  }
}

/**
 * A request Node parsed but that makes no Fetch API request (a malformed Host, say): 400 in the
 * envelope, like every other error. Anything else here would be a fault of the adapter: 500.
 */
function unreadableRequest(error: unknown): Response {
  return error instanceof RequestError
    ? badRequest(`malformed request: ${error.message}`)
    : refusal(500, "INTERNAL", "internal error");
}

function badRequest(message: string): Response {
  return refusal(400, "BAD_REQUEST", message);
}

/** An answer made before the app sees the request; the connection ends with it. */
function refusal(status: number, code: ErrorCode, message: string): Response {
  const requestId = randomUUID();
  return Response.json(errorBody(code, message, undefined, requestId), {
    status,
    headers: { connection: "close", "x-request-id": requestId },
  });
}

/** What Node's HTTP parser refused (a malformed request line or header, headers over 16 KiB, a timeout). */
const CLIENT_ERRORS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, "request headers too large"],
  ERR_HTTP_REQUEST_TIMEOUT: [408, "request timed out"],
};

/**
 * Answers what Node's parser refused with the envelope, where Node would answer with no body, then
 * drops the connection as Node does. Not when a response is already going out on it (a request
 * pipelined behind a download, say): an answer would land inside that response's body.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  const sending = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  if (!socket.writable || sending || error.code === "ECONNRESET") {
    socket.destroy();
    return;
  }
  const [status, message] = CLIENT_ERRORS[error.code ?? ""] ?? [400, "malformed HTTP request"];
  const requestId = randomUUID();
  const body = JSON.stringify(errorBody("BAD_REQUEST", message, undefined, requestId));
  // An answer to HEAD has no body (RFC 9110 §9.3.2), and the chunk the parser refused may not
  // show the method: the request line came in an earlier chunk, or is itself what was refused,
  // or there is none (a timeout). Only a request line seen to name a method decides: HEAD gets
  // the headers alone, others a body of the length announced. Otherwise the body is sent with no
  // length, ended by closing the connection (RFC 9112 §6.3), which a HEAD client never reads.
  const packet = (error as { rawPacket?: Buffer }).rawPacket?.subarray(0, 16).toString("latin1") ?? "";
  const method = /^([A-Z]+) /.exec(packet)?.[1];
  const framing = method === undefined ? "" : `Content-Length: ${Buffer.byteLength(body)}\r\n`;
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
      `${framing}X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${method === "HEAD" ? "" : body}`,
    () => socket.destroy(),
  );
}

/** Node ends the connection after a response that says `Connection: close`. */
function lastOnConnection(response: ServerResponse): void {
  if (!response.headersSent) response.setHeader("Connection", "close");
}

/**
 * Stops accepting connections and waits (bounded) until every connection has closed and every
 * handler has returned: a client that hangs up does not stop its handler, which must not find
 * the database closed under it.
 */
function drainHttp(server: HttpServer, inFlight: InFlight, timeoutMs: number): Promise<void> {
  inFlight.close();
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
