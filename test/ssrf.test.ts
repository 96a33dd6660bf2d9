import type { LookupFunction } from "node:net";
import type * as os from "node:os";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createOutboundClient, type OutboundClient, type OutboundClientOptions } from "../src/lib/outbound.ts";
import { checkOutboundUrl, isPrivateAddress } from "../src/lib/ssrf.ts";
import {
  type CallResult,
  call,
  callWorkspace,
  createActiveProject,
  createOrg,
  type Receiver,
  signUp,
  startApp,
  startReceiver,
  type TestApp,
} from "./harness.ts";

/** This machine as the tests see it: its own interfaces, plus one holding public addresses. */
const PUBLIC_INTERFACE = [
  { address: "8.8.4.4", family: "IPv4" },
  { address: "2606:4700::1111", family: "IPv6" },
  { address: "fe80::1234", family: "IPv6", scopeid: 2 },
];
vi.mock("node:os", async (importOriginal) => {
  const actual = await importOriginal<typeof os>();
  return {
    ...actual,
    networkInterfaces: () => ({ ...actual.networkInterfaces(), eth9: PUBLIC_INTERFACE }),
  };
});

// Network rule: these tests only ever connect to loopback. Private and public addresses other than
// loopback are exercised through isPrivateAddress and checkOutboundUrl, which never connect.

describe("isPrivateAddress", () => {
  it.each([
    ["93.184.216.34", false],
    ["8.8.8.8", false],
    ["1.1.1.1", false],
    ["172.32.0.1", false],
    ["100.128.0.1", false],
    ["2606:4700::1", false],
    ["2001:4860:4860::8888", false],
    ["::ffff:8.8.8.8", false],
    ["127.0.0.1", true],
    ["127.255.255.254", true],
    ["::1", true],
    ["0.0.0.0", true],
    ["0.1.2.3", true],
    ["::", true],
    ["10.0.0.1", true],
    ["10.255.255.255", true],
    ["172.16.0.1", true],
    ["172.31.255.255", true],
    ["192.168.1.1", true],
    ["100.64.0.1", true],
    ["100.127.255.255", true],
    ["169.254.0.1", true],
    ["169.254.169.254", true],
    ["fe80::1", true],
    ["fe80::1%eth0", true],
    ["febf::1", true],
    ["fc00::1", true],
    ["fd12:3456::1", true],
    ["fd00:ec2::254", true],
    ["224.0.0.1", true],
    ["239.255.255.250", true],
    ["240.0.0.1", true],
    ["255.255.255.255", true],
    ["ff02::1", true],
    ["::ffff:127.0.0.1", true],
    ["::ffff:7f00:1", true],
    ["::ffff:10.0.0.1", true],
    ["::ffff:169.254.169.254", true],
    ["::ffff:192.168.0.1", true],
    ["64:ff9b::10.0.0.1", true],
    ["::ffff:0:127.0.0.1", true],
    ["2002:7f00:1::", true],
    ["2002:a9fe:a9fe::1", true],
    ["2002:808:808::1", false],
    ["192.0.2.2", true],
    ["198.51.100.7", true],
    ["203.0.113.9", true],
    ["192.88.99.1", true],
    ["::ffff:203.0.113.9", true],
    ["100::1", true],
    ["2001::1", true],
    ["2001:10::1", true],
    ["2001:db8::1", true],
    ["3fff::1", true],
    ["not an ip", true],
  ])("%s → %s", (ip, expected) => {
    expect(isPrivateAddress(ip)).toBe(expected);
  });

  it("counts this machine's own addresses as private, public ones included, in every IPv6 form of IPv4", () => {
    for (const own of ["8.8.4.4", "::ffff:8.8.4.4", "::ffff:0:8.8.4.4", "64:ff9b::8.8.4.4", "2002:808:404::1"]) {
      expect(isPrivateAddress(own), own).toBe(true);
    }
    expect(isPrivateAddress("2606:4700::1111")).toBe(true);
    // Its neighbours are not the machine's.
    expect(isPrivateAddress("8.8.4.5")).toBe(false);
    expect(isPrivateAddress("2606:4700::1112")).toBe(false);
  });
});

