import { createHash, createHmac, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { SMTPServer } from "smtp-server";
import { expect } from "vitest";
import { ManualClock } from "../src/clock.ts";
import { type Config, loadConfig } from "../src/config.ts";
import { snapshotSchema } from "../src/domains/backups/snapshot.ts";
import { BUILT_IN_PLANS } from "../src/domains/plans/catalog.ts";
import { workspaceSchema } from "../src/domains/projects/workspace-db.ts";
import { ERROR_CODES, type ErrorCode } from "../src/errors.ts";
import { createLogger } from "../src/logger.ts";
import { type RunningServer, startServer } from "../src/process/server.ts";
import type { BlobStore } from "../src/storage/blob-store.ts";

/** Set by `npm test` runs against PostgreSQL; unset means embedded SQLite. */
const POSTGRES_URL = process.env.DATABASE_URL;
export const dialect = POSTGRES_URL ? "postgres" : "sqlite";

/**
 * The catalog tests run on unless they name their own: the built-in one without its cap on
 * projects per org, which most tests pass without meaning to (the cap has its own test, on the
 * built-in catalog: `PLANS_FILE: ""`).
 */
const UNCAPPED_PLANS = (() => {
  const file = path.join(mkdtempSync(path.join(tmpdir(), "plinth-plans-")), "plans.json");
  writeFileSync(
    file,
    JSON.stringify({ plans: BUILT_IN_PLANS.map((plan) => ({ ...plan, limits: { ...plan.limits, projects: null } })) }),
  );
  return file;
})();

export interface TestApp {
  url: string;
  clock: ManualClock;
  server: RunningServer;
  config: Config;
  close(): Promise<void>;
}

/**
 * Starts the real service on an ephemeral port against a fresh database: a new SQLite file, or a
 * new schema in the PostgreSQL database of DATABASE_URL. `env` overrides configuration the way
 * the environment would. `shareDatabaseWith` starts a second server on another app's database,
 * as a second process of one deployment would be (close it before the first).
 */
export async function startApp(
  env: Record<string, string> = {},
  options: { shareDatabaseWith?: TestApp } = {},
): Promise<TestApp> {
  const shared = options.shareDatabaseWith;
  const dataDir = shared ? shared.config.dataDir : mkdtempSync(path.join(tmpdir(), "plinth-test-"));
  const schema = shared
    ? shared.config.databaseSchema
    : POSTGRES_URL
      ? `t_${randomBytes(6).toString("hex")}`
      : undefined;
  const config = loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    AUTH_SECRET: "test-secret-test-secret-test-secret-0123",
    // Jobs run on the test's event loop, where the manual clock reaches them (worker-thread.test.ts
    // turns the thread on).
    WORKER_THREAD: "false",
    PLANS_FILE: UNCAPPED_PLANS,
    ...(POSTGRES_URL ? { DATABASE_URL: POSTGRES_URL, DATABASE_SCHEMA: schema } : {}),
    ...env,
  });
  const clock = new ManualClock();
  // A worker thread keeps time by the system clock: an app with one runs on that clock throughout.
  const server = await startServer({
    config,
    clock: config.workerThread ? undefined : clock,
    log: createLogger(config),
  });
  return {
    url: server.url,
    clock,
    server,
    config,
    async close() {
      await server.close();
      if (shared) return;
      rmSync(dataDir, { recursive: true, force: true });
      if (POSTGRES_URL && schema) {
        const client = new pg.Client({ connectionString: POSTGRES_URL });
        await client.connect();
        // Project (and branch) workspaces live in schemas of their own (ws_<id>) beside the app's.
        for (const table of ["projects", "branches"]) {
          const workspaces = await client
            .query<{ id: string }>(`select id from ${schema}.${table}`)
            .catch(() => ({ rows: [] as { id: string }[] }));
          for (const { id } of workspaces.rows) {
            await client.query(`drop schema if exists ${workspaceSchema(id)} cascade`);
          }
        }
        // Backups' snapshots too (bk_<backup id>).
        const backups = await client
          .query<{ id: string }>(`select id from ${schema}.backups`)
          .catch(() => ({ rows: [] as { id: string }[] }));
        for (const { id } of backups.rows) await client.query(`drop schema if exists ${snapshotSchema(id)} cascade`);
        await client.query(`drop schema if exists ${schema} cascade`);
        await client.end();
      }
    },
  };
}

/** The keys under `prefix` in a deps' blob store (local or S3), sorted. */
export async function storedKeys(deps: { storage: BlobStore }, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const object of deps.storage.list(prefix)) keys.push(object.key);
  return keys.sort();
}

