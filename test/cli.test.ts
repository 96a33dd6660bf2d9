import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  call,
  createApiKey,
  ownerWithOrg,
  type Receiver,
  sleep,
  startApp,
  startReceiver,
  type TestApp,
  type TestUser,
} from "./harness.ts";
import { freePort } from "./ports.ts";

/**
 * The `plinth` command (DESIGN §14), as built (bin/plinth.js → dist/), against a real server:
 * login and its config file, every noun, tables and `--json`, stderr for messages, exit codes
 * 0/1/2, `--yes`, and `serve`.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const BIN = path.join(ROOT, "bin/plinth.js");

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe("the plinth command", () => {
  let app: TestApp;
  let owner: TestUser;
  let slug: string;
  let token: string;
  let home: string;
  let receiver: Receiver;

  /** Runs the built CLI with its own config directory and no PLINTH_* from outside; stdin is `input` (not a terminal). */
  function plinth(args: string[], options: { input?: string; env?: Record<string, string> } = {}): Promise<Run> {
    const env: Record<string, string | undefined> = { ...process.env, XDG_CONFIG_HOME: home, ...options.env };
    for (const name of ["PLINTH_URL", "PLINTH_API_KEY", "PLINTH_ORG"]) if (!options.env?.[name]) delete env[name];
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env, stdio: ["pipe", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk) => {
        stdout += chunk;
      });
      child.stderr.on("data", (chunk) => {
        stderr += chunk;
      });
      child.once("error", reject);
      child.once("close", (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(options.input ?? "");
    });
  }
  /** Runs it as the logged-in key, and expects exit 0. */
  async function ok(args: string[]): Promise<Run> {
    const run = await plinth(args);
    expect(run.code, `plinth ${args.join(" ")}\n${run.stderr}`).toBe(0);
    expect(run.stdout).not.toContain("\u001b[");
    return run;
  }
  const json = async (args: string[]) => JSON.parse((await ok([...args, "--json"])).stdout);

  beforeAll(async () => {
    home = mkdtempSync(path.join(tmpdir(), "plinth-cli-"));
    receiver = await startReceiver();
    app = await startApp({ RATE_LIMIT_PER_MINUTE: "100000", ALLOW_PRIVATE_WEBHOOK_URLS: "true" });
    ({ owner, slug } = await ownerWithOrg(app, "CLI Org"));
    token = (await createApiKey(app, owner, slug, "full")).token;
  });
  afterAll(async () => {
    await app?.close();
    await receiver?.close();
    rmSync(home, { recursive: true, force: true });
  });

  it("loads nothing of the server's but for serve and worker: its imports stay in cli/ and client/", () => {
    const cli = path.join(ROOT, "src/cli");
    const files = readdirSync(cli, { recursive: true, encoding: "utf8" }).filter((file) => file.endsWith(".ts"));
    expect(files.length).toBeGreaterThan(10);
    for (const file of files) {
      const source = readFileSync(path.join(cli, file), "utf8");
      for (const [, specifier] of source.matchAll(/^import[^"]*"([^"]+)";$/gm)) {
        if (!specifier?.startsWith(".")) continue;
        const target = path.relative(
          path.join(ROOT, "src"),
          path.resolve(path.dirname(path.join(cli, file)), specifier),
        );
        expect(target.startsWith("cli/") || target.startsWith("client/"), `${file} imports ${specifier}`).toBe(true);
      }
    }
  });

  it("logs in with a key from stdin, keeps it in a 0600 file, and knows who it is", async () => {
    const notYet = await plinth(["projects", "list"]);
    expect(notYet.code).toBe(2);
    expect(notYet.stderr).toMatch(/no Plinth to talk to|not logged in/);
    const login = await plinth(["login", "--url", app.url, "--api-key", "-"], { input: `${token}\n` });
    expect(login.code, login.stderr).toBe(0);
    expect(login.stdout).toBe("");
    expect(login.stderr).toContain(`org ${slug}`);
    const file = path.join(home, "plinth/config.json");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ url: app.url, apiKey: token, org: slug });
    const whoami = await ok(["whoami"]);
    expect(whoami.stdout).toContain(app.url);
    expect(whoami.stdout).toMatch(new RegExp(`${slug}\\s+CLI Org\\s+admin`));
    // A bad key is refused at login, and nothing is kept.
    const bad = await plinth(["login", "--url", app.url, "--api-key", `pak_${"0".repeat(64)}`]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^error UNAUTHORIZED: .+ \(request [\w-]+\)\n$/);
    expect(JSON.parse(readFileSync(file, "utf8")).apiKey).toBe(token);
  });

  it("answers usage errors with 2 and API errors with 1, messages on stderr only", async () => {
    const help = await plinth(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: plinth");
    expect((await plinth(["help", "projects"])).code).toBe(0);
    expect((await plinth(["--version"])).stdout.trim()).toBe("0.0.1");
    const bare = await plinth([]);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain("Usage: plinth");
    expect((await plinth(["projects"])).code).toBe(2);
    for (const args of [["bogus"], ["projects", "create"], ["projects", "list", "--bogus"], ["restore", "shop"]]) {
      const run = await plinth(args);
      expect(run.code, args.join(" ")).toBe(2);
      expect(run.stdout).toBe("");
      expect(run.stderr).toMatch(/error|plinth:/);
    }
    const missing = await plinth(["projects", "get", "no-such-project"]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe("");
    expect(missing.stderr).toMatch(/^error NOT_FOUND: project not found \(request [\w-]+\)\n$/);
    const elsewhere = await plinth(["projects", "list", "--org", "not-mine"]);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toMatch(/^error NOT_FOUND/);
    const port = await freePort();
    const unreachable = await plinth(["projects", "list", "--url", `http://127.0.0.1:${port}`]);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(/^error UNREACHABLE: could not reach .+ECONNREFUSED/);
    // The environment stands in for the config file, and flags for both.
    const byEnv = await plinth(["projects", "list", "--json"], {
      env: { PLINTH_URL: app.url, PLINTH_API_KEY: token, PLINTH_ORG: slug, XDG_CONFIG_HOME: path.join(home, "none") },
    });
    expect(byEnv.code, byEnv.stderr).toBe(0);
  });

  it("creates, reads, pauses, resumes, upgrades and deletes projects; --json is the API's JSON", async () => {
    const created = await json(["projects", "create", "Storefront", "--wait"]);
    expect(created.project).toMatchObject({ slug: "storefront", status: "active" });
    expect(created.adminToken).toMatch(/^wsa_/);
    const table = await ok(["projects", "list"]);
    expect(table.stdout.split("\n")[0]).toMatch(/^SLUG\s+NAME\s+STATUS\s+ENVIRONMENT\s+REGION$/);
    expect(table.stdout).toMatch(/storefront\s+Storefront\s+active/);
    const viaApi = await call(app, "GET", `/org/${slug}/projects/storefront`, { token });
    expect(await json(["projects", "get", "storefront"])).toEqual(viaApi.body);
    expect(await json(["projects", "get", "storefront", "-o", "json"])).toEqual(viaApi.body);
    expect((await json(["projects", "pause", "storefront"])).project.status).toBe("paused");
    expect((await json(["projects", "resume", "storefront"])).project.status).toBe("active");
    const updated = await json(["projects", "update", "storefront", "--environment", "staging", "--sign-up", "closed"]);
    expect(updated.project).toMatchObject({ environment: "staging", signUp: "closed" });
    const badMode = await plinth(["projects", "update", "storefront", "--sign-up", "sometimes"]);
    expect(badMode.code).toBe(1);
    expect(badMode.stderr).toContain("signUp");
    expect((await ok(["projects", "update", "storefront", "--sign-up", "open"])).stdout).toMatch(/sign-up\s+open/);
    expect((await json(["projects", "upgrade", "storefront"])).status).toMatch(/upgraded|skipped/);
    // Destructive: without --yes, and no terminal to ask on, nothing happens.
    const refused = await plinth(["projects", "delete", "storefront"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("--yes");
    expect((await call(app, "GET", `/org/${slug}/projects/storefront`, { token })).status).toBe(200);
    await ok(["projects", "create", "Throwaway"]);
    const deleted = await ok(["projects", "delete", "throwaway", "--yes"]);
    expect(deleted.stdout).toBe("");
    expect((await call(app, "GET", `/org/${slug}/projects/throwaway`, { token })).status).toBe(404);
  });

  it("backs up, restores a backup and an instant, branches and adds domains", async () => {
    const backup = (await json(["backups", "create", "storefront", "--wait"])).backup;
    expect(backup).toMatchObject({ kind: "manual", status: "completed" });
    expect((await ok(["backups", "list", "storefront"])).stdout).toContain(backup.id);
    expect((await plinth(["backups", "restore", "storefront", backup.id])).code).toBe(2);
    expect((await json(["backups", "restore", "storefront", backup.id, "--yes"])).backup.id).toBe(backup.id);
    await sleep(1_100);
    const instant = new Date(Date.now() - 200).toISOString();
    expect((await json(["restore", "storefront", "--to", instant, "--yes"])).restoredTo).toBe(instant);
    const badTime = await plinth(["restore", "storefront", "--to", "yesterday-ish", "--yes"]);
    expect(badTime.code).toBe(2);

    const branch = await json(["branches", "create", "storefront", "pr-7", "--pr", "7"]);
    expect(branch.branch).toMatchObject({ name: "pr-7", prNumber: 7 });
    expect(branch.adminToken).toMatch(/^wsa_/);
    expect((await json(["branches", "list", "storefront"])).branches.map((b: { id: string }) => b.id)).toContain(
      branch.branch.id,
    );
    await ok(["branches", "delete", "storefront", branch.branch.id, "--yes"]);
    expect((await json(["branches", "list", "storefront"])).branches).toEqual([]);

    const added = await ok(["domains", "add", "storefront", "shop.example.com"]);
    expect(added.stdout).toMatch(/TXT name\s+_plinth-challenge\.shop\.example\.com/);
    const domains = (await json(["domains", "list", "storefront"])).domains;
    expect(domains).toHaveLength(1);
    const verify = await plinth(["domains", "verify", "storefront", domains[0].id, "--json"]);
    expect([0, 1]).toContain(verify.code);
    await ok(["domains", "remove", "storefront", domains[0].id, "--yes"]);
    expect((await json(["domains", "list", "storefront"])).domains).toEqual([]);
  });

  it("manages keys, webhooks, members, alarms; reads usage, errors, audit; exports", async () => {
    const key = await json(["keys", "create", "ci", "--scope", "deploy"]);
    expect(key.apiKey).toMatchObject({ name: "ci", scope: "deploy" });
    expect(key.token).toMatch(/^pak_/);
    expect((await ok(["keys", "list"])).stdout).not.toContain(key.token);
    expect((await plinth(["keys", "create", "x", "--scope", "root"])).code).toBe(2);
    await ok(["keys", "revoke", key.apiKey.id, "--yes"]);
    expect((await call(app, "GET", "/orgs", { token: key.token })).status).toBe(401);

    const hook = await json(["webhooks", "create", receiver.url, "--events", "project.*,webhook.test"]);
    expect(hook.secret).toMatch(/^whsec_/);
    const test = await json(["webhooks", "test", hook.webhook.id]);
    expect(test.delivery.status).toBe("succeeded");
    expect((await json(["webhooks", "deliveries", hook.webhook.id])).deliveries).toHaveLength(1);
    await ok(["webhooks", "delete", hook.webhook.id, "--yes"]);

    const invite = await json(["members", "invite", "newcomer@example.test", "--role", "developer"]);
    expect(invite.invite).toMatchObject({ email: "newcomer@example.test", role: "developer", status: "invited" });
    expect((await ok(["members", "list"])).stdout).toMatch(/newcomer@example\.test\s+-\s+developer\s+invited/);
    await ok(["members", "remove", invite.invite.id, "--yes"]);

    const alarm = await json(["alarms", "create", "--metric", "requests", "--threshold", "80"]);
    expect(alarm.alarm).toMatchObject({ metric: "requests", thresholdPct: 80 });
    expect((await json(["alarms", "list"])).alarms).toHaveLength(1);
    await ok(["alarms", "delete", alarm.alarm.id, "--yes"]);

    expect((await ok(["usage"])).stdout).toMatch(/requests\s+\d+\s+\d+/);
    expect((await json(["usage", "--history"])).days).toEqual(expect.any(Array));
    expect((await json(["errors", "storefront", "--status", "4xx"])).errors).toEqual(expect.any(Array));
    const audit = await json(["audit", "--action", "alarm.*"]);
    expect(audit.events.map((event: { action: string }) => event.action)).toEqual(["alarm.deleted", "alarm.created"]);

    const dir = path.join(home, "dumps");
    const exported = await json(["export", "--dir", dir]);
    expect(readdirSync(dir).sort()).toEqual(exported.projects.map((p: { filename: string }) => p.filename).sort());
    expect(readFileSync(path.join(dir, exported.projects[0].filename), "utf8")).toContain("CREATE TABLE");

    const raw = await ok(["api", "GET", `/org/${slug}/usage`]);
    expect(JSON.parse(raw.stdout)).toEqual((await call(app, "GET", `/org/${slug}/usage`, { token })).body);
    const posted = await ok(["api", "POST", `/org/${slug}/alarms`, "--data", '{"metric":"d1","thresholdPct":50}']);
    expect(JSON.parse(posted.stdout).alarm.metric).toBe("d1");
    const refused = await plinth(["api", "POST", `/org/${slug}/alarms`, "--data", '{"metric":"nope"}']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^error VALIDATION/);
    expect((await plinth(["api", "GET", "orgs"])).code).toBe(2);
  });

  it("prints shell completion, and completes nouns, verbs and flags", async () => {
    for (const shell of ["bash", "zsh", "fish"]) {
      expect((await ok(["completion", shell])).stdout).toContain("plinth __complete");
    }
    expect((await plinth(["completion", "tcsh"])).code).toBe(2);
    expect((await ok(["__complete", "proj"])).stdout).toBe("projects\n");
    expect((await ok(["__complete", "projects", ""])).stdout.split("\n")).toEqual(
      expect.arrayContaining(["list", "get", "create", "pause", "resume", "delete", "upgrade"]),
    );
    expect((await ok(["__complete", "projects", "create", "--w"])).stdout).toBe("--wait\n");
  });

  it("logs out, and serves the API as plinth serve", async () => {
    await ok(["logout"]);
    expect((await plinth(["projects", "list"])).code).toBe(2);
    const port = await freePort();
    const dataDir = mkdtempSync(path.join(tmpdir(), "plinth-cli-serve-"));
    const env: Record<string, string | undefined> = {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      DATA_DIR: dataDir,
      LOG_LEVEL: "error",
    };
    delete env.DATABASE_URL;
    const server = spawn(process.execPath, [BIN, "serve"], { cwd: ROOT, env, stdio: "ignore" });
    try {
      let healthy = false;
      for (let i = 0; i < 100 && !healthy; i++) {
        healthy = await fetch(`http://127.0.0.1:${port}/api/health`).then(
          (response) => response.ok,
          () => false,
        );
        if (!healthy) await sleep(100);
      }
      expect(healthy).toBe(true);
    } finally {
      const exited = new Promise((resolve) => server.once("exit", resolve));
      server.kill("SIGTERM");
      expect(await exited).toBe(0);
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
