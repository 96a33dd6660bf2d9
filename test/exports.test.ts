import { type SpawnSyncOptions, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAY_MS } from "../src/clock.ts";
import { SQLite } from "../src/db/sqlite.ts";
import { dumpWorkspace } from "../src/domains/exports/sql-dump.ts";
import { openWorkspaceFile } from "../src/domains/projects/workspace-db.ts";
import {
  addMember,
  call,
  callWorkspace,
  createActiveProject,
  createApiKey,
  createOrg,
  expectError,
  expectStatus,
  type Mailbox,
  signUp,
  startApp,
  startMailbox,
  type TestApp,
  type TestUser,
  tag,
  until,
} from "./harness.ts";

/**
 * Where dumps are loaded with `psql`: the suite's PostgreSQL, or the local one when the suite runs
 * on SQLite (a dump is meant to load into either database, whichever one Plinth runs on).
 */
const LOAD_PG_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/**
 * Text that breaks naive SQL quoting, in one database or the other. Items are stored as JSON text,
 * so line breaks reach a dump escaped; the dump writer's own test below takes them raw.
 */
const TRICKY: Record<string, unknown> = {
  quote: "it's O'Brien's ''doubled''",
  backslash: "C:\\path\\to\\file \\' \\\\ ends with \\",
  unicode: "Ünïcødé — 中文 — العربية — ẞ",
  emoji: "🎉 👩‍👩‍👧 🏳️‍🌈",
  json: '{"say": "\\"hi\\"", \'single\': [1, "a\'b"]}',
  lines: "one\ntwo\r\nthree\ttab\u2028four",
  injection: "'); DROP TABLE items; --",
  dotCommand: "first\n.tables\n.quit\nlast",
  psqlMeta: "a\n\\q\n\\! echo nope\n:name :'name' $1 $$ b",
  comment: "/* not a comment */ -- nor this",
  nested: { q: "\"quoted\" and 'single'", list: ["a'b", 'c"d', "e\\f"] },
};

interface Loaded {
  tables: string[];
  indexes: string[];
  rows(table: string): Record<string, unknown>[];
}

/** Runs a command line tool; it must succeed and say nothing on stderr. */
function run(command: string, args: string[], options: SpawnSyncOptions = {}): void {
  const result = spawnSync(command, args, { ...options, encoding: "utf8" });
  if (result.error || result.status !== 0 || result.stderr) {
    throw new Error(`${command} failed (exit ${result.status}): ${result.stderr || result.error?.message}`);
  }
}

/** Loads a dump with the `sqlite3` CLI into a new database file, as given. */
function loadIntoSqlite(dump: string, dir: string): Loaded {
  const file = path.join(dir, `${tag()}.db`);
  run("sqlite3", ["-bail", file], { input: dump });
  const db = new SQLite(file, { readonly: true });
  const names = (type: string) =>
    (db.prepare("select name from sqlite_master where type = ? order by name").all(type) as { name: string }[]).map(
      (row) => row.name,
    );
  const loaded = {
    tables: names("table"),
    indexes: names("index").filter((name) => !name.startsWith("sqlite_autoindex")),
    rows: (table: string) => db.prepare(`select * from "${table}"`).all() as Record<string, unknown>[],
  };
  return loaded;
}

/** Loads a dump with `psql` into a new schema (dropped by `dropSchemas`), as given. */
async function loadIntoPostgres(dump: string, dir: string, client: pg.Client, schemas: string[]): Promise<Loaded> {
  const schema = `export_${randomBytes(6).toString("hex")}`;
  await client.query(`create schema ${schema}`);
  schemas.push(schema);
  const file = path.join(dir, `${schema}.sql`);
  writeFileSync(file, dump);
  run("psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", LOAD_PG_URL, "-f", file], {
    env: { ...process.env, PGOPTIONS: `-c search_path=${schema}` },
  });
  const tables = await client.query<{ name: string }>(
    "select table_name as name from information_schema.tables where table_schema = $1 order by 1",
    [schema],
  );
  const indexes = await client.query<{ name: string }>(
    "select indexname as name from pg_indexes where schemaname = $1 and indexname not like '%_pkey' order by 1",
    [schema],
  );
  const rows = new Map<string, Record<string, unknown>[]>();
  for (const { name } of tables.rows) rows.set(name, (await client.query(`select * from ${schema}."${name}"`)).rows);
  return {
    tables: tables.rows.map((row) => row.name),
    indexes: indexes.rows.map((row) => row.name),
    rows: (table) => rows.get(table) ?? [],
  };
}

