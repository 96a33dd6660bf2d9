import { createRequire } from "node:module";
import type BetterSqlite3 from "better-sqlite3";
import { NODE_MAJOR } from "../lib/node-version.ts";

/**
 * better-sqlite3, in the build that is safe on this Node.
 *
 * - Before Node 24: version 12 (V8's own API, built for this Node on install). It prepares a
 *   statement in about a third of the time 13 takes.
 * - From Node 24: version 13 (Node-API, prebuilt), installed as the optional dependency
 *   `better-sqlite3-napi`. Version 12 built against Node 24.19's headers or later aborts the
 *   process whenever a collected statement is finalized outside JavaScript, as an idle GC does
 *   (`Assertion failed: (env) != nullptr` in `RemoveEnvironmentCleanupHook`; nodejs/node#65446),
 *   and 13 does not run on Node 20 (npm skips it there).
 *
 * Both have the same API.
 */
const require = createRequire(import.meta.url);

function load(): typeof BetterSqlite3 {
  if (NODE_MAJOR < 24) return require("better-sqlite3");
  try {
    return require("better-sqlite3-napi");
  } catch (error) {
    throw new Error(
      `Node ${process.versions.node} needs better-sqlite3 13, installed as better-sqlite3-napi: run npm install with this Node (${(error as Error).message})`,
    );
  }
}

export const SQLite: typeof BetterSqlite3 = load();
