import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";

/**
 * Before any test file: builds `dist/` from the sources as `npm run build` does (the server
 * incrementally: seconds when it is current; the console with Vite), so that tests of the built
 * `plinth` command and of the console run what `npm install` would build.
 */
export default function setup(): void {
  const root = path.resolve(import.meta.dirname, "..");
  const require = createRequire(import.meta.url);
  execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", "tsconfig.build.json"], {
    cwd: root,
    stdio: "inherit",
  });
  // The console the server serves at `/` (dist/console).
  const vite = path.join(path.dirname(require.resolve("vite/package.json")), "bin/vite.js");
  execFileSync(process.execPath, [vite, "build", "--config", "console/vite.config.ts", "--logLevel", "warn"], {
    cwd: root,
    stdio: "inherit",
  });
}
