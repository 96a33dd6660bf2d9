import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "./ports.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const children: ChildProcess[] = [];
const dirs: string[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Runs the CLI (src/main.ts, through tsx) as a real process with the given environment (SQLite in a temp dir). */
function runPlinth(env: Record<string, string>, args: string[] = []) {
  const dataDir = mkdtempSync(path.join(tmpdir(), "plinth-proc-"));
  dirs.push(dataDir);
  // NODE_ENV=production: libraries relax some checks under vitest's NODE_ENV=test.
  const childEnv: Record<string, string | undefined> = {
    ...process.env,
    NODE_ENV: "production",
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
    ...env,
  };
  delete childEnv.DATABASE_URL;
  delete childEnv.TEST;
  delete childEnv.VITEST;
  const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "src/main.ts"), ...args], {
    cwd: ROOT,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  child.stdout?.on("data", (chunk) => {
    output += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    output += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, exited, output: () => output };
}

async function waitForHealth(port: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/health`);
      if (res.ok) return;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("server did not become healthy");
}

describe("the plinth process", () => {
  it("starts on embedded SQLite, logs requests with ids, and exits 0 on SIGTERM", async () => {
    const port = await freePort();
    const plinth = runPlinth({ PORT: String(port) });
    await waitForHealth(port);
    const res = await fetch(`http://127.0.0.1:${port}/api/orgs`);
    expect(res.status).toBe(401);
    const requestId = res.headers.get("x-request-id");
    plinth.child.kill("SIGTERM");
    expect(await plinth.exited).toBe(0);
    const lines = plinth
      .output()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line));
    expect(lines).toContainEqual(expect.objectContaining({ requestId, method: "GET", path: "/api/orgs", status: 401 }));
    expect(lines).toContainEqual(expect.objectContaining({ msg: "shutting down", signal: "SIGTERM" }));
  });

  it("finishes an in-flight request before exiting on SIGTERM", async () => {
    const port = await freePort();
    const plinth = runPlinth({ PORT: String(port) });
    await waitForHealth(port);
    // Sign-up hashes a password (scrypt), so it is still running when the signal arrives.
    const inFlight = fetch(`http://127.0.0.1:${port}/api/auth/sign-up/email`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "late@example.test", password: "long-enough-password", name: "Late" }),
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    plinth.child.kill("SIGTERM");
    const res = await inFlight;
    expect(res.status).toBe(200);
    // It ends its connection, so that no client sends another request on it as it closes.
    expect(res.headers.get("connection")).toBe("close");
    expect(await plinth.exited).toBe(0);
  });

  it("keeps serving for SHUTDOWN_DELAY_MS after SIGTERM, with health at 503 and each connection closed", async () => {
    const port = await freePort();
    const plinth = runPlinth({ PORT: String(port), SHUTDOWN_DELAY_MS: "1500" });
    await waitForHealth(port);
    const signalled = Date.now();
    plinth.child.kill("SIGTERM");
    let health = await fetch(`http://127.0.0.1:${port}/api/health`);
    while (health.status === 200 && Date.now() - signalled < 1_000) {
      await health.arrayBuffer();
      health = await fetch(`http://127.0.0.1:${port}/api/health`);
    }
    expect(health.status).toBe(503);
    expect(await health.json()).toEqual({
      error: { code: "UNAVAILABLE", message: "shutting down", requestId: health.headers.get("x-request-id") },
    });
    expect(health.headers.get("connection")).toBe("close");
    // A new connection is still accepted and served, and told to close.
    const res = await fetch(`http://127.0.0.1:${port}/api/orgs`);
    expect(res.status).toBe(401);
    expect(res.headers.get("connection")).toBe("close");
    expect(await plinth.exited).toBe(0);
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(1_500);
  });

  it("lets go of a connection it refused, so that a client holding its side open does not delay SIGTERM", async () => {
    const port = await freePort();
    const plinth = runPlinth({ PORT: String(port), SHUTDOWN_TIMEOUT_MS: "10000" });
    await waitForHealth(port);
    const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    socket.write("FOO /api/health HTTP/1.1\r\nHost: x\r\n\r\n");
    let answer = "";
    socket.on("data", (chunk) => {
      answer += chunk;
    });
    await new Promise<void>((resolve) => socket.once("end", () => resolve()));
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    const signalled = Date.now();
    plinth.child.kill("SIGTERM");
    expect(await plinth.exited).toBe(0);
    // Not the 10 s SHUTDOWN_TIMEOUT_MS a connection still held would cost.
    expect(Date.now() - signalled).toBeLessThan(5_000);
    socket.destroy();
  });

  it("serves cookie-holding clients that send no Origin, and refuses cross-site writes", async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}/api`;
    const plinth = runPlinth({ PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` });
    await waitForHealth(port);
    const credentials = JSON.stringify({ email: "curl@example.test", password: "long-enough-password", name: "C" });
    const json = { "content-type": "application/json" };
    const signUp = await fetch(`${base}/auth/sign-up/email`, { method: "POST", headers: json, body: credentials });
    expect(signUp.status).toBe(200);
    const cookie = signUp.headers.getSetCookie()[0]?.split(";")[0] ?? "";
    const signIn = await fetch(`${base}/auth/sign-in/email`, {
      method: "POST",
      headers: { ...json, cookie },
      body: credentials,
    });
    expect(signIn.status).toBe(200);
    const crossSite = await fetch(`${base}/org`, {
      method: "POST",
      headers: { ...json, cookie, origin: "https://evil.example" },
      body: JSON.stringify({ name: "Forged" }),
    });
    expect(crossSite.status).toBe(403);
    const sameSite = await fetch(`${base}/org`, {
      method: "POST",
      headers: { ...json, cookie, origin: `http://127.0.0.1:${port}` },
      body: JSON.stringify({ name: "Real" }),
    });
    expect(sameSite.status).toBe(201);
    const signOut = await fetch(`${base}/auth/sign-out`, { method: "POST", headers: { cookie } });
    expect(signOut.status).toBe(200);
    expect((await fetch(`${base}/account`, { headers: { cookie } })).status).toBe(401);
    plinth.child.kill("SIGTERM");
    expect(await plinth.exited).toBe(0);
  });

  it("prints its usage for --help wherever it stands, and refuses what it does not read", async () => {
    // Six processes at once: one after another, each loading the sources, took most of the
    // test's time on a busy machine.
    const cases: Array<[string[], number]> = [
      [["--help"], 0],
      [["serve", "--help"], 0],
      [["worker", "-h"], 0],
      [["bogus"], 2],
      [["worker", "--bogus-flag"], 2],
      [["serve", "extra"], 2],
    ];
    await Promise.all(
      cases.map(async ([args, code]) => {
        const plinth = runPlinth({ PORT: "not-a-port" }, args);
        expect(await plinth.exited, args.join(" ")).toBe(code);
        expect(plinth.output()).toContain("usage: plinth");
      }),
    );
  });

  it("refuses a bad configuration value, naming the variable", async () => {
    const plinth = runPlinth({ PORT: "not-a-port" });
    expect(await plinth.exited).toBe(1);
    expect(plinth.output()).toContain("PORT");
  });

  // Linux's /proc refuses new entries with ENOENT, on which Node's recursive mkdir loops forever.
  it.skipIf(!existsSync("/proc/self"))(
    "stops with a message when DATA_DIR cannot be made, even where Node's recursive mkdir would spin",
    async () => {
      const plinth = runPlinth({ PORT: "0", DATA_DIR: "/proc/plinth-nope/data" });
      expect(await plinth.exited).toBe(1);
      expect(plinth.output()).toContain("/proc/plinth-nope");
    },
  );

  it("never logs secrets", async () => {
    const port = await freePort();
    const plinth = runPlinth({ PORT: String(port), LOG_LEVEL: "trace" });
    await waitForHealth(port);
    const password = "very-secret-password-123";
    const signUp = await fetch(`http://127.0.0.1:${port}/api/auth/sign-up/email`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "s@example.test", password, name: "S" }),
    });
    const cookie = signUp.headers.getSetCookie()[0]?.split(";")[0] ?? "";
    const org = await fetch(`http://127.0.0.1:${port}/api/org`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie },
      body: JSON.stringify({ name: "Secretive" }),
    });
    const { org: created } = (await org.json()) as { org: { slug: string } };
    const key = await fetch(`http://127.0.0.1:${port}/api/org/${created.slug}/api-keys`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie },
      body: JSON.stringify({ name: "k", scope: "full" }),
    });
    const { token } = (await key.json()) as { token: string };
    await fetch(`http://127.0.0.1:${port}/api/orgs`, { headers: { authorization: `Bearer ${token}` } });
    plinth.child.kill("SIGTERM");
    await plinth.exited;
    const output = plinth.output();
    expect(output).toContain("/api/orgs");
    expect(output).not.toContain(password);
    expect(output).not.toContain(token);
    expect(output).not.toContain(cookie.split("=")[1]);
  });
});
