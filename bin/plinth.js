#!/usr/bin/env node
// The compiled CLI (`npm run build`, run by `npm install` through `prepare`).
await import("../dist/main.js");
