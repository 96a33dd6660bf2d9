import { connect } from "node:net";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, createOrg, expectError, readResult, signUp, startApp, type TestApp, type TestUser } from "./harness.ts";

let app: TestApp;
let owner: TestUser;
let slug: string;

beforeAll(async () => {
  app = await startApp();
  owner = await signUp(app);
  slug = (await createOrg(app, owner, "Conventions")).slug;
});
afterAll(() => app.close());

describe("GET /api/health", () => {
  it("reports the service and database up", async () => {
    const res = await call(app, "GET", "/health");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "ok", database: "ok" });
  });
});

describe("error envelope", () => {
  it("answers an unknown route with 404 NOT_FOUND", async () => {
    const res = await call(app, "GET", "/no/such/route", { cookie: owner.cookie });
    expectError(res, 404, "NOT_FOUND");
  });

  it("answers a wrong method with 405 and the allowed methods", async () => {
    const res = await call(app, "PUT", "/orgs", { cookie: owner.cookie });
    expectError(res, 405, "METHOD_NOT_ALLOWED");
    expect(res.headers.get("allow")).toBe("GET");
    const onParam = await call(app, "PUT", `/org/${slug}`, { cookie: owner.cookie });
    expect(onParam.status).toBe(405);
    expect(onParam.headers.get("allow")?.split(", ").sort()).toEqual(["DELETE", "PATCH"]);
  });

  it("answers a path with a trailing slash with 404, never a 405 that allows the method used", async () => {
    for (const [method, path] of [
      ["GET", "/orgs/"],
      ["POST", "/org/"],
      ["GET", "/account/"],
    ] as const) {
      const res = await call(app, method, path, { cookie: owner.cookie });
      expect(res.status, `${method} ${path}`).toBe(404);
      expectError(res, 404, "NOT_FOUND");
      expect(res.headers.get("allow")).toBeNull();
    }
    const anonymous = await call(app, "GET", "/orgs/");
    expect(anonymous.status).toBe(404);
  });

  it("answers malformed JSON with 400 BAD_REQUEST", async () => {
    const res = await call(app, "POST", "/org", {
      cookie: owner.cookie,
      rawBody: '{"name": "Broken',
      headers: { "content-type": "application/json" },
    });
    expectError(res, 400, "BAD_REQUEST");
  });

  it("answers a JSON body that is not valid UTF-8 with 400, sized or chunked, and changes nothing", async () => {
    const before = await call(app, "GET", "/account", { cookie: owner.cookie });
    // "Ren\xe9": Latin-1, not UTF-8; decoding it would have stored U+FFFD instead.
    const bytes = Buffer.concat([Buffer.from('{"name":"Ren'), Buffer.from([0xe9]), Buffer.from('"}')]);
    const chunked = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes);
        controller.close();
      },
    });
    for (const body of [bytes, chunked]) {
      const res = await fetch(`${app.url}/api/account`, {
        method: "PATCH",
        headers: { "content-type": "application/json; charset=utf-8", cookie: owner.cookie },
        body,
        duplex: "half",
      } as RequestInit);
      const result = await readResult(res);
      expectError(result, 400, "BAD_REQUEST");
      expect(result.body.error.message).toMatch(/UTF-8/);
    }
    expect((await call(app, "GET", "/account", { cookie: owner.cookie })).body).toEqual(before.body);
    // Like any malformed body, it comes after the guards: to a caller outside the org, it is 404.
    const outsider = await signUp(app);
    const res = await fetch(`${app.url}/api/org/${slug}`, {
      method: "PATCH",
      headers: { "content-type": "application/json", cookie: outsider.cookie },
      body: bytes,
    });
    expect(res.status).toBe(404);
  });

  it("reads JSON as UTF-8 whatever charset the Content-Type names (RFC 8259 §11)", async () => {
    const before = await call(app, "GET", "/account", { cookie: owner.cookie });
    for (const charset of ["us-ascii", "ISO-8859-1", "utf-16", '"utf-8"']) {
      const res = await call(app, "PATCH", "/account", {
        cookie: owner.cookie,
        rawBody: JSON.stringify({ name: before.body.account.name }),
        headers: { "content-type": `application/json; charset=${charset}` },
      });
      expect(res.status, charset).toBe(200);
    }
  });

  it("answers a body that is not JSON with 400 BAD_REQUEST", async () => {
    const res = await call(app, "POST", "/org", {
      cookie: owner.cookie,
      rawBody: "name=Acme",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expectError(res, 400, "BAD_REQUEST");
  });

  it("answers a JSON value that is not an object with 422", async () => {
    const res = await call(app, "POST", "/org", { cookie: owner.cookie, body: ["Acme"] });
    expectError(res, 422, "VALIDATION");
  });

  it("answers validation failures with 422 and every failing field in details", async () => {
    const res = await call(app, "POST", "/org", {
      cookie: owner.cookie,
      body: { name: "x", residency: "mars", defaultRegion: "nowhere" },
    });
    expectError(res, 422, "VALIDATION");
    const paths = res.body.error.details.map((d: { path: string }) => d.path).sort();
    expect(paths).toEqual(["defaultRegion", "name", "residency"]);
    for (const detail of res.body.error.details) expect(detail.message).toEqual(expect.any(String));
  });

  it("refuses a field the operation does not know, naming it, and changes nothing (strict bodies)", async () => {
    const before = (await call(app, "GET", "/orgs", { cookie: owner.cookie })).body.orgs.length;
    const res = await call(app, "POST", "/org", { cookie: owner.cookie, body: { name: "Strict Org", bogus: 1 } });
    expectError(res, 422, "VALIDATION");
    expect(res.body.error.details).toEqual([{ path: "bogus", message: "is not a field of this request" }]);
    expect((await call(app, "GET", "/orgs", { cookie: owner.cookie })).body.orgs).toHaveLength(before);
    // Several at once, each named.
    const many = await call(app, "POST", `/org/${slug}/api-keys`, {
      cookie: owner.cookie,
      body: { name: "k", scope: "full", expires: 3, Scope: "full" },
    });
    expectError(many, 422, "VALIDATION");
    expect(many.body.error.details.map((d: { path: string }) => d.path).sort()).toEqual(["Scope", "expires"]);
    // Free-form values (an integration's config) keep any key.
    const integration = await call(app, "POST", `/org/${slug}/integrations`, {
      cookie: owner.cookie,
      body: { kind: "slack", config: { anything: "goes", nested: { too: true } } },
    });
    expect(integration.status, JSON.stringify(integration.body)).toBe(201);
    // better-auth's sign-in takes what its clients send besides, as better-auth does.
    const signIn = await call(app, "POST", "/auth/sign-in/email", {
      body: { email: owner.email, password: "correct-horse-battery", name: "ignored", callbackURL: "/" },
    });
    expect(signIn.status, JSON.stringify(signIn.body)).toBe(200);
  });

  // PostgreSQL's text cannot hold U+0000: both databases refuse it up front, naming the field,
  // rather than one storing it and the other failing with a 500.
  it("answers text with a NUL character in a body, query or path parameter with 422 naming it", async () => {
    const nul = "a\u0000b";
    const created = await call(app, "POST", "/org", { cookie: owner.cookie, body: { name: nul } });
    expect(created.status).toBe(422);
    expect(created.body.error.details).toEqual([{ path: "name", message: expect.stringContaining("U+0000") }]);

    const patched = await call(app, "PATCH", `/org/${slug}`, { cookie: owner.cookie, body: { name: nul } });
    expect(patched.status).toBe(422);
    expect(patched.body.error.details[0].path).toBe("name");

    const hook = await call(app, "POST", `/org/${slug}/webhooks`, {
      cookie: owner.cookie,
      body: { url: `https://example.com/${nul}`, events: ["*"] },
    });
    expect(hook.status).toBe(422);
    expect(hook.body.error.details[0].path).toBe("url");

    const audit = await call(app, "GET", `/org/${slug}/audit?action=${encodeURIComponent(nul)}`, {
      cookie: owner.cookie,
    });
    expect(audit.status).toBe(422);
    expect(audit.body.error.details[0].path).toBe("action");

    // Also in a key or value the operation ignores, and in a query parameter it does not know.
    const ignored = await call(app, "POST", "/org", { cookie: owner.cookie, body: { name: "Fine", extra: nul } });
    expect(ignored.status).toBe(422);
    expect(ignored.body.error.details).toEqual([{ path: "extra", message: expect.stringContaining("U+0000") }]);
    const inKey = await call(app, "POST", "/org", { cookie: owner.cookie, body: { name: "Fine", [nul]: 1 } });
    expect(inKey.status).toBe(422);
    const unknownQuery = await call(app, "GET", `/org/${slug}/audit?other=${encodeURIComponent(nul)}`, {
      cookie: owner.cookie,
    });
    expect(unknownQuery.status).toBe(422);
    expect(unknownQuery.body.error.details[0].path).toBe("other");

    // Nothing was stored.
    const orgs = await call(app, "GET", "/orgs", { cookie: owner.cookie });
    expect(orgs.body.orgs.map((org: { name: string }) => org.name)).toEqual(["Conventions"]);
  });

  it("answers a body nested deeper than 64 levels with 422, in a key the operation ignores too", async () => {
    let deep: unknown = "bottom";
    for (let i = 0; i < 70; i++) deep = [deep];
    const res = await call(app, "POST", "/org", { cookie: owner.cookie, body: { name: "Deep", extra: deep } });
    expect(res.status).toBe(422);
    expect(res.body.error.details[0].message).toContain("64");
  });

  // JSON.parse reads 1e400 as Infinity, which JSON.stringify writes as null: refused, not changed.
  it("answers a number beyond the range of a double with 422 naming it", async () => {
    const res = await call(app, "PATCH", "/account", {
      cookie: owner.cookie,
      rawBody: '{"preferences":{"n":1e400,"m":-1e999}}',
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(422);
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toEqual(["preferences.n", "preferences.m"]);
    const fine = await call(app, "PATCH", "/account", {
      cookie: owner.cookie,
      rawBody: '{"preferences":{"n":1.7e308}}',
      headers: { "content-type": "application/json" },
    });
    expect(fine.status).toBe(200);
    const account = await call(app, "GET", "/account", { cookie: owner.cookie });
    expect(account.body.account.preferences).toEqual({ n: 1.7e308 });
  });

  // A lone surrogate has no UTF-8 encoding: stored, it would come back as U+FFFD, unlike what
  // the request was told. A pair (an emoji) is text like any other.
  it("answers text with an unpaired surrogate, in a value or a key, with 422 naming it", async () => {
    const created = await call(app, "POST", "/org", { cookie: owner.cookie, body: { name: "odd \ud800" } });
    expect(created.status).toBe(422);
    expect(created.body.error.details).toEqual([{ path: "name", message: expect.stringContaining("surrogate") }]);
    const inKey = await call(app, "PATCH", "/account", {
      cookie: owner.cookie,
      body: { preferences: { "k\udc00": 1 } },
    });
    expect(inKey.status).toBe(422);
    expect(inKey.body.error.details[0].path).toBe("preferences.k\udc00");
    const emoji = await call(app, "PATCH", "/account", { cookie: owner.cookie, body: { name: "Ada 😀" } });
    expect(emoji.status).toBe(200);
    const account = await call(app, "GET", "/account", { cookie: owner.cookie });
    expect(account.body.account.name).toBe("Ada 😀");
    const orgs = await call(app, "GET", "/orgs", { cookie: owner.cookie });
    expect(orgs.body.orgs.map((org: { name: string }) => org.name)).toEqual(["Conventions"]);
  });

  it("answers a body over 1 MiB with 413 PAYLOAD_TOO_LARGE", async () => {
    const res = await call(app, "PATCH", "/account", {
      cookie: owner.cookie,
      body: { preferences: { blob: "x".repeat(1024 * 1024 + 1) } },
    });
    expectError(res, 413, "PAYLOAD_TOO_LARGE");
    expect(res.headers.get("ratelimit-limit")).toMatch(/^\d+$/);
  });

  it("answers a chunked body (no Content-Length) that grows over 1 MiB with 413", async () => {
    const chunk = "x".repeat(64 * 1024);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        // A JSON string that never ends: only the running count can stop it.
        controller.enqueue(new TextEncoder().encode(sent === 0 ? `{"preferences":{"blob":"${chunk}` : chunk));
        sent += chunk.length;
        if (sent > 2 * 1024 * 1024) controller.close();
      },
    });
    const res = await fetch(`${app.url}/api/account`, {
      method: "PATCH",
      headers: { "content-type": "application/json", cookie: owner.cookie },
      body,
      duplex: "half",
    } as RequestInit);
    expectError(await readResult(res), 413, "PAYLOAD_TOO_LARGE");
    expect(res.headers.get("ratelimit-remaining")).toMatch(/^\d+$/);
  });

  it("puts the RateLimit headers on every response: health, paths outside the API, unknown routes", async () => {
    for (const url of [
      `${app.url}/api/health`,
      `${app.url}/`,
      `${app.url}/nope`,
      `${app.url}/api/nope`,
      `${app.url}/w/prj_x`,
      `${app.url}/w/prj_x/nope`,
    ]) {
      const res = await fetch(url);
      for (const name of ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]) {
        expect(res.headers.get(name), `${name} on ${url}`).toMatch(/^\d+$/);
      }
    }
  });

  it("accepts a body just under 1 MiB", async () => {
    const res = await call(app, "PATCH", "/account", {
      cookie: owner.cookie,
      body: { preferences: { blob: "x".repeat(1000 * 1000) } },
    });
    expect(res.status).toBe(200);
  });

  it("answers every protected operation without credentials with 401 UNAUTHORIZED", async () => {
    const doc = (await call(app, "GET", "/openapi.json")).body;
    let checked = 0;
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, { security?: object[] }>>)) {
      for (const [method, operation] of Object.entries(item)) {
        const security = operation.security ?? [];
        if (security.length === 0 || security.some((r) => Object.keys(r).length === 0)) continue;
        if (path.startsWith("/auth/")) continue;
        const concrete = path.replace("{slug}", slug).replace("{orgSlug}", slug).replace("{id}", "mem_x");
        const res = await call(app, method.toUpperCase(), concrete, method === "get" ? {} : { body: {} });
        expect(res.status, `${method} ${path}`).toBe(401);
        // SCIM answers in its own error body (RFC 7644 §3.12), which its clients read.
        if (path.startsWith("/scim/")) expect(JSON.parse(res.body).status).toBe("401");
        else expectError(res, 401, "UNAUTHORIZED");
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(15);
  });

  it("refuses a forged session cookie with 401", async () => {
    const res = await call(app, "GET", "/account", { cookie: "plinth.session_token=forged.value" });
    expectError(res, 401, "UNAUTHORIZED");
  });
});

