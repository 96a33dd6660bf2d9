/**
 * What the MCP server costs over REST: `tools/list`, and the read tool `get_project` against the
 * same read over REST (`GET /api/org/{slug}/projects/{projectSlug}`), each at BENCH_CONNECTIONS
 * (16) connections with one API key, in alternating rounds against one server per database.
 * Prints requests/s, p50/p99 and the server's peak RSS. Target: MCP at most twice REST's cost.
 */
import { cpus } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { apiJson, benchProject, envInt, memoryOf, startBenchPlinth } from "../lib.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const DIST = path.resolve(ROOT, process.env.BENCH_DIST ?? "dist");
const ROUNDS = envInt("BENCH_ROUNDS", 3);
const CONNECTIONS = envInt("BENCH_CONNECTIONS", 16);
const DURATION = envInt("BENCH_DURATION", 8);
const ONLY = new Set((process.env.BENCH_ONLY ?? "sqlite,postgres").split(",").map((s) => s.trim()));
const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const MB = 1024 * 1024;

interface Load {
  method?: "GET" | "POST";
  url: string;
  headers: Record<string, string>;
  body?: string;
  /** Text its answer holds when it worked (checked once before the load). */
  expect: string;
}

interface Figures {
  rps: number;
  p50: number;
  p99: number;
  failed: number;
}

async function measure(load: Load, duration: number): Promise<Figures> {
  const result = await autocannon({
    url: load.url,
    method: load.method ?? "GET",
    headers: load.headers,
    body: load.body,
    connections: CONNECTIONS,
    duration,
  });
  const ok = result.statusCodeStats?.["200"]?.count ?? 0;
  return {
    rps: ok / duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    failed: result.requests.total - ok,
  };
}

/** One request of the load, whose answer must hold `expect` (a tool error is a 200 too). */
async function check(label: string, load: Load): Promise<void> {
  const response = await fetch(load.url, { method: load.method ?? "GET", headers: load.headers, body: load.body });
  const text = await response.text();
  if (response.status !== 200 || !text.includes(load.expect)) {
    throw new Error(`${label}: ${response.status} ${text.slice(0, 300)}`);
  }
}

async function runDatabase(database: "sqlite" | "postgres") {
  const { url, child, stop } = await startBenchPlinth({
    root: ROOT,
    dist: DIST,
    database,
    pgAdminUrl: PG_ADMIN_URL,
    name: "mcp",
  });
  try {
    const { cookie, org, project } = await benchProject(url, "Agents");
    const { token } = await apiJson(`${url}/api/org/${org.slug}/api-keys`, {
      method: "POST",
      cookie,
      body: JSON.stringify({ name: "bench agent", scope: "full" }),
    });
    const mcpHeaders = {
      authorization: `Bearer ${token}`,
      accept: "application/json, text/event-stream",
      "content-type": "application/json",
      "mcp-protocol-version": "2025-06-18",
    };
    const rpc = (method: string, params: unknown) => JSON.stringify({ jsonrpc: "2.0", id: 1, method, params });
    const loads: Record<string, Load> = {
      "REST GET project": {
        url: `${url}/api/org/${org.slug}/projects/${project.slug}`,
        headers: { authorization: `Bearer ${token}` },
        expect: project.id,
      },
      "MCP get_project": {
        method: "POST",
        url: `${url}/api/mcp`,
        headers: mcpHeaders,
        body: rpc("tools/call", { name: "get_project", arguments: { projectSlug: project.slug } }),
        expect: project.id,
      },
      // The SDK's own cost: a server and transport answering a ping, which runs no tool.
      "MCP ping": {
        method: "POST",
        url: `${url}/api/mcp`,
        headers: mcpHeaders,
        body: rpc("ping", {}),
        expect: '"result":{}',
      },
      "MCP tools/list": {
        method: "POST",
        url: `${url}/api/mcp`,
        headers: mcpHeaders,
        body: rpc("tools/list", {}),
        expect: '"name":"restore_project"',
      },
    };
    for (const [label, load] of Object.entries(loads)) {
      await check(label, load);
      await measure(load, 2);
    }
    const all: Record<string, Figures[]> = {};
    for (let round = 1; round <= ROUNDS; round++) {
      console.log(`\n== ${database}, round ${round}`);
      for (const [label, load] of Object.entries(loads)) {
        const figures = await measure(load, DURATION);
        all[label] = [...(all[label] ?? []), figures];
        console.log(
          `  ${label.padEnd(18)} ${figures.rps.toFixed(0).padStart(6)} req/s  p50 ${String(figures.p50).padStart(3)} ms` +
            `  p99 ${String(figures.p99).padStart(3)} ms${figures.failed > 0 ? `  (${figures.failed} failed)` : ""}`,
        );
      }
    }
    const mean = (label: string) => {
      const runs = all[label] ?? [];
      return runs.reduce((sum, figures) => sum + figures.rps, 0) / runs.length;
    };
    const rest = mean("REST GET project");
    console.log(`\n  ${database}: mean req/s over ${ROUNDS} rounds`);
    for (const label of Object.keys(loads)) {
      console.log(
        `    ${label.padEnd(18)} ${mean(label).toFixed(0).padStart(6)}  cost ×${(rest / mean(label)).toFixed(2)}`,
      );
    }
    console.log(`    peak RSS ${(memoryOf(child.pid).hwm / MB).toFixed(0)} MB`);
  } finally {
    await stop();
  }
}

console.log(
  `MCP benchmark: ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), Node ${process.version}, ` +
    `${CONNECTIONS} connections, ${DURATION} s per load`,
);
for (const database of ["sqlite", "postgres"] as const) {
  if (ONLY.has(database)) await runDatabase(database);
}
