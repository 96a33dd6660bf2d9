/**
 * Plinth on many hosts (DESIGN §16): two `plinth serve` processes with DATA_DIRs of their own and
 * one `plinth worker`, on one PostgreSQL database and one bucket. Whatever the suite's database,
 * this test makes a PostgreSQL database of its own (SQLite is one host's).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "./ports.ts";
import { type Swift, skipWithoutSwift, startSwift } from "./swift.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const POSTGRES = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const MiB = 1024 * 1024;
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

interface Plinth {
  url: string;
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

describe.skipIf(skipWithoutSwift("many-hosts.test.ts"))(
  "two servers and a worker on one database and one bucket",
  () => {
    let swift: Swift;
    let database: string;
    let databaseUrl: string;
    const dirs: string[] = [];
    const running: Plinth[] = [];
    let a: Plinth;
    let b: Plinth;

    const admin = () => new pg.Client({ connectionString: POSTGRES });

    async function start(command: "serve" | "worker", extra: Record<string, string> = {}): Promise<Plinth> {
      const dataDir = mkdtempSync(path.join(tmpdir(), `plinth-host-${command}-`));
      dirs.push(dataDir);
      const port = await freePort();
      const env: Record<string, string | undefined> = {
        ...process.env,
        NODE_ENV: "production",
        PORT: String(port),
        HOST: "127.0.0.1",
        PUBLIC_URL: `http://127.0.0.1:${port}`,
        DATA_DIR: dataDir,
        DATABASE_URL: databaseUrl,
        STORAGE_URL: swift.storageUrl("plinth-hosts"),
        AUTH_SECRET: "many-hosts-share-one-auth-secret-0123456789",
        LOG_LEVEL: "warn",
        // The servers serve; the worker does the jobs (provisioning, backups).
        WORKERS: command === "serve" ? "0" : "4",
        WORKER_POLL_MS: "100",
        ...extra,
      };
      for (const name of ["DATABASE_SCHEMA", "VITEST", "TEST"]) delete env[name];
      const child = spawn(process.execPath, [path.join(ROOT, "dist/main.js"), command], {
        cwd: ROOT,
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      child.stdout?.on("data", (chunk) => {
        output += chunk;
      });
      child.stderr?.on("data", (chunk) => {
        output += chunk;
      });
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
      const plinth = { url: `http://127.0.0.1:${port}`, child, output: () => output, exited };
      running.push(plinth);
      if (command === "serve") await waitForReady(plinth);
      return plinth;
    }

    beforeAll(async () => {
      swift = await startSwift();
      database = `plinth_hosts_${randomBytes(4).toString("hex")}`;
      const client = admin();
      await client.connect();
      await client.query(`create database ${database}`);
      await client.end();
      const url = new URL(POSTGRES);
      url.pathname = `/${database}`;
      databaseUrl = url.toString();
      // One first, so that the migrations have run when the others start.
      a = await start("serve");
      [b] = await Promise.all([start("serve"), start("worker")]);
    }, 120_000);

    afterAll(async () => {
      for (const plinth of running) plinth.child.kill("SIGKILL");
      await Promise.all(running.map((plinth) => plinth.exited));
      await swift?.stop();
      if (database) {
        const client = admin();
        await client.connect();
        await client.query(`drop database if exists ${database} with (force)`);
        await client.end();
      }
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });

    let cookie: string;
    let slug: string;
    let project: { id: string; slug: string; adminToken: string };

    const api = async (host: Plinth, method: string, pathname: string, body?: unknown) => {
      const response = await fetch(`${host.url}/api${pathname}`, {
        method,
        headers: { cookie, origin: host.url, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, body: (await response.json().catch(() => null)) as any };
    };
    const upload = async (host: Plinth, name: string, bytes: Uint8Array) => {
      const response = await fetch(`${host.url}/w/${project.id}/api/files?name=${name}`, {
        method: "POST",
        headers: { authorization: `Bearer ${project.adminToken}`, "content-type": "application/octet-stream" },
        body: bytes as BodyInit,
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    const download = async (host: Plinth, id: string) => {
      const response = await fetch(`${host.url}/w/${project.id}/api/files/${id}`, {
        headers: { authorization: `Bearer ${project.adminToken}` },
      });
      return { status: response.status, bytes: new Uint8Array(await response.arrayBuffer()) };
    };
    const eventually = async <T>(what: string, check: () => Promise<T | undefined>, ms = 30_000): Promise<T> => {
      const deadline = Date.now() + ms;
      for (;;) {
        const value = await check();
        if (value !== undefined) return value;
        if (Date.now() > deadline)
          throw new Error(`timed out waiting for ${what}\n${running.map((p) => p.output()).join("\n")}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    };

    it("serves through one what was stored through the other", async () => {
      const signedUp = await fetch(`${a.url}/api/auth/sign-up/email`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: "ops@example.com", password: "correct-horse-battery", name: "Ops" }),
      });
      expect(signedUp.status).toBe(200);
      cookie = (signedUp.headers.get("set-cookie") ?? "").split(";")[0] as string;
      const org = await api(a, "POST", "/org", { name: "Many Hosts" });
      expect(org.status).toBe(201);
      slug = org.body.org.slug;
      // Created through B, provisioned by the worker.
      const created = await api(b, "POST", `/org/${slug}/projects`, { name: "Spread" });
      expect(created.status).toBe(201);
      project = { ...created.body.project, adminToken: created.body.adminToken };
      await eventually("the worker to provision it", async () => {
        const read = await api(a, "GET", `/org/${slug}/projects/${project.slug}`);
        return read.body.project.status === "active" ? true : undefined;
      });

      const bytes = randomBytes(10 * MiB + 7);
      const stored = await upload(a, "through-a.bin", bytes);
      expect(stored.status).toBe(201);
      const back = await download(b, stored.body.file.id);
      expect(back.status).toBe(200);
      expect(sha256(back.bytes)).toBe(sha256(bytes));
    });

    it("restores through either server a backup the worker took", async () => {
      const kept = await upload(b, "kept.txt", new TextEncoder().encode("kept through a restore"));
      expect(kept.status).toBe(201);
      const backup = await api(a, "POST", `/org/${slug}/projects/${project.slug}/backups`);
      expect(backup.status).toBe(201);
      const id = backup.body.backup.id as string;
      await eventually("the worker to take the backup", async () => {
        const read = await api(b, "GET", `/org/${slug}/projects/${project.slug}/backups/${id}`);
        return read.body.backup.status === "completed" ? true : undefined;
      });
      const removed = await fetch(`${a.url}/w/${project.id}/api/files/${kept.body.file.id}`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${project.adminToken}` },
      });
      expect(removed.status).toBe(204);
      expect((await download(b, kept.body.file.id)).status).toBe(404);
      const restored = await api(b, "POST", `/org/${slug}/projects/${project.slug}/backups/${id}/restore`);
      expect(restored.status).toBe(200);
      const back = await download(a, kept.body.file.id);
      expect(new TextDecoder().decode(back.bytes)).toBe("kept through a restore");
    });

    it("loses no acknowledged upload when one server is killed mid-upload", async () => {
      const sent = Array.from({ length: 16 }, (_, n) => randomBytes(MiB + n * 65_536));
      const acknowledged: { id: string; hash: string }[] = [];
      const uploads = sent.map(async (bytes, n) => {
        try {
          const result = await upload(a, `burst-${n}.bin`, bytes);
          if (result.status === 201) acknowledged.push({ id: result.body.file.id, hash: sha256(bytes) });
        } catch {
          // Cut off by the kill: never acknowledged.
        }
      });
      // Some answered, the rest in flight.
      await eventually("some uploads to be acknowledged", async () => (acknowledged.length >= 3 ? true : undefined));
      a.child.kill("SIGKILL");
      await Promise.all(uploads);
      expect(acknowledged.length).toBeGreaterThanOrEqual(3);
      for (const { id, hash } of acknowledged) {
        const back = await download(b, id);
        expect(back.status, id).toBe(200);
        expect(sha256(back.bytes), id).toBe(hash);
      }
      // Every file listed has its bytes: none half-stored.
      const listed = await fetch(`${b.url}/w/${project.id}/api/files?limit=100`, {
        headers: { authorization: `Bearer ${project.adminToken}` },
      });
      for (const file of ((await listed.json()) as any).files as { id: string; size: number }[]) {
        const back = await download(b, file.id);
        expect(back.status, file.id).toBe(200);
        expect(back.bytes.length, file.id).toBe(file.size);
      }
    });
  },
);

async function waitForReady(plinth: Plinth): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (plinth.child.exitCode !== null) throw new Error(`plinth exited early:\n${plinth.output()}`);
    const ok = await fetch(`${plinth.url}/api/health/ready`).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`plinth did not become ready:\n${plinth.output()}`);
}
