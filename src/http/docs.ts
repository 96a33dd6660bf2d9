import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { AppEnv } from "./context.ts";
import { anyone, createRouter, errorResponses } from "./router.ts";

/**
 * The interactive API reference (DESIGN: Scalar at `GET /api/docs`), both APIs' documents in one
 * page, served whole from this process so that it works with no internet and runs no script from
 * another origin.
 */
export function docsRoutes() {
  return createRouter()
    .openapi(docsPageRoute, async (c) => {
      const { hash } = await scalarBundle();
      return c.html(docsPage(hash), 200, {
        "Content-Security-Policy": DOCS_CSP,
        // The page names the bundle by its hash: a stale copy would name a stale bundle.
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
      });
    })
    .openapi(scalarScriptRoute, async (c) => {
      const bundle = await scalarBundle();
      const gzipped = acceptsGzip(c);
      return c.body(gzipped ? bundle.gzipped : bundle.bytes, 200, {
        "Content-Type": "text/javascript; charset=utf-8",
        ...(gzipped ? { "Content-Encoding": "gzip" } : {}),
        Vary: "Accept-Encoding",
        // The page asks for it by content hash (`?v=`), so a cached copy never goes stale.
        "Cache-Control": "public, max-age=31536000, immutable",
        "X-Content-Type-Options": "nosniff",
      });
    })
    .openapi(startScriptRoute, (c) =>
      c.body(START_SCRIPT, 200, {
        "Content-Type": "text/javascript; charset=utf-8",
        // Named by its hash too.
        "Cache-Control": "public, max-age=31536000, immutable",
        "X-Content-Type-Options": "nosniff",
      }),
    );
}

const docsPageRoute = createRoute({
  method: "get",
  path: "/docs",
  tags: ["Service"],
  summary: "Interactive API reference",
  security: anyone,
  responses: {
    200: { description: "HTML page", content: { "text/html": { schema: z.string() } } },
    ...errorResponses(429),
  },
});

const scalarScriptRoute = createRoute({
  method: "get",
  path: "/docs/scalar.js",
  tags: ["Service"],
  summary: "The script of the interactive API reference",
  description: "Scalar's standalone bundle, at the version pinned in package.json; gzipped when the client accepts it.",
  security: anyone,
  responses: {
    200: { description: "JavaScript", content: { "text/javascript": { schema: z.string() } } },
    ...errorResponses(429),
  },
});

const startScriptRoute = createRoute({
  method: "get",
  path: "/docs/reference.js",
  tags: ["Service"],
  summary: "The script that starts the interactive API reference",
  description: "Starts Scalar on the page, with the configuration the page carries.",
  security: anyone,
  responses: {
    200: { description: "JavaScript", content: { "text/javascript": { schema: z.string() } } },
    ...errorResponses(429),
  },
});

/**
 * Both documents (Scalar's `sources`: a menu to switch between them), and Scalar's options where a
 * default would reach for another host: its fonts, the "Open API Client" link to Scalar's hosted
 * client, the AI agent (on by default on localhost) and the developer toolbar (whose "share"
 * uploads the document). The reference's own request client stays.
 */
const SCALAR_CONFIGURATION = {
  sources: [
    { title: "Plinth API", slug: "control", url: "/api/openapi.json" },
    { title: "Plinth workspace API", slug: "workspace", url: "/api/workspace/openapi.json" },
  ],
  withDefaultFonts: false,
  hideClientButton: true,
  agent: { disabled: true },
  showDeveloperTools: "never",
};

/**
 * Starts Scalar on the page's `#reference` element with the configuration it carries. The bundle
 * starts itself on an `#api-reference` element instead, but passes that one's configuration
 * through a schema without `sources`, which would leave no document to show.
 */
const START_SCRIPT =
  'const element = document.getElementById("reference");\n' +
  "Scalar.createApiReference(element, JSON.parse(element.dataset.configuration));\n";
const START_SCRIPT_HASH = createHash("sha256").update(START_SCRIPT).digest("hex").slice(0, 16);

/**
 * No inline script: the configuration is an attribute of the page, which both scripts come from,
 * so `script-src 'self'` is all it takes (the bundle's zod probes for `eval`, is refused, and does
 * without). Scalar injects its styles as `<style>` elements and attributes, hence `'unsafe-inline'`
 * for styles; its CSS draws some icons from `data:` SVGs.
 */
const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'unsafe-inline'",
  "img-src data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

function docsPage(bundleHash: string): string {
  const configuration = JSON.stringify(SCALAR_CONFIGURATION).replaceAll("&", "&amp;").replaceAll('"', "&quot;");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Plinth API reference</title>
</head>
<body>
<div id="reference" data-configuration="${configuration}"></div>
<script src="/api/docs/scalar.js?v=${bundleHash}"></script>
<script src="/api/docs/reference.js?v=${START_SCRIPT_HASH}"></script>
</body>
</html>
`;
}

interface ScalarBundle {
  bytes: Uint8Array<ArrayBuffer>;
  gzipped: Uint8Array<ArrayBuffer>;
  /** A hash of the bytes, which the page puts in the script's address. */
  hash: string;
}

let bundle: Promise<ScalarBundle> | undefined;

/**
 * The bundle is read from @scalar/fastify-api-reference, which ships it as a file of its own
 * (byte for byte @scalar/api-reference's `dist/browser/standalone.js`) with a handful of small
 * dependencies, where @scalar/api-reference brings hundreds. It is only ever sent to browsers.
 * The version is pinned exactly: later releases declare Node 22 or later.
 */
function scalarBundle(): Promise<ScalarBundle> {
  bundle ??= (async () => {
    const entry = createRequire(import.meta.url).resolve("@scalar/fastify-api-reference");
    const bytes = await readFile(join(dirname(entry), "js", "standalone.js"));
    const hash = createHash("sha256").update(bytes).digest("hex").slice(0, 16);
    return { bytes: new Uint8Array(bytes), gzipped: new Uint8Array(await promisify(gzip)(bytes)), hash };
  })();
  return bundle;
}

/** Whether the request's `Accept-Encoding` takes gzip (and does not refuse it with `q=0`). */
function acceptsGzip(c: Context<AppEnv>): boolean {
  return (c.req.header("accept-encoding") ?? "").split(",").some((coding) => {
    const [name = "", ...params] = coding.split(";").map((part) => part.trim().toLowerCase());
    return name === "gzip" && !params.some((param) => /^q=0(\.0*)?$/.test(param));
  });
}
