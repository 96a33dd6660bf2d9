import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { runInNewContext } from "node:vm";
import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lintOpenApi } from "../scripts/redocly.ts";
import { ERROR_CODES } from "../src/errors.ts";
import { call, startApp, type TestApp } from "./harness.ts";

let app: TestApp;
let doc: any;

beforeAll(async () => {
  app = await startApp();
  const res = await call(app, "GET", "/openapi.json");
  expect(res.status).toBe(200);
  doc = res.body;
});
afterAll(() => app.close());

/** `/api/org/:slug/members/:id` → `/org/{slug}/members/{id}` */
function toOpenApiPath(honoPath: string): string {
  return honoPath.replace(/^\/api/, "").replace(/:([^/]+)/g, "{$1}");
}

describe("GET /api/openapi.json", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("names version 0.0.1 and the /api server", () => {
    expect(doc.openapi).toMatch(/^3\.1\./);
    expect(doc.info.version).toBe("0.0.1");
    expect(doc.servers).toEqual([{ url: "/api" }]);
  });

  it("declares both security schemes", () => {
    expect(doc.components.securitySchemes.sessionCookie).toEqual(
      expect.objectContaining({ type: "apiKey", in: "cookie", name: "plinth.session_token" }),
    );
    expect(doc.components.securitySchemes.apiKey).toEqual(expect.objectContaining({ type: "http", scheme: "bearer" }));
  });

  it("documents every route the app serves, and nothing it does not", () => {
    const served = app.server.app.routes
      // The API's routes: the workspace API has its own document, and pages (accept-invite) none.
      .filter((route) => route.method !== "ALL" && route.path.startsWith("/api/"))
      .map((route) => `${route.method.toLowerCase()} ${toOpenApiPath(route.path)}`);
    const documented = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.keys(item as object).map((method) => `${method} ${path}`),
    );
    expect(new Set(documented)).toEqual(new Set(served));
  });

  it("gives every operation its success and error responses, and a request schema when it takes a body", () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item as Record<string, any>)) {
        const statuses = Object.keys(operation.responses);
        expect(
          // Or, for the browser's steps of single sign-on, a redirect.
          statuses.some((s) => s.startsWith("2") || s === "302"),
          `${method} ${path} has a success response`,
        ).toBe(true);
        if (path !== "/health") {
          expect(statuses, `${method} ${path} documents 429`).toContain("429");
        }
        // `security: []` (none needed), or an empty requirement among others, lets anonymous callers in.
        const security: object[] = operation.security ?? [];
        const anonymousAllowed = security.length === 0 || security.some((r) => Object.keys(r).length === 0);
        if (!anonymousAllowed) {
          expect(statuses, `${method} ${path} documents 401`).toContain("401");
        }
        if (["post", "patch", "put"].includes(method) && operation.requestBody) {
          expect(operation.requestBody.content["application/json"].schema).toBeTruthy();
          expect(statuses, `${method} ${path} documents 422`).toContain("422");
        }
      }
    }
  });

  it("lists the SPEC operations with their success status", () => {
    const expected: [string, string, string][] = [
      ["get", "/orgs", "200"],
      ["post", "/org", "201"],
      ["post", "/invitations/accept", "200"],
      ["get", "/account", "200"],
      ["patch", "/account", "200"],
      ["get", "/org/{slug}/overview", "200"],
      ["get", "/org/{slug}/members", "200"],
      ["patch", "/org/{slug}", "200"],
      ["delete", "/org/{slug}", "200"],
      ["post", "/org/{slug}/export", "200"],
      ["patch", "/org/{slug}/members/{id}", "200"],
      ["delete", "/org/{slug}/members/{id}", "204"],
      ["post", "/org/{slug}/members/{id}/resend", "200"],
      ["get", "/org/{slug}/audit", "200"],
      ["post", "/org/{slug}/invitations", "201"],
      ["post", "/org/{slug}/api-keys", "201"],
      ["get", "/org/{slug}/api-keys", "200"],
      ["delete", "/org/{slug}/api-keys/{id}", "204"],
    ];
    for (const [method, path, status] of expected) {
      expect(doc.paths[path]?.[method]?.responses?.[status], `${method} ${path} → ${status}`).toBeTruthy();
    }
  });

  it("gives the error envelope's code as an enum of every code, and the request id", () => {
    const envelope = doc.components.schemas.Error.properties.error;
    expect([...envelope.properties.code.enum].sort()).toEqual([...ERROR_CODES].sort());
    expect(envelope.required).toEqual(expect.arrayContaining(["code", "message"]));
    expect(envelope.properties.requestId.type).toBe("string");
  });

  it("documents SPEC's input limits", () => {
    const schemas = doc.components.schemas;
    expect(schemas.CreateOrgInput.properties.name).toEqual(
      expect.objectContaining({ minLength: 2, maxLength: 80, type: "string" }),
    );
    expect(schemas.ApiKeyInput.properties.mcpTools).toEqual(expect.objectContaining({ maxItems: 64 }));
    expect(schemas.ApiKeyInput.properties.mcpTools.items).toEqual(expect.objectContaining({ maxLength: 80 }));
    expect(schemas.InviteInput.properties.role.enum).toEqual(["admin", "developer", "viewer"]);
  });
});