/** What a refusal says after the host's name (or the IP literal the caller gave). */
const NOT_ALLOWED = "an address that is not allowed (private, loopback, link-local or metadata)";

/** An IPv4 or IPv6 address anywhere in a text. */
const IP_ADDRESS = /\b\d{1,3}(?:\.\d{1,3}){3}\b|(?:^|[^\w:])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}/i;

const lookupTo =
  (addresses: string[]) =>
  async (_hostname: string): Promise<string[]> =>
    addresses;

describe("checkOutboundUrl", () => {
  it.each([
    ["ftp://example.com/hook", /scheme/],
    ["not a url", /not a valid URL/],
    ["http://user:pw@example.com/hook", /credentials/],
    ["https://:pw@example.com/hook", /credentials/],
  ])("refuses %s whatever allowPrivate says", async (url, reason) => {
    const lookup = lookupTo(["93.184.216.34"]);
    expect(await checkOutboundUrl(url, { allowPrivate: false, lookup })).toMatch(reason);
    expect(await checkOutboundUrl(url, { allowPrivate: true, lookup })).toMatch(reason);
  });

  it.each([
    // An IP literal is named, as given (after the WHATWG parser's normalising).
    ["http://127.0.0.1/hook", undefined, "127.0.0.1 is"],
    ["http://[::1]/hook", undefined, "::1 is"],
    ["http://[::ffff:127.0.0.1]/hook", undefined, "::ffff:7f00:1 is"],
    ["http://10.1.2.3/hook", undefined, "10.1.2.3 is"],
    ["http://169.254.169.254/latest/meta-data", undefined, "169.254.169.254 is"],
    ["http://[fd00:ec2::254]/latest/meta-data", undefined, "fd00:ec2::254 is"],
    // The WHATWG parser turns this into 127.0.0.1 before anything else sees it.
    ["http://0x7f.1/hook", undefined, "127.0.0.1 is"],
    // A name is named, never the address it resolved to.
    ["http://localhost/hook", undefined, "localhost resolves to"],
    ["https://internal.example/hook", lookupTo(["127.0.0.1"]), "internal.example resolves to"],
    ["https://mixed.example/hook", lookupTo(["93.184.216.34", "10.0.0.5"]), "mixed.example resolves to"],
  ])("refuses %s unless private targets are allowed", async (url, lookup, refusal) => {
    expect(await checkOutboundUrl(url, { allowPrivate: false, lookup })).toBe(`${refusal} ${NOT_ALLOWED}`);
    expect(await checkOutboundUrl(url, { allowPrivate: true, lookup })).toBeNull();
  });

  it("accepts a hostname that resolves to public addresses", async () => {
    const lookup = lookupTo(["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"]);
    expect(await checkOutboundUrl("https://example.com/hook", { allowPrivate: false, lookup })).toBeNull();
  });

  it("accepts a public IP literal without resolving anything", async () => {
    const lookup = async (): Promise<string[]> => {
      throw new Error("lookup must not be called for an IP literal");
    };
    expect(await checkOutboundUrl("http://93.184.216.34/hook", { allowPrivate: false, lookup })).toBeNull();
    expect(await checkOutboundUrl("http://[2606:4700::1]/hook", { allowPrivate: false, lookup })).toBeNull();
  });

  it("accepts a hostname that does not resolve yet, or not in time (checked again at connect)", async () => {
    const notFound = async (): Promise<string[]> => {
      throw Object.assign(new Error("getaddrinfo ENOTFOUND nowhere.example"), { code: "ENOTFOUND" });
    };
    const never = () => new Promise<string[]>(() => {});
    for (const allowPrivate of [false, true]) {
      expect(await checkOutboundUrl("https://nowhere.example/", { allowPrivate, lookup: notFound })).toBeNull();
      expect(await checkOutboundUrl("https://empty.example/", { allowPrivate, lookup: lookupTo([]) })).toBeNull();
    }
    const started = Date.now();
    expect(await checkOutboundUrl("https://slow.example/", { allowPrivate: false, lookup: never })).toBeNull();
    expect(Date.now() - started).toBeLessThan(3_000);
  });
});

