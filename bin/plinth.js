#!/usr/bin/env node
// The `plinth` command, compiled by `npm run build` (which `npm install` runs through `prepare`).
await import("../dist/cli/index.js");