describe("GET /api/workspace/openapi.json", () => {
  it("is a valid OpenAPI 3.1 document covering every workspace route", async () => {
    const res = await call(app, "GET", "/workspace/openapi.json");
    expect(res.status).toBe(200);
    const validator = new Validator();
    const result = await validator.validate(structuredClone(res.body));
    expect(result.errors ?? []).toEqual([]);
    expect(res.body.servers[0].url).toBe("/w/{projectId}/api");
    const served = app.server.app.routes
      .filter((route) => route.method !== "ALL" && route.path.startsWith("/w/:projectId/api"))
      .map((route) => `${route.method.toLowerCase()} ${toOpenApiPath(route.path.replace("/w/:projectId/api", ""))}`);
    const documented = Object.entries(res.body.paths).flatMap(([path, item]) =>
      Object.keys(item as object).map((method) => `${method} ${path}`),
    );
    expect(served.length).toBeGreaterThan(10);
    expect(new Set(documented)).toEqual(new Set(served));
  });

  it("gives every operation of both documents a unique operationId", async () => {
    const workspace = (await call(app, "GET", "/workspace/openapi.json")).body;
    for (const document of [doc, workspace]) {
      const ids = Object.values(document.paths as Record<string, Record<string, { operationId?: string }>>).flatMap(
        (item) => Object.values(item).map((operation) => operation.operationId),
      );
      expect(ids.every((id) => typeof id === "string" && /^[a-z]+[A-Za-z0-9]*$/.test(id))).toBe(true);
      expect(new Set(ids).size).toBe(ids.length);
    }
    expect(doc.paths["/org/{slug}/projects"].get.operationId).toBe("getOrgBySlugProjects");
  });
});

describe("Redocly's recommended rules (redocly.yaml)", () => {
  it("find nothing in either document, but the redirects of single sign-on that .redocly.lint-ignore.yaml keeps", async () => {
    const workspace = (await call(app, "GET", "/workspace/openapi.json")).body;
    const reports = await lintOpenApi({ control: doc, workspace });
    expect(reports.control?.problems).toEqual([]);
    expect(reports.workspace?.problems).toEqual([]);
    // The ignored findings are the operations that answer no 2XX, each a redirect, and nothing else.
    const redirectsOnly = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([, operation]) => !Object.keys(operation.responses).some((status) => status.startsWith("2")))
        .map(([method, operation]) => [`${method} ${path}`, Object.keys(operation.responses).includes("302")]),
    );
    expect(redirectsOnly).toEqual([
      ["get /auth/sso/{orgSlug}", true],
      ["get /auth/sso/{orgSlug}/callback", true],
      ["post /auth/sso/{orgSlug}/acs", true],
    ]);
    expect(reports.control?.totals).toEqual({ errors: 0, warnings: 0, ignored: redirectsOnly.length });
    expect(reports.workspace?.totals).toEqual({ errors: 0, warnings: 0, ignored: 0 });
  });
});