const byId = (a: Record<string, unknown>, b: Record<string, unknown>) => (String(a.id) < String(b.id) ? -1 : 1);

describe("org export", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let owner: TestUser;
  let slug: string;
  let orgId: string;
  let alpha: any;
  let beta: any;
  let failed: any;
  let paused: any;
  let scratch: string;
  let pgClient: pg.Client;
  const schemas: string[] = [];
  const callers: Record<string, { cookie?: string; token?: string }> = {};
  /** The workspace users signed up in beta, as the API answered. */
  const betaUsers: { id: string; email: string }[] = [];

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(tmpdir(), "plinth-exports-"));
    pgClient = new pg.Client({ connectionString: LOAD_PG_URL });
    await pgClient.connect();
    mailbox = await startMailbox();
    app = await startApp({
      SMTP_URL: mailbox.url,
      AUTH_RATE_LIMIT_PER_MINUTE: "10000",
      RATE_LIMIT_PER_MINUTE: "100000",
      SERVED_REGIONS: "ist,fra,ams,lhr,sjc,iad,sin",
    });
    owner = await signUp(app);
    const org = await createOrg(app, owner, `Export Org ${tag()}`);
    slug = org.slug;
    orgId = org.id;
    alpha = await createActiveProject(app, owner, slug, "Alpha");
    beta = await createActiveProject(app, owner, slug, "Beta");
    // Provisioning fails in a region this deployment does not serve: a project with no workspace.
    const created = await call(app, "POST", `/org/${slug}/projects`, {
      cookie: owner.cookie,
      body: { name: "Never Provisioned", region: "syd" },
    });
    expectStatus(created, 201);
    failed = created.body.project;
    await until("the unserved project to fail", async () => {
      const read = await call(app, "GET", `/org/${slug}/projects/${failed.slug}`, { cookie: owner.cookie });
      return read.body.project.status === "failed";
    });
    paused = await createActiveProject(app, owner, slug, "Resting");
    expectStatus(
      await callWorkspace(app, paused.id, "POST", "/collections", { token: paused.adminToken, body: { slug: "kept" } }),
      201,
    );
    expectStatus(
      await callWorkspace(app, paused.id, "POST", "/items/kept", { token: paused.adminToken, body: { still: "here" } }),
      201,
    );
    expectStatus(await call(app, "POST", `/org/${slug}/projects/${paused.slug}/pause`, { cookie: owner.cookie }), 200);
    const gone = await createActiveProject(app, owner, slug, "Gone");
    expectStatus(await call(app, "DELETE", `/org/${slug}/projects/${gone.slug}`, { cookie: owner.cookie }), 200);

    const admin = (token: string) => ({ token });
    // Alpha: tricky text in items, files with tricky names.
    const alphaAdmin = admin(alpha.adminToken);
    expectStatus(
      await callWorkspace(app, alpha.id, "POST", "/collections", {
        ...alphaAdmin,
        body: { slug: "notes", name: 'It\'s "notes"' },
      }),
      201,
    );
    for (const [key, value] of Object.entries(TRICKY)) {
      expectStatus(
        await callWorkspace(app, alpha.id, "POST", "/items/notes", { ...alphaAdmin, body: { key, value } }),
        201,
      );
    }
    const long = `${"long 'text' \\ ".repeat(30_000)}end`;
    expectStatus(
      await callWorkspace(app, alpha.id, "POST", "/items/notes", { ...alphaAdmin, body: { key: "long", value: long } }),
      201,
    );
    for (const name of ['it\'s "quoted" ü 🎉.txt', "back\\slash;semi.txt"]) {
      const upload = await fetch(`${app.url}/w/${alpha.id}/api/files?name=${encodeURIComponent(name)}`, {
        method: "POST",
        headers: { authorization: `Bearer ${alpha.adminToken}`, "content-type": "text/plain" },
        body: `bytes of ${name}`,
      });
      expect(upload.status).toBe(201);
    }
    // Beta: more items than one read takes, and users with sessions.
    const betaAdmin = admin(beta.adminToken);
    expectStatus(
      await callWorkspace(app, beta.id, "POST", "/collections", { ...betaAdmin, body: { slug: "posts" } }),
      201,
    );
    for (let i = 0; i < 230; i++) {
      expectStatus(
        await callWorkspace(app, beta.id, "POST", "/items/posts", {
          ...betaAdmin,
          body: { n: i, title: `post ${i}'s` },
        }),
        201,
      );
    }
    for (const email of [`o'brien-${tag()}@example.test`, `plain-${tag()}@example.test`]) {
      const signed = await callWorkspace(app, beta.id, "POST", "/auth/sign-up", {
        body: { email, password: "long-enough-password" },
      });
      expectStatus(signed, 201);
      betaUsers.push({ id: signed.body.user.id, email });
    }

    callers.owner = { cookie: owner.cookie };
    callers.admin = { cookie: (await addMember(app, mailbox, owner, slug, "admin")).user.cookie };
    callers.developer = { cookie: (await addMember(app, mailbox, owner, slug, "developer")).user.cookie };
    callers.viewer = { cookie: (await addMember(app, mailbox, owner, slug, "viewer")).user.cookie };
    callers.full = { token: (await createApiKey(app, owner, slug, "full")).token };
    callers.deploy = { token: (await createApiKey(app, owner, slug, "deploy")).token };
    callers["read-only"] = { token: (await createApiKey(app, owner, slug, "read-only")).token };
    const outsider = await signUp(app);
    const otherSlug = (await createOrg(app, outsider, `Other Org ${tag()}`)).slug;
    callers.outsider = { cookie: outsider.cookie };
    callers["outsider key"] = { token: (await createApiKey(app, outsider, otherSlug, "full")).token };
    callers.anonymous = {};
  }, 120_000);

  afterAll(async () => {
    for (const schema of schemas) await pgClient?.query(`drop schema if exists ${schema} cascade`);
    await pgClient?.end();
    await app?.close();
    await mailbox?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  async function exportAs(who: string) {
    return call(app, "POST", `/org/${slug}/export`, callers[who]);
  }

  async function download(filename: string, who = "owner", org = slug) {
    return call(app, "GET", `/org/${org}/exports/${filename}`, callers[who]);
  }

  async function list(project: any, pathname: string, key: string) {
    const res = await callWorkspace(app, project.id, "GET", pathname, { token: project.adminToken });
    expectStatus(res, 200);
    return res.body[key] as any[];
  }

  it("writes one dump per live project that sqlite3 and psql both load, rows and values as the API lists them", async () => {
    const res = await exportAs("owner");
    expectStatus(res, 200);
    expect(Object.keys(res.body).sort()).toEqual(["exportedAt", "projects"]);
    expect(new Date(res.body.exportedAt).toISOString()).toBe(res.body.exportedAt);
    // Every project not deleted, in the order they were made; "Gone" is not there.
    expect(res.body.projects.map((entry: any) => entry.slug)).toEqual([
      alpha.slug,
      beta.slug,
      failed.slug,
      paused.slug,
    ]);
    for (const entry of res.body.projects) {
      expect(Object.keys(entry).sort()).toEqual(["filename", "slug"]);
      expect(entry.filename).toMatch(new RegExp(`^${entry.slug}-\\d{8}T\\d{6}Z-[0-9a-f]{32}\\.sql$`));
    }
    const dumps: Record<string, string> = {};
    for (const entry of res.body.projects) {
      const got = await download(entry.filename);
      expectStatus(got, 200);
      expect(got.headers.get("content-type")).toBe("application/sql");
      expect(got.headers.get("content-disposition")).toBe(`attachment; filename="${entry.filename}"`);
      expect(Number(got.headers.get("content-length"))).toBe(Buffer.byteLength(got.body));
      dumps[entry.slug] = got.body;
    }

    const alphaItems = (await list(alpha, "/items/notes?limit=500", "items")).sort(byId);
    const alphaFiles = (await list(alpha, "/files?limit=500", "files")).sort(byId);
    const alphaCollections = await list(alpha, "/collections", "collections");
    const betaItems = (await list(beta, "/items/posts?limit=500", "items")).sort(byId);
    expect(alphaItems).toHaveLength(Object.keys(TRICKY).length + 1);
    expect(betaItems).toHaveLength(230);

    const alphaDump = dumps[alpha.slug] as string;
    expect(alphaDump).toMatch(/^-- Plinth export of project alpha /);
    expect(alphaDump).toContain("\nBEGIN;\n");
    expect(alphaDump.endsWith("\nCOMMIT;\n")).toBe(true);

    for (const load of [
      async (dump: string) => loadIntoSqlite(dump, scratch),
      (dump: string) => loadIntoPostgres(dump, scratch, pgClient, schemas),
    ]) {
      const loadedAlpha = await load(alphaDump);
      // Every workspace table but the outbox.
      expect(loadedAlpha.tables).toEqual(["_plinth_meta", "collections", "files", "items", "user_sessions", "users"]);
      expect(loadedAlpha.indexes).toEqual(["items_collection", "users_email_lower"]);
      expect(Object.fromEntries(loadedAlpha.rows("_plinth_meta").map((row) => [row.key, row.value]))).toEqual({
        template: "default",
        template_version: alpha.templateVersion,
      });
      const items = loadedAlpha
        .rows("items")
        .map((row) => ({
          ...JSON.parse(row.data as string),
          id: row.id,
          createdAt: row.created_at,
          updatedAt: row.updated_at,
        }))
        .sort(byId);
      expect(items).toEqual(alphaItems);
      expect(loadedAlpha.rows("items").every((row) => row.collection === "notes")).toBe(true);
      const files = loadedAlpha
        .rows("files")
        .map((row) => ({
          id: row.id,
          name: row.name,
          contentType: row.content_type,
          size: Number(row.size),
          createdAt: row.created_at,
        }))
        .sort(byId);
      expect(files).toEqual(alphaFiles);
      expect(
        loadedAlpha.rows("collections").map((row) => ({ slug: row.slug, name: row.name, createdAt: row.created_at })),
      ).toEqual(alphaCollections);

      const loadedBeta = await load(dumps[beta.slug] as string);
      expect(
        loadedBeta
          .rows("items")
          .map((row) => row.id)
          .sort(),
      ).toEqual(betaItems.map((item) => item.id));
      const users = loadedBeta.rows("users").sort(byId);
      expect(users.map((user) => ({ id: user.id, email: user.email }))).toEqual([...betaUsers].sort(byId));
      // Password hashes are the workspace's data; live sessions are not carried.
      for (const user of users) expect(String(user.password_hash).length).toBeGreaterThan(20);
      expect(loadedBeta.rows("user_sessions")).toEqual([]);

      // No workspace yet: a dump that creates nothing, and loads.
      const loadedFailed = await load(dumps[failed.slug] as string);
      expect(loadedFailed.tables).toEqual([]);
      // Paused: exported as it is.
      const loadedPaused = await load(dumps[paused.slug] as string);
      expect(loadedPaused.rows("items").map((row) => JSON.parse(row.data as string))).toEqual([{ still: "here" }]);
    }
    expect(dumps[failed.slug]).toMatch(
      new RegExp(`^-- Plinth export of project ${failed.slug} \\(${failed.id}, failed\\)`),
    );
    expect(dumps[failed.slug]).toMatch(/\nBEGIN;\nCOMMIT;\n$/);
    expect(dumps[beta.slug]).toContain("-- user_sessions: rows left out");
  });

  it("keeps the unique e-mail index working in a loaded dump", async () => {
    const res = await exportAs("owner");
    const entry = res.body.projects.find((e: any) => e.slug === beta.slug);
    const dump = (await download(entry.filename)).body as string;
    const shouting = (betaUsers[0] as { email: string }).email.toUpperCase();
    const duplicate = `INSERT INTO "users" ("id", "email", "password_hash", "created_at", "updated_at") VALUES ('usr_x', '${shouting.replaceAll("'", "''")}', 'h', 't', 't');\n`;
    const file = path.join(scratch, `${tag()}.db`);
    run("sqlite3", [file], { input: dump });
    expect(() => run("sqlite3", ["-bail", file], { input: duplicate })).toThrow(/UNIQUE constraint failed/);
  });

  it("dumps a workspace while writes to it go on: all that came before, each row once, nothing uncommitted", async () => {
    const before = new Set((await list(beta, "/items/posts?limit=500", "items")).map((item) => item.id));
    const writes = Array.from({ length: 20 }, (_, i) =>
      callWorkspace(app, beta.id, "POST", "/items/posts", { token: beta.adminToken, body: { during: i } }),
    );
    const res = await exportAs("owner");
    for (const write of await Promise.all(writes)) expectStatus(write, 201);
    expectStatus(res, 200);
    const after = new Set((await list(beta, "/items/posts?limit=500", "items")).map((item) => item.id));
    const entry = res.body.projects.find((e: any) => e.slug === beta.slug);
    const dumped = loadIntoSqlite((await download(entry.filename)).body, scratch)
      .rows("items")
      .map((row) => String(row.id));
    // Everything committed before the export began, nothing that never committed, each row once.
    for (const id of before) expect(dumped).toContain(id);
    for (const id of dumped) expect(after.has(id)).toBe(true);
    expect(new Set(dumped).size).toBe(dumped.length);
  });

  it("writes each dump to disk before answering, under the org's own directory", async () => {
    const res = await exportAs("owner");
    expectStatus(res, 200);
    const dir = path.join(app.config.dataDir, "exports", orgId);
    const files = readdirSync(dir);
    for (const entry of res.body.projects) expect(files).toContain(entry.filename);
    expect(files.some((name) => name.endsWith(".part"))).toBe(false);
  });

  it("audits org.exported with the projects and filenames", async () => {
    const res = await exportAs("full");
    expectStatus(res, 200);
    const audit = await call(app, "GET", `/org/${slug}/audit?action=org.exported&limit=1`, { cookie: owner.cookie });
    expectStatus(audit, 200);
    const [event] = audit.body.events;
    expect(event).toMatchObject({
      action: "org.exported",
      actor: { type: "api_key" },
      target: { type: "org", id: orgId },
      data: {
        projects: res.body.projects.map((entry: any) => entry.slug),
        filenames: res.body.projects.map((entry: any) => entry.filename),
      },
    });
  });

  it("lets owners, admins and full keys export and download; others 403, outsiders 404", async () => {
    const { body } = await exportAs("owner");
    const filename = body.projects[0].filename;
    const expected: Record<string, number> = {
      owner: 200,
      admin: 200,
      full: 200,
      developer: 403,
      viewer: 403,
      deploy: 403,
      "read-only": 403,
      outsider: 404,
      "outsider key": 404,
      anonymous: 401,
    };
    for (const [who, status] of Object.entries(expected)) {
      const exported = await exportAs(who);
      if (status === 200) expectStatus(exported, 200);
      else expectError(exported, status);
      const got = await download(filename, who);
      if (status === 200) expectStatus(got, 200);
      else expectError(got, status);
    }
  });

  it("answers 404 for a name that is a path, is not a dump's, is unknown, or is another org's dump", async () => {
    const { body } = await exportAs("owner");
    const own: string = body.projects[0].filename;
    for (const name of [
      "..%2F..%2Fplinth.db",
      "%2e%2e%2fplinth.db",
      `..%2F${orgId}%2F${own}`,
      `sub%2F${own}`,
      `${own}.part`,
      own.replace(/[0-9a-f]{32}\.sql$/, `${"0".repeat(32)}.sql`),
      "plinth.db",
    ]) {
      expectError(await download(name), 404, "NOT_FOUND");
    }
    // Another org's dump, asked for by a caller who is admin in both orgs.
    const other = await createOrg(app, owner, `Second Org ${tag()}`);
    await createActiveProject(app, owner, other.slug, "Elsewhere");
    const theirs = await call(app, "POST", `/org/${other.slug}/export`, { cookie: owner.cookie });
    expectStatus(theirs, 200);
    const foreign = theirs.body.projects[0].filename;
    expectStatus(await download(foreign, "owner", other.slug), 200);
    expectError(await download(foreign, "owner", slug), 404, "NOT_FOUND");
  });

  it("documents both operations", async () => {
    const doc = (await call(app, "GET", "/openapi.json")).body;
    expect(doc.paths["/org/{slug}/export"].post.responses["200"]).toBeTruthy();
    expect(doc.paths["/org/{slug}/exports/{filename}"].get.responses["200"].content["application/sql"]).toBeTruthy();
  });
});

