import { defineConfig } from "vitest/config";

// `npm run test:console`: the web console in Debian's chromium (test/console/), run by CI.
export default defineConfig({
  test: {
    include: ["test/console/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 1,
  },
});
