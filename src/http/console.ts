import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Context, Next } from "hono";
import type { AppEnv } from "./context.ts";
import { errorResponse } from "./envelope.ts";

/** Where Vite builds the console: `dist/console`, beside the compiled server or above the sources. */
function consoleDir(): string | undefined {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return [path.join(here, "../console"), path.join(here, "../../dist/console")].find((dir) =>
    existsSync(path.join(dir, "index.html")),
  );
}

const TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".woff2": "font/woff2",
};

/**
 * The console's pages may load and reach this origin only: scripts and styles from its own files
 * (no inline script), images from itself or `data:`.
 */
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/**
 * Serves the web console (DESIGN §15) that Vite built into `dist/console`: its hashed assets
 * under `/assets/` (cached for good), and its `index.html` for any other GET that accepts HTML,
 * so that every screen's URL loads the console, which routes it. `/api/…` and `/w/…` never reach
 * this (they are routed first), and a request that does not ask for HTML falls through to the
 * API's 404. Files are read once and kept: the console is a few hundred KB.
 */
export function consoleRoutes() {
  const dir = consoleDir();
  const kept = new Map<string, Promise<Buffer | null>>();
  const read = (file: string) => {
    let pending = kept.get(file);
    if (!pending) {
      pending = readFile(path.join(dir as string, file)).catch(() => null);
      kept.set(file, pending);
    }
    return pending;
  };
  return async (c: Context<AppEnv>, next: Next) => {
    const route = c.req.path;
    if (route.startsWith("/api/") || route === "/api" || route.startsWith("/w/")) return next();
    if (route.startsWith("/assets/")) {
      const name = route.slice("/assets/".length);
      // Vite's file names (`index-AbC123.js`, `uPlot.esm-AbC123.js.map`): one segment, never `..`.
      if (!dir || !/^[\w-][\w.-]*$/.test(name) || name.includes("..")) return next();
      const body = await read(`assets/${name}`);
      if (!body) return next();
      return c.body(new Uint8Array(body), 200, {
        "Content-Type": TYPES[path.extname(name)] ?? "application/octet-stream",
        "Cache-Control": "public, max-age=31536000, immutable",
        "X-Content-Type-Options": "nosniff",
      });
    }
    if (!(c.req.header("accept") ?? "").includes("text/html")) return next();
    const index = dir ? await read("index.html") : null;
    if (!index) return errorResponse(c, "UNAVAILABLE", "the console is not built: run npm run build");
    return c.body(new Uint8Array(index), 200, {
      "Content-Type": "text/html; charset=utf-8",
      "Content-Security-Policy": CSP,
      "Cache-Control": "no-cache",
      "X-Content-Type-Options": "nosniff",
      // A page's address may hold a secret (an invitation's token): no request carries it on.
      "Referrer-Policy": "no-referrer",
    });
  };
}
