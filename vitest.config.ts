import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The console's browser tests run apart (npm run test:console): they need chromium.
    exclude: ["test/console/**"],
    globalSetup: ["test/global-setup.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file starts its own server and database; two at a time suits a 2-core machine.
    maxWorkers: 2,
  },
});
