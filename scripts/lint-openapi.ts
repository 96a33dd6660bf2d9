/**
 * `npm run lint:openapi`: both OpenAPI documents, as the app serves them, must be clean under
 * Redocly's recommended rules, warnings included (DESIGN §14), which its CLI's exit status does
 * not say. The app runs here on a SQLite database of its own, for as long as it takes to ask.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { loadConfig } from "../src/config.ts";
import { createLogger } from "../src/logger.ts";
import { startServer } from "../src/process/server.ts";
import { lintOpenApi } from "./redocly.ts";

const dataDir = await mkdtemp(path.join(tmpdir(), "plinth-openapi-app-"));
const config = loadConfig({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "silent", WORKERS: "0" });
const server = await startServer({ config, log: createLogger(config) });
const served = async (documentPath: string): Promise<unknown> => {
  const res = await fetch(`${server.url}${documentPath}`);
  if (!res.ok) throw new Error(`GET ${documentPath}: ${res.status}`);
  return res.json();
};
let documents: Record<string, unknown>;
try {
  documents = { control: await served("/api/openapi.json"), workspace: await served("/api/workspace/openapi.json") };
} finally {
  await server.close();
  await rm(dataDir, { recursive: true, force: true });
}

let clean = true;
for (const [name, { totals, problems }] of Object.entries(await lintOpenApi(documents))) {
  console.log(
    `${name}: ${totals.errors} errors, ${totals.warnings} warnings, ${totals.ignored} ignored (.redocly.lint-ignore.yaml)`,
  );
  for (const problem of problems) {
    console.log(`  ${problem.severity} ${problem.ruleId} at ${problem.location[0]?.pointer}: ${problem.message}`);
  }
  if (totals.errors + totals.warnings > 0) clean = false;
}
if (!clean) process.exitCode = 1;