/** Where the local blob store (the default) keeps `key`, for tests that look at the disk. */
export function localPath(config: Config, key: string): string {
  return path.join(config.dataDir, ...key.split("/"));
}

/** Polls `check` until it returns something truthy (and returns that), or fails after `timeoutMs`. */
export async function until<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 10_000,
): Promise<Exclude<T, false | null | undefined | 0 | "">> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as Exclude<T, false | null | undefined | 0 | "">;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Runs `work` on each of `list`, `concurrency` at a time. */
export async function inParallel<T>(list: T[], work: (item: T) => Promise<unknown>, concurrency = 16): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < list.length) await work(list[next++] as T);
    }),
  );
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A lower-case token that keeps names (and so slugs) unique across tests. */
export function tag(): string {
  return randomBytes(4).toString("hex");
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** An HMAC-SHA256 computed here, independently of the code under test, to check signatures with. */
export function hmacHex(secret: string, message: string | Buffer): string {
  return createHmac("sha256", secret).update(message).digest("hex");
}

export interface CallOptions {
  body?: unknown;
  /** Sent as-is instead of JSON-encoding `body`. */
  rawBody?: string;
  cookie?: string;
  token?: string;
  headers?: Record<string, string>;
}

export interface CallResult {
  status: number;
  body: any;
  headers: Headers;
}

/** One HTTP request to the app; JSON in, JSON (or text) out. */
export function call(app: TestApp, method: string, pathname: string, options: CallOptions = {}): Promise<CallResult> {
  return request(`${app.url}/api${pathname}`, method, options);
}

/** One HTTP request to a project's workspace API, `{workspaceUrl}/api`. */
export function callWorkspace(
  app: TestApp,
  projectId: string,
  method: string,
  pathname: string,
  options: CallOptions = {},
): Promise<CallResult> {
  return request(`${app.url}/w/${projectId}/api${pathname}`, method, options);
}

async function request(url: string, method: string, options: CallOptions): Promise<CallResult> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.cookie) headers.cookie = options.cookie;
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.rawBody !== undefined) body = options.rawBody;
  else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  return readResult(await fetch(url, { method, headers, body }));
}

/** A response as `call` returns it: its body parsed when it is JSON, else its text. */
export async function readResult(response: Response): Promise<CallResult> {
  const text = await response.text();
  let parsed: unknown = text;
  if (response.headers.get("content-type")?.includes("application/json") && text) parsed = JSON.parse(text);
  return { status: response.status, body: parsed, headers: response.headers };
}

// ---------------------------------------------------------------------------------------------
// Assertions

export function expectStatus(res: CallResult, status: number): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
}

const ENVELOPE_FIELDS = ["code", "message", "details", "requestId"];

/**
 * The error envelope every error is answered with: `status`, JSON, exactly `{error}` carrying
 * `code` (any code of the list when none is given), a message, and the request's id as sent in
 * `X-Request-Id`.
 */
export function expectError(res: CallResult, status: number, code?: ErrorCode): void {
  expectStatus(res, status);
  expect(res.headers.get("content-type")).toContain("application/json");
  expect(typeof res.body).toBe("object");
  expect(Object.keys(res.body)).toEqual(["error"]);
  const { error } = res.body;
  if (code) expect(error.code).toBe(code);
  else expect(ERROR_CODES).toContain(error.code);
  expect(typeof error.message).toBe("string");
  expect(error.message.length).toBeGreaterThan(0);
  for (const key of Object.keys(error)) expect(ENVELOPE_FIELDS).toContain(key);
  const requestId = res.headers.get("x-request-id");
  expect(requestId).toEqual(expect.any(String));
  expect(error.requestId).toBe(requestId);
}

/**
 * A 422 VALIDATION envelope whose details, `[{path, message}]`, name `path`; with `orInside`, a
 * path inside it does too (`events.0` for `events`).
 */
export function expectValidation(res: CallResult, path: string, options: { orInside?: boolean } = {}): void {
  expectError(res, 422, "VALIDATION");
  const details = res.body.error.details;
  expect(Array.isArray(details), JSON.stringify(res.body)).toBe(true);
  for (const issue of details) {
    expect(Object.keys(issue).sort()).toEqual(["message", "path"]);
    expect(typeof issue.path).toBe("string");
    expect(typeof issue.message).toBe("string");
  }
  const paths: string[] = details.map((issue: { path: string }) => issue.path);
  const named = options.orInside ? paths.some((p) => p === path || p.startsWith(`${path}.`)) : paths.includes(path);
  expect(named, `422 details ${JSON.stringify(details)} should name ${path}`).toBe(true);
}