/** Resolves `internal.test` to loopback and nothing else, the way a split-horizon DNS might. */
const internalLookup: LookupFunction = (hostname, options, callback) => {
  if (hostname !== "internal.test") {
    callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" }), []);
  } else if (options.all) {
    callback(null, [{ address: "127.0.0.1", family: 4 }]);
  } else {
    callback(null, "127.0.0.1", 4);
  }
};

describe("outbound client", () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function receiver(): Promise<Receiver> {
    const started = await startReceiver();
    cleanups.push(() => started.close());
    return started;
  }

  function client(options: Partial<OutboundClientOptions> = {}): OutboundClient {
    const created = createOutboundClient({ timeoutMs: 5_000, allowPrivate: true, ...options });
    cleanups.push(() => created.close());
    return created;
  }

  const json = { "content-type": "application/json" };

  describe("with private targets allowed", () => {
    it("returns the status and body of a 200", async () => {
      const target = await receiver();
      target.respondWith(() => ({ status: 200, body: "received" }));
      const result = await client().post(`http://127.0.0.1:${target.port}/hook`, json, "{}");
      expect(result).toMatchObject({ statusCode: 200, body: "received", error: null });
      expect(result.latencyMs).toBeGreaterThanOrEqual(0);
      expect(result.latencyMs).toBeLessThan(5_000);
    });

    it("delivers headers and body exactly as given", async () => {
      const target = await receiver();
      const body = JSON.stringify({ event: "project.provisioned", payload: { name: "café ☕" }, timestamp: 1 });
      const headers = {
        "content-type": "application/json",
        "x-service-signature": "a1b2c3",
        "x-service-timestamp": "1700000000",
        "x-service-event": "project.provisioned",
        "x-service-delivery": "dlv_123",
      };
      await client().post(`http://127.0.0.1:${target.port}/path?query=1`, headers, body);
      expect(target.requests).toHaveLength(1);
      const [received] = target.requests;
      expect(received).toMatchObject({ method: "POST", path: "/path?query=1", body, headers });
      expect(received?.headers["content-length"]).toBe(String(Buffer.byteLength(body)));
    });

    it("returns a 500 as its status, not as an error", async () => {
      const target = await receiver();
      target.respondWith(() => ({ status: 500, body: "boom" }));
      const result = await client().post(`http://127.0.0.1:${target.port}/`, json, "{}");
      expect(result).toMatchObject({ statusCode: 500, body: "boom", error: null });
    });

    it("does not follow a redirect", async () => {
      const target = await receiver();
      target.respondWith((request) =>
        request.path === "/hook"
          ? { status: 302, headers: { location: "/elsewhere" }, body: "" }
          : { status: 200, body: "followed" },
      );
      const result = await client().post(`http://127.0.0.1:${target.port}/hook`, json, "{}");
      expect(result).toMatchObject({ statusCode: 302, error: null });
      expect(target.requests.map((request) => request.path)).toEqual(["/hook"]);
    });

    it("answers a request it cannot send (a header value with a line break) with an error, never a throw", async () => {
      const target = await receiver();
      const result = await client().post(`http://127.0.0.1:${target.port}/`, { "x-custom": "a\r\nb" }, "{}");
      expect(result).toMatchObject({ statusCode: null, body: null, error: expect.any(String) });
      expect(target.requests).toEqual([]);
    });

    it("keeps at most 2048 bytes of a large response", async () => {
      const target = await receiver();
      target.respondWith(() => ({ status: 200, body: "x".repeat(10 * 1024) }));
      const result = await client().post(`http://127.0.0.1:${target.port}/`, json, "{}");
      expect(result).toMatchObject({ statusCode: 200, body: "x".repeat(2048), error: null });
    });

    it("cuts a multibyte body on a character boundary", async () => {
      const target = await receiver();
      // 1 + 2 × 2000 bytes: byte 2048 falls in the middle of an "é".
      target.respondWith(() => ({ status: 200, body: `a${"é".repeat(2000)}` }));
      const result = await client().post(`http://127.0.0.1:${target.port}/`, json, "{}");
      expect(result.body).toBe(`a${"é".repeat(1023)}`);
      expect(Buffer.byteLength(result.body ?? "")).toBe(2047);
    });

    it("turns invalid bytes into U+FFFD wherever they are in a body that is not cut, the last ones too", async () => {
      const target = await receiver();
      // "caf" + 0xE9 (latin-1 "é"), and an invalid byte in the middle: 4 + 3 bytes, far below the cut.
      target.respondWith(() => ({ status: 200, body: Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x41, 0xff, 0x42]) }));
      const middle = await client().post(`http://127.0.0.1:${target.port}/`, json, "{}");
      expect(middle.body).toBe("caf\uFFFDA\uFFFDB");
      target.respondWith(() => ({ status: 200, body: Buffer.from([0x63, 0x61, 0x66, 0xe9]) }));
      const end = await client().post(`http://127.0.0.1:${target.port}/`, json, "{}");
      expect(end.body).toBe("caf\uFFFD");
    });

    it("honours a smaller maxResponseBytes", async () => {
      const target = await receiver();
      target.respondWith(() => ({ status: 200, body: "0123456789" }));
      const result = await client({ maxResponseBytes: 4 }).post(`http://127.0.0.1:${target.port}/`, json, "{}");
      expect(result.body).toBe("0123");
    });

    it("stops reading once it has enough, without waiting for the rest", async () => {
      const target = await receiver();
      // Headers and 4 KiB, then the body never ends.
      target.respondWith(() => ({ status: 200, body: "y".repeat(4096), keepOpen: true }));
      const result = await client({ timeoutMs: 3_000 }).post(`http://127.0.0.1:${target.port}/`, json, "{}");
      expect(result).toMatchObject({ statusCode: 200, body: "y".repeat(2048), error: null });
      expect(result.latencyMs).toBeLessThan(2_000);
    });

    it("times out a receiver that never answers", async () => {
      const target = await receiver();
      target.respondWith(() => new Promise(() => {}));
      const started = performance.now();
      const result = await client({ timeoutMs: 300 }).post(`http://127.0.0.1:${target.port}/`, json, "{}");
      const elapsed = performance.now() - started;
      expect(result).toMatchObject({ statusCode: null, body: null, error: "timed out after 300 ms" });
      expect(elapsed).toBeGreaterThanOrEqual(290);
      expect(elapsed).toBeLessThan(1_500);
      expect(result.latencyMs).toBeGreaterThanOrEqual(290);
    });

    it("times out a body that stalls after the headers", async () => {
      const target = await receiver();
      target.respondWith(() => ({ status: 200, body: "partial", keepOpen: true }));
      const result = await client({ timeoutMs: 300 }).post(`http://127.0.0.1:${target.port}/`, json, "{}");
      expect(result).toMatchObject({ statusCode: null, body: null, error: "timed out after 300 ms" });
      expect(result.latencyMs).toBeLessThan(1_500);
    });

    it("ends when the caller's signal aborts", async () => {
      const target = await receiver();
      target.respondWith(() => new Promise(() => {}));
      const signal = AbortSignal.timeout(100);
      const result = await client({ timeoutMs: 5_000 }).post(`http://127.0.0.1:${target.port}/`, json, "{}", signal);
      expect(result.statusCode).toBeNull();
      expect(result.error).toMatch(/^aborted/);
      expect(result.latencyMs).toBeLessThan(1_500);
    });

    it("reports a refused connection as an error", async () => {
      const closed = await startReceiver();
      await closed.close();
      const result = await client().post(`http://127.0.0.1:${closed.port}/`, json, "{}");
      expect(result.statusCode).toBeNull();
      expect(result.body).toBeNull();
      expect(result.error).toMatch(/ECONNREFUSED/);
    });

    it("reports an invalid URL as an error", async () => {
      const result = await client().post("not a url", json, "{}");
      expect(result).toMatchObject({ statusCode: null, error: "not a valid URL" });
    });

    it("reuses one connection for consecutive requests", async () => {
      const target = await receiver();
      const outbound = client();
      for (let attempt = 0; attempt < 3; attempt++) {
        await outbound.post(`http://127.0.0.1:${target.port}/`, json, "{}");
        // undici returns the socket to the pool a tick after the body ends; a sender that goes
        // straight on would open a second connection and prove nothing either way.
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(target.requests).toHaveLength(3);
      expect(target.connections).toBe(1);
    });

    it("connects through the injected lookup", async () => {
      const target = await receiver();
      const result = await client({ lookup: internalLookup }).post(`http://internal.test:${target.port}/`, json, "{}");
      expect(result).toMatchObject({ statusCode: 200, error: null });
      expect(target.requests[0]?.headers.host).toBe(`internal.test:${target.port}`);
    });
  });

  describe("with private targets refused", () => {
    it.each([
      ["127.0.0.1", undefined, "127.0.0.1 is"],
      ["[::1]", undefined, "::1 is"],
      ["localhost", undefined, "localhost resolves to"],
      ["internal.test", internalLookup, "internal.test resolves to"],
    ])("refuses %s before any byte reaches the receiver", async (host, lookup, refusal) => {
      const target = await receiver();
      const result = await client({ allowPrivate: false, lookup }).post(`http://${host}:${target.port}/`, json, "{}");
      expect(result.statusCode).toBeNull();
      expect(result.body).toBeNull();
      expect(result.error).toBe(`refused: ${refusal} ${NOT_ALLOWED}`);
      expect(target.requests).toHaveLength(0);
      expect(target.connections).toBe(0);
    });
  });
});

