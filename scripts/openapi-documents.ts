import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { loadConfig } from "../src/config.ts";
import { createLogger } from "../src/logger.ts";
import { startServer } from "../src/process/server.ts";

/** The API's two OpenAPI documents. */
export type OpenApiDocuments = {
  control: Record<string, unknown>;
  workspace: Record<string, unknown>;
};

/**
 * Both OpenAPI documents exactly as the app serves them (`GET /api/openapi.json` and
 * `/api/workspace/openapi.json`), from a server started here on a SQLite database of its own for
 * as long as it takes to ask.
 */
export async function openApiDocuments(): Promise<OpenApiDocuments> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "plinth-openapi-app-"));
  const config = loadConfig({ PORT: "0", HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "silent", WORKERS: "0" });
  const server = await startServer({ config, log: createLogger(config) });
  const served = async (documentPath: string) => {
    const response = await fetch(`${server.url}${documentPath}`);
    if (!response.ok) throw new Error(`GET ${documentPath}: ${response.status}`);
    return (await response.json()) as Record<string, unknown>;
  };
  try {
    return { control: await served("/api/openapi.json"), workspace: await served("/api/workspace/openapi.json") };
  } finally {
    await server.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}