describe("export retention", () => {
  let app: TestApp;

  afterAll(() => app?.close());

  async function exportOrg(owner: TestUser, orgSlug: string): Promise<string> {
    const res = await call(app, "POST", `/org/${orgSlug}/export`, { cookie: owner.cookie });
    expectStatus(res, 200);
    return res.body.projects[0].filename;
  }

  async function runExpiry(): Promise<void> {
    const { deps } = app.server;
    const idempotencyKey = `test-${tag()}`;
    await deps.jobs.enqueue(deps.db, { kind: "exports.expire", payload: {}, idempotencyKey });
    await until("the expiry job to finish", async () => {
      const job = await deps.db
        .selectFrom("jobs")
        .select("status")
        .where("idempotency_key", "=", idempotencyKey)
        .executeTakeFirst();
      return job?.status === "succeeded";
    });
  }

  it("removes dumps past EXPORT_RETENTION_DAYS and leftovers of exports cut short, and nothing else", async () => {
    app = await startApp();
    const owner = await signUp(app);
    const org = await createOrg(app, owner, `Retained Org ${tag()}`);
    await createActiveProject(app, owner, org.slug, "Kept");
    const dir = path.join(app.config.dataDir, "exports", org.id);

    const old = await exportOrg(owner, org.slug);
    // A crash's leftover from the same moment, and a file that is no dump.
    writeFileSync(
      path.join(dir, `${old.replace(/[0-9a-f]{32}\.sql$/, "f".repeat(32))}.sql.0123456789ab.part`),
      "BEGIN;",
    );
    writeFileSync(path.join(dir, "notes.txt"), "mine");
    app.clock.advance(4 * DAY_MS);
    const recent = await exportOrg(owner, org.slug);
    app.clock.advance(3 * DAY_MS + 60_000);

    // Seven days and a minute old: gone for downloads at once, from disk at the daily run.
    expectError(await call(app, "GET", `/org/${org.slug}/exports/${old}`, { cookie: owner.cookie }), 404, "NOT_FOUND");
    expect(existsSync(path.join(dir, old))).toBe(true);
    await runExpiry();
    expect(readdirSync(dir).sort()).toEqual(["notes.txt", recent].sort());
    expectStatus(await call(app, "GET", `/org/${org.slug}/exports/${recent}`, { cookie: owner.cookie }), 200);
  });

  it("keeps every dump when EXPORT_RETENTION_DAYS is 0", async () => {
    await app?.close();
    app = await startApp({ EXPORT_RETENTION_DAYS: "0" });
    const owner = await signUp(app);
    const org = await createOrg(app, owner, `Forever Org ${tag()}`);
    await createActiveProject(app, owner, org.slug, "Kept");
    const filename = await exportOrg(owner, org.slug);
    app.clock.advance(400 * DAY_MS);
    await runExpiry();
    expect(existsSync(path.join(app.config.dataDir, "exports", org.id, filename))).toBe(true);
    expectStatus(await call(app, "GET", `/org/${org.slug}/exports/${filename}`, { cookie: owner.cookie }), 200);
  });
});