describe("requests Node's HTTP parser or the Fetch API refuse", () => {
  /** Sends raw bytes and reads the whole answer (the server closes the connection). */
  function raw(bytes: string | string[]): Promise<{ status: number; headers: string; body: string }> {
    const { hostname, port } = new URL(app.url);
    const [first = "", ...rest] = typeof bytes === "string" ? [bytes] : bytes;
    return new Promise((resolve, reject) => {
      // Each further part goes out after a pause, so that it reaches the parser as a chunk of its own.
      const socket = connect(Number(port), hostname, async () => {
        socket.write(first);
        for (const part of rest) {
          await new Promise((wait) => setTimeout(wait, 50));
          socket.write(part);
        }
      });
      let answer = "";
      socket.setEncoding("utf8");
      socket.on("data", (chunk) => {
        answer += chunk;
      });
      socket.on("error", reject);
      socket.on("close", () => {
        const [head = "", body = ""] = answer.split("\r\n\r\n");
        resolve({ status: Number(head.split(" ")[1]), headers: head.toLowerCase(), body });
      });
    });
  }

  it.each([
    ["a malformed Host", "GET /api/health HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n", 400],
    ["an unknown method", "FOO /api/health HTTP/1.1\r\nHost: x\r\n\r\n", 400],
    ["a header with a DEL byte", "GET /api/health HTTP/1.1\r\nHost: x\r\nX-A: a\x7fb\r\n\r\n", 400],
    ["headers over 16 KiB", `GET /api/health HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`, 431],
    ["a method that is no token", "G@T /api/health HTTP/1.1\r\nHost: x\r\n\r\n", 400],
    ["a request line of one word", "GARBAGE\r\n\r\n", 400],
    ["an HTTP/1.1 request without Host", "GET /api/health HTTP/1.1\r\nConnection: close\r\n\r\n", 400],
    ["a POST without Host", "POST /api/org HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", 400],
  ])("answers %s in the envelope", async (_label, bytes, status) => {
    const res = await raw(bytes);
    expect(res.status).toBe(status);
    expect(res.headers).toContain("content-type: application/json");
    expect(res.headers).toMatch(/\r\nx-request-id: [0-9a-f-]{36}\r\n/);
    // A length, when announced, is the body's: a client waits for no more than is sent.
    const length = /\r\ncontent-length: (\d+)/.exec(res.headers)?.[1];
    if (length !== undefined) expect(Buffer.byteLength(res.body)).toBe(Number(length));
    // Exactly the envelope a routed error gets, with the id the headers carry.
    const requestId = /\r\nx-request-id: (\S+)\r\n/.exec(res.headers)?.[1];
    expect(JSON.parse(res.body)).toEqual({
      error: { code: "BAD_REQUEST", message: expect.stringMatching(/\S/), requestId },
    });
  });

  it("serves an HTTP/1.0 request without Host, which needs none", async () => {
    const res = await raw("GET /api/health HTTP/1.0\r\n\r\n");
    expect(res.status).toBe(200);
  });

  it("answers HEAD with the status and no body; when the method is out of sight, with no length announced", async () => {
    const res = await raw(`HEAD /api/health HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`);
    expect(res.status).toBe(431);
    expect(res.body).toBe("");
    // The refused chunk does not show the request line: the body ends with the connection (RFC
    // 9112 §6.3), which a HEAD client does not read and any other client reads whole.
    const split = await raw(["HEAD /api/health HTTP/1.1\r\nHost: x\r\n", `X-Big: ${"a".repeat(20_000)}\r\n\r\n`]);
    expect(split.status).toBe(431);
    expect(split.headers).not.toContain("content-length");
  });
});

