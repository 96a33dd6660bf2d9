import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

/**
 * The package a user depends on (issue 32): `npm pack` holds the built server, SDK, CLI and
 * their types, and no sources, tests, benches or fixtures; installed into a scratch project, it
 * answers `import "plinth/client"` and `import "plinth/webhooks"`, and its `plinth` runs.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const run = promisify(execFile);
const npm = (args: string[], cwd: string) =>
  run("npm", args, { cwd, env: { ...process.env, npm_config_update_notifier: "false" }, maxBuffer: 64 * 1024 * 1024 });

describe("the npm package", () => {
  const scratch = mkdtempSync(path.join(tmpdir(), "plinth-pack-"));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it("packs what a user needs, and installs into a project that imports plinth/client and plinth/webhooks", async () => {
    const { stdout } = await npm(["pack", "--json", "--pack-destination", scratch], ROOT);
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf("["))) as { filename: string; files: { path: string }[] }[];
    const files = (packed?.files ?? []).map((file) => file.path);
    for (const needed of [
      "bin/plinth.js",
      "dist/main.js",
      "dist/cli/index.js",
      "dist/client/index.js",
      "dist/client/index.d.ts",
      "dist/client/generated/control.d.ts",
      "dist/verify/webhooks.js",
      "dist/verify/webhooks.d.ts",
      "dist/console/index.html",
      "README.md",
      "LICENSE",
      "docs/sdk.md",
    ]) {
      expect(files, needed).toContain(needed);
    }
    for (const file of files) {
      expect(file, "no sources, tests, benches, fixtures or build state").not.toMatch(
        /^(src|test|bench|scripts)\/|\.tsbuildinfo$|fixtures/,
      );
    }

    const consumer = path.join(scratch, "consumer");
    await run("mkdir", ["-p", consumer]);
    writeFileSync(
      path.join(consumer, "package.json"),
      JSON.stringify({ name: "consumer", private: true, type: "module" }),
    );
    // The SDK needs none of the server's native build.
    await npm(
      [
        "install",
        "--ignore-scripts",
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        path.join(scratch, packed?.filename ?? ""),
      ],
      consumer,
    );
    writeFileSync(
      path.join(consumer, "use.js"),
      [
        'import { createPlinthClient, createWorkspaceClient } from "plinth/client";',
        'import { verifyWebhook } from "plinth/webhooks";',
        'const client = createPlinthClient({ url: "http://127.0.0.1:9", apiKey: "pak_x" });',
        'const workspace = createWorkspaceClient({ workspaceUrl: "http://127.0.0.1:9/w/prj_x", token: "wsa_x" });',
        'console.log(typeof client.GET, typeof workspace.POST, verifyWebhook({ secret: "s", body: "{}", headers: {} }));',
      ].join("\n"),
    );
    expect((await run(process.execPath, ["use.js"], { cwd: consumer })).stdout.trim()).toBe("function function false");
    expect(readdirSync(path.join(consumer, "node_modules/plinth/dist/client"))).toContain("index.d.ts");
    const help = await run(path.join(consumer, "node_modules/.bin/plinth"), ["--help"], { cwd: consumer });
    expect(help.stdout).toContain("Usage: plinth");
  }, 240_000);
});