describe("Declared security", () => {
  it("is on every operation of both documents, and `security: []` on exactly the public ones", async () => {
    const workspace = (await call(app, "GET", "/workspace/openapi.json")).body;
    const publicOperations = (document: any) =>
      Object.entries(document.paths as Record<string, Record<string, any>>)
        .flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => ({ method, path, operation })))
        .filter(({ operation }) => {
          expect(operation.security).toBeInstanceOf(Array);
          return operation.security.length === 0;
        })
        .map(({ method, path }) => `${method} ${path}`);
    expect(publicOperations(doc).sort()).toEqual(
      [
        "get /health",
        "get /health/ready",
        "post /auth/sign-up/email",
        "post /auth/sign-in/email",
        "get /templates",
        "get /plans",
        "get /domains/check",
        "post /billing/stripe/webhook",
        "get /auth/sso/{orgSlug}",
        "get /auth/sso/{orgSlug}/callback",
        "post /auth/sso/{orgSlug}/acs",
        "get /auth/sso/{orgSlug}/metadata",
        "post /auth/sso/lookup",
        "get /mcp/tools",
        "get /openapi.json",
        "get /workspace/openapi.json",
        "get /docs",
        "get /docs/scalar.js",
        "get /docs/reference.js",
      ].sort(),
    );
    expect(publicOperations(workspace).sort()).toEqual(["post /auth/sign-in", "post /auth/sign-up"]);
    // Public as declared: answered without credentials.
    for (const path of ["/health", "/templates", "/plans", "/mcp/tools", "/openapi.json", "/workspace/openapi.json"]) {
      expect((await call(app, "GET", path)).status, path).toBe(200);
    }
  });
});

