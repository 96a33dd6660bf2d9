import { execFile } from "node:child_process";
import { copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";

/** Where redocly.yaml and .redocly.lint-ignore.yaml are. */
const ROOT = path.resolve(import.meta.dirname, "..");
const CONFIG_FILES = ["redocly.yaml", ".redocly.lint-ignore.yaml"];
const CLI = path.join(path.dirname(createRequire(import.meta.url).resolve("@redocly/cli/package.json")), "bin/cli.js");
/** No telemetry and no update check: the linter must neither wait for a network nor tell one anything. */
const OFFLINE = { REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" };

export interface LintProblem {
  ruleId: string;
  severity: "error" | "warn";
  message: string;
  location: { pointer: string }[];
}

export interface LintReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: LintProblem[];
}

/**
 * Lints OpenAPI documents with Redocly's CLI under redocly.yaml (its `recommended` rules) and the
 * exceptions of .redocly.lint-ignore.yaml, which names each document by its file: `control` is
 * linted as `control.json`, in a directory of its own beside copies of both files.
 */
export async function lintOpenApi(documents: Record<string, unknown>): Promise<Record<string, LintReport>> {
  const dir = await mkdtemp(path.join(tmpdir(), "plinth-openapi-"));
  try {
    await Promise.all([
      ...CONFIG_FILES.map((file) => copyFile(path.join(ROOT, file), path.join(dir, file))),
      ...Object.entries(documents).map(([name, document]) =>
        writeFile(path.join(dir, `${name}.json`), JSON.stringify(document, null, 2)),
      ),
    ]);
    const reports: Record<string, LintReport> = {};
    // Its JSON output puts the reports of several files back to back: one file per run.
    for (const name of Object.keys(documents)) reports[name] = await redoclyLint(dir, `${name}.json`);
    return reports;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function redoclyLint(dir: string, file: string): Promise<LintReport> {
  const args = [CLI, "lint", "--format=json", "--config=redocly.yaml", file];
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      args,
      { cwd: dir, env: { ...process.env, ...OFFLINE }, timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        // It exits 1 when it finds errors, with its report all the same; no report is the CLI failing.
        try {
          resolve(JSON.parse(stdout) as LintReport);
        } catch {
          reject(error ?? new Error(`redocly lint printed no report: ${stderr}`));
        }
      },
    );
  });
}