// Over HTTP, through the running app: a refusal must not tell whoever can save a URL what the
// operator's internal names resolve to. `localhost` stands for such a name; it resolves to
// loopback without a network.
describe("refusals a caller reads name the host, never the address it resolved to", () => {
  let open: TestApp;
  let strict: TestApp;
  let target: Receiver;
  const LOOSE = { AUTH_RATE_LIMIT_PER_MINUTE: "10000", RATE_LIMIT_PER_MINUTE: "100000", WORKER_POLL_MS: "50" };

  beforeAll(async () => {
    target = await startReceiver();
    // Private targets allowed: the webhooks a stricter process then refuses at send can be saved.
    open = await startApp({ ...LOOSE, ALLOW_PRIVATE_WEBHOOK_URLS: "true" });
    // ALLOW_PRIVATE_WEBHOOK_URLS unset, on the same database (as after the operator unset it).
    strict = await startApp(LOOSE, { shareDatabaseWith: open });
  });
  afterAll(async () => {
    await strict?.close();
    await open?.close();
    await target?.close();
  });

  it("the address pattern below finds addresses, and nothing in the refusal of a name", () => {
    for (const text of [
      "10.0.0.5",
      "to 127.0.0.1 now",
      "::1",
      "at fe80::1%eth0",
      "(2606:4700::1111)",
      "::ffff:7f00:1",
    ]) {
      expect(text, text).toMatch(IP_ADDRESS);
    }
    for (const text of [
      `localhost resolves to ${NOT_ALLOWED}`,
      `validation failed: config.webhookUrl: refused: internal.example resolves to ${NOT_ALLOWED}`,
    ]) {
      expect(text, text).not.toMatch(IP_ADDRESS);
    }
  });

  const hookUrl = () => `http://localhost:${target.port}/hook`;
  const refusal = `localhost resolves to ${NOT_ALLOWED}`;

  /** 422 naming `field` with the refusal, and no address anywhere in the error. */
  function expectRefused(res: Pick<CallResult, "status" | "body">, field: string): void {
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(res.body.error.code).toBe("VALIDATION");
    expect(res.body.error.details).toContainEqual({ path: field, message: refusal });
    expect(JSON.stringify(res.body.error)).not.toMatch(IP_ADDRESS);
  }

  /** The delivery after a refused attempt: the attempt's error and the delivery's name the host alone. */
  function expectRefusedDelivery(delivery: any): void {
    expect(delivery.attempts).toHaveLength(1);
    expect(delivery.attempts[0]).toMatchObject({ statusCode: null, error: `refused: ${refusal}` });
    expect(delivery.lastError).toBe(`refused: ${refusal}`);
    expect(JSON.stringify(delivery)).not.toMatch(IP_ADDRESS);
  }

  /** One call to a project's workspace API, as its admin. */
  const workspace = (app: TestApp, project: any, method: string, path: string, body?: unknown) =>
    callWorkspace(app, project.id, method, path, { token: project.adminToken, body });

  it("at create and update: org webhooks, the org's webhookUrl, integrations and workspace webhooks", async () => {
    const owner = await signUp(strict);
    const org = await createOrg(strict, owner, "Strict Org");
    const as = { cookie: owner.cookie };

    expectRefused(
      await call(strict, "POST", `/org/${org.slug}/webhooks`, { ...as, body: { url: hookUrl(), events: ["*"] } }),
      "url",
    );
    const hook = await call(strict, "POST", `/org/${org.slug}/webhooks`, {
      ...as,
      body: { url: "http://93.184.216.34/hook", events: ["*"] },
    });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    expectRefused(
      await call(strict, "PATCH", `/org/${org.slug}/webhooks/${hook.body.webhook.id}`, {
        ...as,
        body: { url: hookUrl() },
      }),
      "url",
    );
    expectRefused(
      await call(strict, "PATCH", `/org/${org.slug}`, { ...as, body: { webhookUrl: hookUrl() } }),
      "webhookUrl",
    );
    expectRefused(
      await call(strict, "POST", `/org/${org.slug}/integrations`, {
        ...as,
        body: { kind: "slack", config: { webhookUrl: hookUrl() } },
      }),
      "config.webhookUrl",
    );

    const project = await createActiveProject(strict, owner, org.slug, "Strict Project");
    const hookInput = { name: "Internal", url: hookUrl(), events: ["*"] };
    expectRefused(await workspace(strict, project, "POST", "/webhooks", hookInput), "url");
    const wsHook = await workspace(strict, project, "POST", "/webhooks", {
      ...hookInput,
      url: "http://93.184.216.34/",
    });
    expect(wsHook.status, JSON.stringify(wsHook.body)).toBe(201);
    expectRefused(
      await workspace(strict, project, "PATCH", `/webhooks/${wsHook.body.webhook.id}`, { url: hookUrl() }),
      "url",
    );
  });

  it("at send: the attempt's error and the deliveries list, for org webhooks, integrations and workspace webhooks", async () => {
    const owner = await signUp(open);
    const org = await createOrg(open, owner, "Once Open Org");
    const as = { cookie: owner.cookie };
    // Provisioned before anything subscribes: the open process would deliver its event.
    const project = await createActiveProject(open, owner, org.slug, "Once Open Project");
    const hook = await call(open, "POST", `/org/${org.slug}/webhooks`, {
      ...as,
      body: { url: hookUrl(), events: ["*"] },
    });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    const integration = await call(open, "POST", `/org/${org.slug}/integrations`, {
      ...as,
      body: { kind: "slack", config: { webhookUrl: hookUrl() } },
    });
    expect(integration.status, JSON.stringify(integration.body)).toBe(201);
    const wsHook = await workspace(open, project, "POST", "/webhooks", {
      name: "Internal",
      url: hookUrl(),
      events: ["*"],
    });
    expect(wsHook.status, JSON.stringify(wsHook.body)).toBe(201);

    // Test sends through the process that refuses private targets.
    const sent = await call(strict, "POST", `/webhooks/${hook.body.webhook.id}/test`, as);
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expectRefusedDelivery(sent.body.delivery);
    const listed = await call(strict, "GET", `/org/${org.slug}/webhooks/${hook.body.webhook.id}/deliveries`, as);
    expect(listed.status).toBe(200);
    expect(listed.body.deliveries).toHaveLength(1);
    expectRefusedDelivery(listed.body.deliveries[0]);

    const toIntegration = await call(
      strict,
      "POST",
      `/org/${org.slug}/integrations/${integration.body.integration.id}/test`,
      as,
    );
    expect(toIntegration.status, JSON.stringify(toIntegration.body)).toBe(200);
    expectRefusedDelivery(toIntegration.body.delivery);

    const wsHookId = wsHook.body.webhook.id;
    const toWorkspaceHook = await workspace(strict, project, "POST", `/webhooks/${wsHookId}/test`);
    expect(toWorkspaceHook.status, JSON.stringify(toWorkspaceHook.body)).toBe(200);
    expectRefusedDelivery(toWorkspaceHook.body.delivery);
    const wsListed = await workspace(strict, project, "GET", `/webhooks/${wsHookId}/deliveries`);
    expect(wsListed.status).toBe(200);
    expectRefusedDelivery(wsListed.body.deliveries[0]);

    expect(target.requests).toEqual([]);
    expect(target.connections).toBe(0);
  });
});
