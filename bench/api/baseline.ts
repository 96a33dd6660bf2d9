/**
 * The bare baseline of the API benchmark: the least a key-authenticated read can do on this stack.
 * Per request it takes the bearer token, SHA-256-hashes it, looks the hash up in an SQLite table
 * (better-sqlite3, WAL, one prepared statement joining the key to its org) and returns that org
 * as JSON. No logging, no rate limiting, no validation, no OpenAPI.
 *
 * Started by `bench/api/run.ts` as its own process. Environment: PORT, DATA_DIR (where the
 * SQLite file goes) and BASELINE_TOKEN (the one valid token, seeded at start).
 */
import { createHash } from "node:crypto";
import path from "node:path";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { SQLite } from "../../src/db/sqlite.ts";

const port = Number(process.env.PORT ?? 0);
const dataDir = process.env.DATA_DIR;
const token = process.env.BASELINE_TOKEN;
if (!dataDir || !token) throw new Error("baseline: DATA_DIR and BASELINE_TOKEN are required");

const sha256Hex = (value: string) => createHash("sha256").update(value).digest("hex");

const db = new SQLite(path.join(dataDir, "baseline.db"));
db.pragma("journal_mode = WAL");
db.pragma("synchronous = NORMAL");
db.exec(`
  create table orgs (
    id text primary key, slug text not null unique, name text not null, plan_id text not null,
    residency text not null, default_region text not null, status text not null,
    created_at text not null, updated_at text not null
  );
  create table api_keys (
    id text primary key, org_id text not null references orgs(id), token_hash text not null unique
  );
`);
const now = new Date().toISOString();
db.prepare("insert into orgs values (?, ?, ?, ?, ?, ?, ?, ?, ?)").run(
  "org_baseline",
  "baseline-org",
  "Baseline Org",
  "free",
  "global",
  "iad",
  "active",
  now,
  now,
);
db.prepare("insert into api_keys values (?, ?, ?)").run("key_baseline", "org_baseline", sha256Hex(token));

interface OrgRow {
  id: string;
  slug: string;
  name: string;
  plan_id: string;
  residency: string;
  default_region: string;
  status: string;
  created_at: string;
  updated_at: string;
}

const findOrgByKey = db.prepare<[string], OrgRow>(
  "select orgs.* from api_keys join orgs on orgs.id = api_keys.org_id where api_keys.token_hash = ?",
);

const BEARER = /^Bearer\s+(\S+)\s*$/i;

const app = new Hono();
app.get("/health", (c) => c.json({ status: "ok" }));
app.get("/api/orgs", (c) => {
  const bearer = BEARER.exec(c.req.header("authorization") ?? "")?.[1];
  const row = bearer ? findOrgByKey.get(sha256Hex(bearer)) : undefined;
  if (!row) return c.json({ error: { code: "UNAUTHORIZED", message: "invalid API key" } }, 401);
  return c.json({
    orgs: [
      {
        id: row.id,
        slug: row.slug,
        name: row.name,
        planId: row.plan_id,
        residency: row.residency,
        defaultRegion: row.default_region,
        status: row.status,
        createdAt: row.created_at,
        updatedAt: row.updated_at,
        role: "admin",
      },
    ],
  });
});

const server = serve({ fetch: app.fetch, port, hostname: "127.0.0.1" });

const shutdown = () => {
  server.close(() => {
    db.close();
    process.exit(0);
  });
  if ("closeAllConnections" in server) server.closeAllConnections();
};
process.once("SIGTERM", shutdown);
process.once("SIGINT", shutdown);