describe("a dump's text", () => {
  const schemas: string[] = [];
  let scratch: string;
  let client: pg.Client;

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(tmpdir(), "plinth-dump-text-"));
    client = new pg.Client({ connectionString: LOAD_PG_URL });
    await client.connect();
  });

  afterAll(async () => {
    for (const schema of schemas) await client?.query(`drop schema if exists ${schema} cascade`);
    await client?.end();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("carries raw line breaks, lines that look like sqlite3 dot-commands or psql meta-commands, and comments", async () => {
    const values = [
      "first\n.tables\n.quit\nlast",
      "a\n\\q\n\\! echo nope\n:name :'name'\nb",
      "x\r\ny\rz\n",
      "-- not a comment\n/* nor this */;\nBEGIN;\nCOMMIT;",
      "'\n'\n''",
      "before\ngo\n/\n\\.\n\\g\n#hash\n\n   \nafter",
    ];
    const { db, sqlite } = openWorkspaceFile(path.join(scratch, "source.db"));
    sqlite.exec('create table "notes" ("id" integer primary key, "body" text not null)');
    const insert = sqlite.prepare('insert into "notes" ("id", "body") values (?, ?)');
    for (const [id, body] of values.entries()) insert.run(id, body);
    const written: string[] = [];
    const sink = { write: async (text: string) => void written.push(text) };
    await dumpWorkspace(sink, { db, dialect: "sqlite", schema: "" });
    const dump = written.join("");
    await db.destroy();
    sqlite.close();

    for (const loaded of [loadIntoSqlite(dump, scratch), await loadIntoPostgres(dump, scratch, client, schemas)]) {
      const rows = loaded.rows("notes").sort((a, b) => Number(a.id) - Number(b.id));
      expect(rows.map((row) => row.body)).toEqual(values);
    }
  });
});
