import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";

/**
 * Before any test file: compiles `dist/` from the sources (incrementally: seconds when it is
 * current), so that tests of the built `plinth` command run what `npm install` would build.
 */
export default function setup(): void {
  const root = path.resolve(import.meta.dirname, "..");
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" });
}
