/**
 * A preload for the Plinth child that times every better-sqlite3 statement (wall time, by SQL
 * text and database file) and writes a summary when the process exits:
 *
 *   SQL_TIMING_OUT=/tmp/sql.txt BENCH_NODE_ARGS="--import ./bench/workspace/sql-timing.mjs" \
 *     BENCH_ONLY=sqlite BENCH_SCENARIOS=1 npx tsx bench/workspace/run.ts
 *
 * Run one scenario at a time: each Plinth child writes the same file, and its worker thread the
 * same name with `.<threadId>` appended. Timing adds overhead of its own, so use it for statement
 * counts and shares, not for throughput.
 */
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { threadId } from "node:worker_threads";

const require = createRequire(`${process.cwd()}/package.json`);
// The build Plinth loads on this Node (see src/db/sqlite.ts).
const Database = require(Number(process.versions.node.split(".")[0]) < 24 ? "better-sqlite3" : "better-sqlite3-napi");
const stats = new Map();
let patched = false;

const prepare = Database.prototype.prepare;
Database.prototype.prepare = function (source, ...rest) {
  const statement = prepare.call(this, source, ...rest);
  if (!patched) {
    patched = true;
    const proto = Object.getPrototypeOf(statement);
    for (const method of ["run", "get", "all", "iterate"]) {
      const original = proto[method];
      proto[method] = function (...args) {
        const started = process.hrtime.bigint();
        try {
          return original.apply(this, args);
        } finally {
          const ns = Number(process.hrtime.bigint() - started);
          const key = `${this.database.name.split("/").pop()} ${this.source.replace(/\s+/g, " ").slice(0, 160)}`;
          const entry = stats.get(key) ?? { count: 0, ns: 0, max: 0 };
          entry.count++;
          entry.ns += ns;
          entry.max = Math.max(entry.max, ns);
          stats.set(key, entry);
        }
      };
    }
  }
  return statement;
};

process.on("exit", () => {
  const rows = [...stats].sort((a, b) => b[1].ns - a[1].ns);
  const totalNs = rows.reduce((sum, [, s]) => sum + s.ns, 0);
  const count = rows.reduce((sum, [, s]) => sum + s.count, 0);
  const lines = [`total ${(totalNs / 1e6).toFixed(0)} ms in ${count} statements`];
  for (const [key, s] of rows.slice(0, 40)) {
    lines.push(
      `${(s.ns / 1e6).toFixed(0).padStart(7)} ms ${String(s.count).padStart(7)} x ` +
        `${(s.ns / s.count / 1000).toFixed(0).padStart(6)} us avg ${(s.max / 1e6).toFixed(1).padStart(6)} ms max  ${key}`,
    );
  }
  const out = process.env.SQL_TIMING_OUT ?? "sql-timing.txt";
  writeFileSync(threadId === 0 ? out : `${out}.${threadId}`, `${lines.join("\n")}\n`);
});