describe("GET /api/docs", () => {
  /** Scalar's standalone bundle as installed: the pinned version in package.json. */
  const bundleFile = join(
    dirname(createRequire(import.meta.url).resolve("@scalar/fastify-api-reference")),
    "js",
    "standalone.js",
  );

  /** The `src` of each `<script>` on the page. */
  function scriptSources(html: string): string[] {
    return [...html.matchAll(/<script\b[^>]*\bsrc="([^"]*)"/g)].map((match) => match[1] as string);
  }

  /** Scalar's configuration, as the page carries it to its start script. */
  function configurationOf(html: string): any {
    const attribute = /<div id="reference" data-configuration="([^"]*)"><\/div>/.exec(html)?.[1];
    expect(attribute).toBeDefined();
    return JSON.parse((attribute as string).replaceAll("&quot;", '"').replaceAll("&amp;", "&"));
  }

  it("serves an interactive reference that loads the document", async () => {
    const res = await fetch(`${app.url}/api/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(await res.text()).toContain("/api/openapi.json");
  });

  it("shows both APIs, from documents this origin serves", async () => {
    const html = await (await fetch(`${app.url}/api/docs`)).text();
    const configuration = configurationOf(html);
    expect(configuration.sources).toEqual([
      expect.objectContaining({ slug: "control", url: "/api/openapi.json" }),
      expect.objectContaining({ slug: "workspace", url: "/api/workspace/openapi.json" }),
    ]);
    for (const { title, url } of configuration.sources) {
      expect(title).toEqual(expect.any(String));
      const res = await fetch(new URL(url, app.url));
      expect(res.status, url).toBe(200);
      expect(res.headers.get("content-type")).toContain("application/json");
      expect((await res.json()).openapi).toMatch(/^3\.1\./);
    }
    // Nothing from another host: no address with a host in the page, and not Scalar's default fonts.
    expect(html).not.toMatch(/\/\/[^/\s"]/);
    expect(configuration.withDefaultFonts).toBe(false);
  });

  it("starts Scalar on the page with the page's configuration, by a script of this origin", async () => {
    const html = await (await fetch(`${app.url}/api/docs`)).text();
    const start = scriptSources(html)[1] as string;
    const res = await fetch(new URL(start, app.url));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const script = await res.text();
    expect(new URL(start, app.url).searchParams.get("v")).toBe(
      createHash("sha256").update(script).digest("hex").slice(0, 16),
    );

    // Run as the browser would, after Scalar's bundle (which defines `Scalar`), on the page's element.
    const element = { dataset: { configuration: JSON.stringify(configurationOf(html)) } };
    const started: unknown[][] = [];
    const page = {
      document: { getElementById: (id: string) => (id === "reference" ? element : null) },
      Scalar: { createApiReference: (...args: unknown[]) => started.push(args) },
    };
    runInNewContext(script, page);
    expect(started).toEqual([[element, configurationOf(html)]]);
  });

  it("loads its script from this origin only, under a policy that names no other", async () => {
    const res = await fetch(`${app.url}/api/docs`);
    const html = await res.text();
    const policy: Record<string, string[]> = Object.fromEntries(
      (res.headers.get("content-security-policy") ?? "").split(";").map((directive) => {
        const [name, ...sources] = directive.trim().split(/\s+/);
        return [name, sources];
      }),
    );
    expect(policy["default-src"]).toEqual(["'none'"]);
    expect(policy["script-src"]).toEqual(["'self'"]);
    expect(policy["connect-src"]).toEqual(["'self'"]);
    // Keywords and data: only: no host, no scheme that reaches one.
    for (const sources of Object.values(policy)) {
      for (const source of sources) expect(source).toMatch(/^('[a-z-]+'|data:)$/);
    }

    const sources = scriptSources(html);
    expect(sources).toEqual([
      expect.stringMatching(/^\/api\/docs\/scalar\.js\?v=[0-9a-f]+$/),
      expect.stringMatching(/^\/api\/docs\/reference\.js\?v=[0-9a-f]+$/),
    ]);
    expect(html).not.toContain("https://");
    expect(html).not.toContain("cdn.");
    // Nothing inline runs: both scripts come by address (Scalar's, then the one starting it); the configuration is data.
    const scripts = [...html.matchAll(/<script\b([^>]*)>([^<]*)<\/script>/g)];
    expect(scripts).toHaveLength(2);
    for (const [, attributes = "", body] of scripts) {
      expect(body).toBe("");
      expect(attributes).toMatch(/\bsrc="/);
    }
  });

  it("serves the pinned Scalar bundle, named by its hash and cached for good", async () => {
    const pinned = JSON.parse(readFileSync("package.json", "utf8")).dependencies["@scalar/fastify-api-reference"];
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    const bytes = readFileSync(bundleFile);
    const html = await (await fetch(`${app.url}/api/docs`)).text();
    const [source] = scriptSources(html);
    expect(new URL(source as string, app.url).searchParams.get("v")).toBe(
      createHash("sha256").update(bytes).digest("hex").slice(0, 16),
    );

    const plain = await fetch(new URL(source as string, app.url), { headers: { "accept-encoding": "identity" } });
    expect(plain.status).toBe(200);
    expect(plain.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(plain.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(plain.headers.get("x-content-type-options")).toBe("nosniff");
    expect(Buffer.from(await plain.arrayBuffer()).equals(bytes)).toBe(true);

    const gzipped = await fetch(new URL(source as string, app.url), { headers: { "accept-encoding": "gzip" } });
    expect(gzipped.status).toBe(200);
    expect(gzipped.headers.get("content-encoding")).toBe("gzip");
    expect(gzipped.headers.get("vary")).toBe("Accept-Encoding");
    expect(Number(gzipped.headers.get("content-length"))).toBeLessThan(bytes.length / 2);
    expect(Buffer.from(await gzipped.arrayBuffer()).equals(bytes)).toBe(true);

    const refused = await fetch(new URL(source as string, app.url), { headers: { "accept-encoding": "gzip;q=0" } });
    expect(refused.headers.get("content-encoding")).toBeNull();
    expect(Buffer.from(await refused.arrayBuffer()).equals(bytes)).toBe(true);
  });
});
