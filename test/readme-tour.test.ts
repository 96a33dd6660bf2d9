import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApp, type TestApp } from "./harness.ts";
import { freePort } from "./ports.ts";

/**
 * The README's tour, run as written (issue 32): its `sh` code blocks, in order, as one
 * `bash -euo pipefail` script, against a fresh server on the built-in plan catalog, with the
 * built `plinth` on PATH as `npm link` puts it. A step that stops working fails this test, so
 * the tour cannot rot.
 */

const ROOT = path.resolve(import.meta.dirname, "..");

/** The `sh` blocks of the README's "A tour" section. */
function tourScript(readme: string): string {
  const start = readme.indexOf("\n## A tour");
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]).join("\n");
}

describe("the README's tour", () => {
  let app: TestApp;
  let scratch: string;

  beforeAll(async () => {
    const port = await freePort();
    app = await startApp({ PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}`, PLANS_FILE: "" });
    scratch = mkdtempSync(path.join(tmpdir(), "plinth-tour-"));
    // What `npm link` gives: `plinth` on PATH, running this checkout's build.
    mkdirSync(path.join(scratch, "bin"));
    writeFileSync(
      path.join(scratch, "bin/plinth"),
      `#!/bin/sh\nexec "${process.execPath}" "${ROOT}/bin/plinth.js" "$@"\n`,
    );
    chmodSync(path.join(scratch, "bin/plinth"), 0o755);
  });
  afterAll(async () => {
    await app?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("is at most about 200 lines, with the two commands", () => {
    const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
    expect(readme.split("\n").length).toBeLessThanOrEqual(200);
    expect(readme).toContain("npm install && npm start");
    expect(readme).toContain("npm install && npm test");
    expect(tourScript(readme)).not.toMatch(/…|<[a-z-]+>|uuidgen|jq /);
  });

  it("runs as written, step by step", async () => {
    const script = tourScript(readFileSync(path.join(ROOT, "README.md"), "utf8"));
    expect(script.split("\n").length).toBeGreaterThan(30);
    const env: Record<string, string | undefined> = {
      ...process.env,
      PATH: `${path.join(scratch, "bin")}:${process.env.PATH}`,
      HOME: scratch,
      XDG_CONFIG_HOME: path.join(scratch, "config"),
      PLINTH_URL: app.url,
    };
    for (const name of ["PLINTH_API_KEY", "PLINTH_ORG", "DATABASE_URL"]) delete env[name];
    const run = await new Promise<{ code: number | null; output: string }>((resolve, reject) => {
      const child = spawn("bash", ["-euo", "pipefail", "-c", script], { cwd: scratch, env });
      let output = "";
      child.stdout.on("data", (chunk) => {
        output += chunk;
      });
      child.stderr.on("data", (chunk) => {
        output += chunk;
      });
      child.once("error", reject);
      child.once("close", (code) => resolve({ code, output }));
    });
    expect(run.code, run.output).toBe(0);
    // What the tour says happens, happened.
    expect(run.output).toMatch(/storefront\s+Storefront\s+active/);
    expect(run.output).toContain("Hello");
    expect(run.output.slice(run.output.lastIndexOf("restored to"))).not.toContain('"Oops"');
    expect(run.output).toContain("_plinth-challenge.shop.example.com");
    expect(run.output).toMatch(/404\s+NOT_FOUND/);
    expect(
      run.output
        .trim()
        .split("\n")
        .filter((line) => /^2$/.test(line)),
    ).toHaveLength(1);
  });
});
