/** Helpers the benchmark runners share. */
import { type SpawnOptions, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";

/**
 * Creates a database named `<prefix>_<random>` through the maintenance database at `adminUrl`.
 * `drop` removes it (once; later calls do nothing), forcing out any connection still open.
 */
export async function createDatabase(
  adminUrl: string,
  prefix: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(4).toString("hex")}`;
  const run = async (statement: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await run(`create database ${name}`);
  let dropped = false;
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      if (dropped) return;
      dropped = true;
      await run(`drop database if exists ${name} with (force)`);
    },
  };
}

/** Signs a fresh account up through the API; returns its session cookie (`plinth.session_token=…`). */
export async function signUpCookie(url: string, name = "Bench User"): Promise<string> {
  const response = await fetch(`${url}/api/auth/sign-up/email`, {
    method: "POST",
    // better-auth refuses a cookie-less POST without an Origin it trusts (PUBLIC_URL).
    headers: { "content-type": "application/json", origin: url },
    body: JSON.stringify({
      email: `bench-${randomBytes(4).toString("hex")}@example.test`,
      password: "correct-horse-battery-staple",
      name,
    }),
  });
  if (response.status !== 200) throw new Error(`sign-up failed: ${response.status} ${await response.text()}`);
  const cookie = response.headers
    .getSetCookie()
    .find((c) => c.startsWith("plinth.session_token="))
    ?.split(";")[0];
  if (!cookie) throw new Error("sign-up returned no plinth.session_token cookie");
  return cookie;
}

/** A positive integer from the environment, or `fallback` when unset. */
export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer`);
  return value;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A TCP port free on `host` now. */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, host, () => {
      const address = probe.address();
      const port = typeof address === "object" && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** VmRSS and VmHWM (peak RSS) of a process, in bytes. */
export function memoryOf(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
  return { rss: kb("VmRSS") * 1024, hwm: kb("VmHWM") * 1024 };
}

/** A child process whose output is kept (its tail) and passed to `onChunk`. */
export function spawnWatched(args: string[], options: SpawnOptions, onChunk: (text: string) => void = () => {}) {
  const proc = spawn(process.execPath, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
  if (proc.pid === undefined) throw new Error(`failed to spawn ${args.join(" ")}`);
  let tail = "";
  const keep = (chunk: Buffer) => {
    const text = chunk.toString("utf8");
    tail = (tail + text).slice(-8000);
    onChunk(text);
  };
  proc.stdout?.on("data", keep);
  proc.stderr?.on("data", keep);
  let alive = true;
  const exited = new Promise<void>((resolve) =>
    proc.once("exit", () => {
      alive = false;
      resolve();
    }),
  );
  return {
    proc,
    pid: proc.pid,
    alive: () => alive,
    tail: () => tail,
    /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
    async stop(graceMs = 20_000): Promise<void> {
      if (!alive) return;
      proc.kill("SIGTERM");
      const killer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** JSON from the API (`init.token`: a bearer token, `init.cookie`: a session); throws on an error status. */
export async function apiJson(url: string, init: RequestInit & { token?: string; cookie?: string } = {}) {
  const headers: Record<string, string> = { "content-type": "application/json", origin: new URL(url).origin };
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  if (init.cookie) headers.cookie = init.cookie;
  const response = await fetch(url, { ...init, headers });
  const text = await response.text();
  if (!response.ok) throw new Error(`${init.method ?? "GET"} ${url}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/**
 * A Plinth child process (`<dist>/main.js`, as `npm start` runs it) on a fresh DATA_DIR and, for
 * PostgreSQL, a fresh database made through `pgAdminUrl`; resolves once it answers health.
 * `stop` ends it and removes both.
 */
export async function startBenchPlinth(options: {
  root: string;
  dist: string;
  database: "sqlite" | "postgres";
  pgAdminUrl: string;
  name: string;
  /** More environment for the process (STORAGE_URL, …). */
  env?: Record<string, string>;
}) {
  const dataDir = mkdtempSync(path.join(tmpdir(), `plinth-${options.name}-`));
  const created =
    options.database === "postgres" ? await createDatabase(options.pgAdminUrl, `plinth_${options.name}`) : undefined;
  const host = "127.0.0.1";
  const port = await freePort(host);
  const url = `http://${host}:${port}`;
  const inherited = { ...process.env };
  delete inherited.DATABASE_URL;
  const child = spawnWatched(["--max-semi-space-size=32", path.join(options.dist, "main.js")], {
    cwd: options.root,
    env: {
      ...inherited,
      PORT: String(port),
      HOST: host,
      PUBLIC_URL: url,
      DATA_DIR: dataDir,
      LOG_LEVEL: "error",
      AUTH_SECRET: "bench-secret-bench-secret-bench-secret-0123",
      RATE_LIMIT_PER_MINUTE: "100000000",
      ...(created ? { DATABASE_URL: created.url } : {}),
      ...options.env,
    },
  });
  const stop = async () => {
    await child.stop();
    await created?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    for (;;) {
      if (!child.alive()) throw new Error(`plinth exited:\n${child.tail()}`);
      const healthy = await fetch(`${url}/api/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (healthy) break;
      await sleep(50);
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, child, stop };
}

/** A new account, its org and one active project; the workspace API's base URL and admin token. */
export async function benchProject(url: string, name: string) {
  const cookie = await signUpCookie(url);
  const { org } = await apiJson(`${url}/api/org`, { method: "POST", cookie, body: JSON.stringify({ name }) });
  const { project, adminToken } = await apiJson(`${url}/api/org/${org.slug}/projects`, {
    method: "POST",
    cookie,
    body: JSON.stringify({ name }),
  });
  for (;;) {
    const read = await apiJson(`${url}/api/org/${org.slug}/projects/${project.slug}`, { cookie });
    if (read.project.status === "active") break;
    await sleep(100);
  }
  return { cookie, org, project, adminToken: adminToken as string, ws: `${url}/w/${project.id}/api` };
}