describe("request ids", () => {
  it("generates one per request and sends it back", async () => {
    const a = await call(app, "GET", "/health");
    const b = await call(app, "GET", "/health");
    expect(a.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.headers.get("x-request-id")).not.toBe(b.headers.get("x-request-id"));
  });

  it("keeps a caller's well-formed X-Request-Id and replaces a malformed one", async () => {
    const kept = await call(app, "GET", "/health", { headers: { "x-request-id": "ci-run-42.step:7" } });
    expect(kept.headers.get("x-request-id")).toBe("ci-run-42.step:7");
    const replaced = await call(app, "GET", "/health", { headers: { "x-request-id": "bad id with spaces" } });
    expect(replaced.headers.get("x-request-id")).not.toBe("bad id with spaces");
  });
});

describe("unexpected failures", () => {
  it("answer 500 INTERNAL without internals, and roll the mutation back with its audit row", async () => {
    const db = app.server.deps.db;
    // Break the audit table so the audit write inside the update's transaction fails.
    await sql`alter table audit_events rename to audit_events_moved`.execute(db);
    try {
      const res = await call(app, "PATCH", `/org/${slug}`, { cookie: owner.cookie, body: { name: "Renamed" } });
      expect(res.status).toBe(500);
      expect(res.body).toEqual({
        error: { code: "INTERNAL", message: "internal error", requestId: res.headers.get("x-request-id") },
      });
    } finally {
      await sql`alter table audit_events_moved rename to audit_events`.execute(db);
    }
    const overview = await call(app, "GET", `/org/${slug}/overview`, { cookie: owner.cookie });
    expect(overview.body.org.name).toBe("Conventions");
  });
});