export function expectNoContent(res: CallResult): void {
  expectStatus(res, 204);
  expect(res.body).toBe("");
}

export interface TestUser {
  cookie: string;
  accountId: string;
  email: string;
}

let userCounter = 0;

export function uniqueEmail(label = "user"): string {
  userCounter += 1;
  return `${label}-${userCounter}-${randomBytes(3).toString("hex")}@example.test`;
}

/** Signs up a new account and returns its session cookie. */
export async function signUp(app: TestApp, email = uniqueEmail(), name = "Test User"): Promise<TestUser> {
  const response = await fetch(`${app.url}/api/auth/sign-up/email`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email, password: "correct-horse-battery", name }),
  });
  if (response.status !== 200) throw new Error(`sign-up failed: ${response.status} ${await response.text()}`);
  const body = (await response.json()) as { user: { id: string } };
  return { cookie: sessionCookieFrom(response.headers), accountId: body.user.id, email };
}

export function sessionCookieFrom(headers: Headers): string {
  const cookie = headers.getSetCookie().find((c) => c.includes(".session_token="));
  if (!cookie) throw new Error("no session cookie in response");
  return cookie.split(";")[0] as string;
}

export async function createOrg(app: TestApp, user: TestUser, name = "Test Org"): Promise<any> {
  const res = await call(app, "POST", "/org", { cookie: user.cookie, body: { name } });
  if (res.status !== 201) throw new Error(`create org failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.org;
}

/** A signed-up owner and the org they just created. */
export async function ownerWithOrg(
  app: TestApp,
  name = "Test Org",
): Promise<{ owner: TestUser; slug: string; orgId: string }> {
  const owner = await signUp(app);
  const org = await createOrg(app, owner, name);
  return { owner, slug: org.slug, orgId: org.id };
}

/** Creates a project in the org and waits until it is provisioned; returns its record (adminToken included). */
export async function createActiveProject(app: TestApp, user: TestUser, orgSlug: string, name: string): Promise<any> {
  const res = await call(app, "POST", `/org/${orgSlug}/projects`, { cookie: user.cookie, body: { name } });
  if (res.status !== 201) throw new Error(`create project failed: ${res.status} ${JSON.stringify(res.body)}`);
  const project = res.body.project;
  await until(`project ${name} to be active`, async () => {
    const read = await call(app, "GET", `/org/${orgSlug}/projects/${project.slug}`, { cookie: user.cookie });
    return read.body.project?.status === "active";
  });
  return project;
}

export async function createApiKey(
  app: TestApp,
  user: TestUser,
  slug: string,
  scope: "full" | "deploy" | "read-only",
  extra: Record<string, unknown> = {},
): Promise<{ token: string; id: string }> {
  const res = await call(app, "POST", `/org/${slug}/api-keys`, {
    cookie: user.cookie,
    body: { name: `${scope} key`, scope, ...extra },
  });
  if (res.status !== 201) throw new Error(`create key failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { token: res.body.token, id: res.body.apiKey.id };
}

export interface ReceivedMail {
  from: string;
  to: string[];
  raw: string;
}

/** A real SMTP server that keeps every message it receives. */
export async function startMailbox() {
  const messages: ReceivedMail[] = [];
  const waiters: (() => void)[] = [];
  /** Recipients whose next message is kept waiting (its sender too) until released. */
  const holds = new Map<string, Promise<void>>();
  /** Recipients with a message being kept waiting now. */
  const waiting = new Set<string>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    logger: false,
    onData(stream, session, done) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", async () => {
        const to = session.envelope.rcptTo.map((r) => r.address);
        const held = to.map((address) => holds.get(address)).find(Boolean);
        for (const address of to) holds.delete(address);
        if (held) {
          for (const address of to) waiting.add(address);
          await held;
          for (const address of to) waiting.delete(address);
        }
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to,
          raw: Buffer.concat(chunks).toString("utf8"),
        });
        for (const wake of waiters.splice(0)) wake();
        done();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.server.address() as { port: number }).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    /** The newest message to `to`, waiting up to `timeoutMs` for it. */
    async waitFor(to: string, since = 0, timeoutMs = 5000): Promise<ReceivedMail> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = messages.slice(since).findLast((m) => m.to.includes(to));
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`no mail to ${to} within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 100);
        });
      }
    },
    /**
     * Keeps the next message to `to` from arriving, and its sender waiting for the answer to it,
     * until the returned function is called.
     */
    hold(to: string): () => void {
      let release: () => void = () => {};
      holds.set(
        to,
        new Promise<void>((resolve) => {
          release = resolve;
        }),
      );
      return () => release();
    },
    /** Whether a message to `to` is being kept waiting (see `hold`). */
    pending: (to: string) => waiting.has(to),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type Mailbox = Awaited<ReturnType<typeof startMailbox>>;

/** The mail text with quoted-printable soft line breaks and `=3D` undone. */
export function mailText(mail: ReceivedMail): string {
  return mail.raw.replace(/=\r?\n/g, "").replace(/=3D/g, "=");
}

/** The invitation token in an invitation mail. */
export function invitationToken(mail: ReceivedMail): string {
  const match = /accept-invite\?token=([A-Za-z0-9_%-]+)/.exec(mailText(mail));
  if (!match?.[1]) throw new Error("no invitation link in mail");
  return decodeURIComponent(match[1]);
}

/** Invites `email` with `role` and accepts as `member`, through the real mail. */
export async function addMember(
  app: TestApp,
  mailbox: Mailbox,
  admin: TestUser,
  slug: string,
  role: "admin" | "developer" | "viewer",
  member?: TestUser,
): Promise<{ user: TestUser; memberId: string }> {
  const user = member ?? (await signUp(app));
  const since = mailbox.messages.length;
  const invite = await call(app, "POST", `/org/${slug}/invitations`, {
    cookie: admin.cookie,
    body: { email: user.email, role },
  });
  if (invite.status !== 201) throw new Error(`invite failed: ${invite.status} ${JSON.stringify(invite.body)}`);
  const token = invitationToken(await mailbox.waitFor(user.email, since));
  const accepted = await call(app, "POST", "/invitations/accept", { cookie: user.cookie, body: { token } });
  if (accepted.status !== 200) throw new Error(`accept failed: ${accepted.status} ${JSON.stringify(accepted.body)}`);
  const members = await call(app, "GET", `/org/${slug}/members`, { cookie: admin.cookie });
  const memberId = members.body.members.find((m: { accountId: string }) => m.accountId === user.accountId).id;
  return { user, memberId };
}

// ---------------------------------------------------------------------------------------------
// Webhook receivers

/** One request as a receiver saw it. */
export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  body: string;
  /** When the whole body had arrived (ms since the epoch). */
  at: number;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Sends the head and the body, then never ends the response (a body that stalls). */
  keepOpen?: boolean;
}

/** Decides the answer to the `index`-th request (0-based, over the receiver's life); a promise holds it open. */
export type Responder = (request: ReceivedRequest, index: number) => Reply | Promise<Reply>;

export interface Receiver {
  /** `http://127.0.0.1:<port>`: point webhooks at any path below it. */
  url: string;
  port: number;
  /** Every request, in order of arrival. */
  requests: ReceivedRequest[];
  /** How many connections were opened to it. */
  readonly connections: number;
  respondWith(responder: Responder): void;
  /** The requests that arrived at `path`. */
  at(path: string): ReceivedRequest[];
  /** The first request `match` accepts (`what` names it in the timeout error), waiting up to `timeoutMs`. */
  waitFor(what: string, match: (request: ReceivedRequest) => boolean, timeoutMs?: number): Promise<ReceivedRequest>;
  close(): Promise<void>;
}

/** A real HTTP receiver on 127.0.0.1 that records every request; answers 200 "ok" unless told otherwise. */
export async function startReceiver(responder: Responder = () => ({ status: 200, body: "ok" })): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  let respond = responder;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const request: ReceivedRequest = {
        method: req.method ?? "",
        path: req.url ?? "/",
        headers: req.headers,
        raw,
        body: raw.toString("utf8"),
        at: Date.now(),
      };
      requests.push(request);
      void Promise.resolve(respond(request, requests.length - 1)).then((reply) => {
        if (res.destroyed) return;
        res.writeHead(reply.status, { "content-type": "text/plain", ...reply.headers });
        if (reply.keepOpen) res.write(reply.body ?? "");
        else res.end(reply.body ?? "ok");
      });
    });
  });
  let connections = 0;
  server.on("connection", () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    get connections() {
      return connections;
    },
    respondWith(next) {
      respond = next;
    },
    at: (path) => requests.filter((request) => request.path === path),
    async waitFor(what, match, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = requests.find(match);
        if (found) return found;
        if (Date.now() > deadline) {
          throw new Error(`receiver: no ${what} within ${timeoutMs} ms; saw ${requests.map((r) => r.path).join(", ")}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
