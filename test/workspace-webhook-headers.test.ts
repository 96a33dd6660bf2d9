import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createActiveProject,
  createApiKey,
  createOrg,
  type Receiver,
  signUp,
  startApp,
  startReceiver,
  type TestApp,
  until,
} from "./harness.ts";

/**
 * Workspace webhooks' custom headers often carry a receiver's credentials: their values are
 * masked in every read, a value sent back masked keeps the stored one, stored values never follow
 * a change of the hook's url, and a manual retry re-sends the first request to the URL it went
 * to, not to where the hook points now. Real app, real receivers.
 */

const STRICT_ENV = {
  WORKER_POLL_MS: "50",
  WEBHOOK_BACKOFF_BASE_MS: "20",
  WEBHOOK_MAX_ATTEMPTS: "3",
  AUTH_RATE_LIMIT_PER_MINUTE: "10000",
  RATE_LIMIT_PER_MINUTE: "1000000",
};
const ENV = { ...STRICT_ENV, ALLOW_PRIVATE_WEBHOOK_URLS: "true" };

const TOKEN = "Bearer tok_live_9f8e7d6c5b4a1234";
const TENANT = "acme";
const HEADERS = { Authorization: TOKEN, "X-Tenant": TENANT };
/** HEADERS as read: the last four characters of a value longer than four, else the mask alone. */
const MASKED = { Authorization: "••••1234", "X-Tenant": "••••" };

interface Result {
  status: number;
  body: any;
}

/** One call to a project's workspace API, `{workspaceUrl}/api`, as `token` (the admin token by default). */
async function ws(app: TestApp, project: any, method: string, path: string, body?: unknown, token?: string) {
  const response = await fetch(`${app.url}/w/${project.id}/api${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token ?? project.adminToken}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null } as Result;
}

function errorPaths(res: Result): string[] {
  expect(res.status, JSON.stringify(res.body)).toBe(422);
  expect(res.body.error.code).toBe("VALIDATION");
  return res.body.error.details.map((d: { path: string }) => d.path).sort();
}

function errorMessage(res: Result, path: string): string {
  return res.body.error.details.find((d: { path: string }) => d.path === path)?.message;
}

describe("workspace webhook custom headers", () => {
  let app: TestApp;
  let project: any;
  let readOnlyKey: string;
  let a: Receiver;
  let b: Receiver;

  const api = (method: string, path: string, body?: unknown, token?: string) =>
    ws(app, project, method, path, body, token);

  async function hook(input: Record<string, unknown>): Promise<any> {
    const res = await api("POST", "/webhooks", { events: ["items:none"], ...input });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.webhook;
  }

  async function getHook(id: string): Promise<any> {
    const res = await api("GET", `/webhooks/${id}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.webhook;
  }

  async function patch(id: string, body: Record<string, unknown>): Promise<any> {
    const res = await api("PATCH", `/webhooks/${id}`, body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.webhook;
  }

  /** Sends webhook.test now; returns the request the receiver got. */
  async function testSend(id: string, receiver: Receiver, path: string) {
    const before = receiver.at(path).length;
    const sent = await api("POST", `/webhooks/${id}/test`);
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expect(sent.body.delivery.status, JSON.stringify(sent.body.delivery)).toBe("succeeded");
    const requests = receiver.at(path);
    expect(requests).toHaveLength(before + 1);
    return requests[before]!;
  }

  beforeAll(async () => {
    app = await startApp(ENV);
    a = await startReceiver();
    b = await startReceiver();
    const owner = await signUp(app);
    const { slug } = await createOrg(app, owner, "Header Org");
    project = await createActiveProject(app, owner, slug, "Headers");
    readOnlyKey = (await createApiKey(app, owner, slug, "read-only")).token;
    const collection = await api("POST", "/collections", { slug: "notes" });
    expect(collection.status, JSON.stringify(collection.body)).toBe(201);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await app?.close();
  });

  it("masks header values in create, get, list and update answers, to a read-only key too", async () => {
    const created = await api("POST", "/webhooks", {
      name: "masked",
      url: `${a.url}/masked`,
      events: ["items:none"],
      headers: HEADERS,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.webhook.id;
    expect(created.body.webhook.headers).toEqual(MASKED);

    const reads: Result[] = [
      created,
      await api("GET", `/webhooks/${id}`),
      await api("GET", "/webhooks"),
      await api("GET", `/webhooks/${id}`, undefined, readOnlyKey),
      await api("GET", "/webhooks", undefined, readOnlyKey),
      await api("PATCH", `/webhooks/${id}`, { name: "masked renamed" }),
    ];
    for (const read of reads) {
      expect(read.status, JSON.stringify(read.body)).toBeLessThan(300);
      const hooks = read.body.webhooks ?? [read.body.webhook];
      expect(hooks.find((h: { id: string }) => h.id === id).headers).toEqual(MASKED);
      expect(JSON.stringify(read.body)).not.toContain("tok_live");
    }

    const replaced = await patch(id, { headers: { Authorization: "Bearer other-token-5678", "X-Short": "abcde" } });
    expect(replaced.headers).toEqual({ Authorization: "••••5678", "X-Short": "••••bcde" });
    expect(JSON.stringify(replaced)).not.toContain("other-token");
  });

  it("keeps a value sent back masked, by its name in any case; the next delivery carries the real one", async () => {
    const created = await hook({ name: "round trip", url: `${a.url}/round-trip`, headers: HEADERS });
    const read = await getHook(created.id);

    // A read-modify-write: everything as read, one header renamed in case, one added.
    const { Authorization, "X-Tenant": tenant } = read.headers;
    const written = await patch(created.id, {
      name: read.name,
      url: read.url,
      events: read.events,
      payloadFields: read.payloadFields,
      headers: { authorization: Authorization, "X-Tenant": tenant, "X-Added": "added-value" },
    });
    expect(written.headers).toEqual({ authorization: "••••1234", "X-Tenant": "••••", "X-Added": "••••alue" });

    const request = await testSend(created.id, a, "/round-trip");
    expect(request.headers.authorization).toBe(TOKEN);
    expect(request.headers["x-tenant"]).toBe(TENANT);
    expect(request.headers["x-added"]).toBe("added-value");

    // A header left out of the map is dropped; the one sent back masked is still kept.
    await patch(created.id, { headers: { authorization: "••••1234" } });
    const after = await testSend(created.id, a, "/round-trip");
    expect(after.headers.authorization).toBe(TOKEN);
    expect(after.headers["x-tenant"]).toBeUndefined();
    expect(after.headers["x-added"]).toBeUndefined();
  });

  it("refuses a masked value with nothing stored under its name, at create and at PATCH (422 naming headers.<name>)", async () => {
    const created = await api("POST", "/webhooks", {
      name: "copied",
      url: `${a.url}/copied`,
      events: ["items:none"],
      headers: MASKED,
    });
    expect(errorPaths(created)).toEqual(["headers.Authorization", "headers.X-Tenant"]);
    expect(errorMessage(created, "headers.Authorization")).toMatch(/masked.*send the value itself/);

    const target = await hook({ name: "unknown masked", url: `${a.url}/unknown-masked`, headers: HEADERS });
    const patched = await api("PATCH", `/webhooks/${target.id}`, {
      headers: { Authorization: "••••1234", "X-Other": "••••abcd" },
    });
    expect(errorPaths(patched)).toEqual(["headers.X-Other"]);
    // Nothing changed.
    const request = await testSend(target.id, a, "/unknown-masked");
    expect(request.headers.authorization).toBe(TOKEN);
    expect(request.headers["x-tenant"]).toBe(TENANT);
    expect(request.headers["x-other"]).toBeUndefined();
  });

  it("refuses a url change that would keep stored values, sent back masked or left out", async () => {
    const created = await hook({ name: "moving", url: `${a.url}/moving`, headers: HEADERS });
    const read = await getHook(created.id);

    const masked = await api("PATCH", `/webhooks/${created.id}`, { url: `${b.url}/moved`, headers: read.headers });
    expect(errorPaths(masked)).toEqual(["headers.Authorization", "headers.X-Tenant"]);
    expect(errorMessage(masked, "headers.Authorization")).toBe("must be sent again, not masked, when url changes");
    // One value given again is not enough while another is still masked.
    const partly = await api("PATCH", `/webhooks/${created.id}`, {
      url: `${b.url}/moved`,
      headers: { Authorization: "Bearer new", "X-Tenant": "••••" },
    });
    expect(errorPaths(partly)).toEqual(["headers.X-Tenant"]);
    const leftOut = await api("PATCH", `/webhooks/${created.id}`, { url: `${b.url}/moved`, name: "moved" });
    expect(errorPaths(leftOut)).toEqual(["headers"]);
    expect(errorMessage(leftOut, "headers")).toMatch(/sent again, in full .* when url changes/);

    // None of them changed anything: the hook still sends its headers to its url.
    expect(await getHook(created.id)).toEqual(read);
    const stayed = await testSend(created.id, a, "/moving");
    expect(stayed.headers.authorization).toBe(TOKEN);
    expect(b.at("/moved")).toHaveLength(0);

    // The url sent back as it is does not change it: masked values are kept.
    await patch(created.id, { url: read.url, headers: read.headers });
    expect((await testSend(created.id, a, "/moving")).headers.authorization).toBe(TOKEN);

    // Values given in full move with the url; null drops them.
    const moved = await patch(created.id, { url: `${b.url}/moved`, headers: { Authorization: "Bearer for-b-9999" } });
    expect(moved).toMatchObject({ url: `${b.url}/moved`, headers: { Authorization: "••••9999" } });
    const atB = await testSend(created.id, b, "/moved");
    expect(atB.headers.authorization).toBe("Bearer for-b-9999");
    expect(atB.headers["x-tenant"]).toBeUndefined();
    const dropped = await patch(created.id, { url: `${a.url}/moving`, headers: null });
    expect(dropped.headers).toEqual({});
    expect((await testSend(created.id, a, "/moving")).headers.authorization).toBeUndefined();

    // A hook without custom headers moves with its url alone.
    expect((await patch(created.id, { url: `${b.url}/bare` })).url).toBe(`${b.url}/bare`);
  });

  it("re-sends a delivery, after its hook moved, to the URL it first went to: body, headers and signatures byte for byte", async () => {
    const created = await hook({
      name: "replayed",
      url: `${a.url}/replayed`,
      events: ["items:notes:created"],
      secret: "replay-secret",
      headers: HEADERS,
    });
    const item = await api("POST", "/items/notes", { title: "first", emoji: "☃" });
    expect(item.status, JSON.stringify(item.body)).toBe(201);
    const [delivery] = await until("the first attempt", async () => {
      const listed = await api("GET", `/webhooks/${created.id}/deliveries`);
      return listed.body.deliveries[0]?.status === "succeeded" ? listed.body.deliveries : undefined;
    });
    const [first] = a.at("/replayed");
    expect(first).toBeDefined();
    expect(first!.headers.authorization).toBe(TOKEN);

    await patch(created.id, { url: `${b.url}/replayed`, headers: { Authorization: "Bearer for-b-0000" } });
    app.clock.advance(5_000);
    const retried = await api("POST", `/webhooks/_deliveries/${delivery.id}/retry`);
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(retried.body.delivery).toMatchObject({ id: delivery.id, status: "succeeded", attemptCount: 2 });

    expect(b.at("/replayed")).toHaveLength(0);
    const requests = a.at("/replayed");
    expect(requests).toHaveLength(2);
    const second = requests[1]!;
    expect(second.raw.equals(first!.raw)).toBe(true);
    const names = Object.keys(first!.headers).filter((name) => !["connection", "keep-alive"].includes(name));
    for (const name of ["authorization", "x-tenant", "x-service-signature-v2", "x-service-timestamp"]) {
      expect(names).toContain(name);
    }
    for (const name of names) expect(second.headers[name], name).toBe(first!.headers[name]);
    expect(Object.keys(second.headers).sort()).toEqual(Object.keys(first!.headers).sort());

    const recorded = await app.server.deps.db
      .selectFrom("webhook_attempts")
      .select(["attempt", "url"])
      .where("delivery_id", "=", delivery.id)
      .orderBy("attempt")
      .execute();
    expect(recorded).toEqual([
      { attempt: 1, url: `${a.url}/replayed` },
      { attempt: 2, url: `${a.url}/replayed` },
    ]);

    // The next event goes where the hook points now, with its headers now, signed afresh.
    await api("POST", "/items/notes", { title: "second" });
    const atB = await b.waitFor("the next event", (request) => request.path === "/replayed");
    expect(atB.headers.authorization).toBe("Bearer for-b-0000");
    expect(atB.headers["x-tenant"]).toBeUndefined();
    expect(atB.headers["x-service-timestamp"]).not.toBe(first!.headers["x-service-timestamp"]);
  });

  it("re-sends an attempt recorded before attempts kept their URL to the URL its delivery was made for", async () => {
    const created = await hook({ name: "legacy", url: `${a.url}/legacy`, headers: HEADERS });
    const sent = await api("POST", `/webhooks/${created.id}/test`);
    expect(sent.body.delivery.status, JSON.stringify(sent.body.delivery)).toBe("succeeded");
    await app.server.deps.db
      .updateTable("webhook_attempts")
      .set({ url: null })
      .where("delivery_id", "=", sent.body.delivery.id)
      .execute();
    await patch(created.id, { url: `${b.url}/legacy`, headers: { Authorization: "Bearer for-b" } });

    const retried = await api("POST", `/webhooks/_deliveries/${sent.body.delivery.id}/retry`);
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(retried.body.delivery.attempts[1]).toMatchObject({ statusCode: 200 });
    expect(a.at("/legacy")).toHaveLength(2);
    expect(a.at("/legacy")[1]!.headers.authorization).toBe(TOKEN);
    expect(b.at("/legacy")).toHaveLength(0);
  });
});

describe("a retry's original URL is checked at connect", () => {
  let open: TestApp;
  let strict: TestApp;
  let a: Receiver;
  let b: Receiver;

  beforeAll(async () => {
    a = await startReceiver();
    b = await startReceiver();
    // Private targets allowed: a hook at a local receiver can be saved and sent to.
    open = await startApp(ENV);
    // ALLOW_PRIVATE_WEBHOOK_URLS unset, on the same database (as after the operator unset it).
    strict = await startApp(STRICT_ENV, { shareDatabaseWith: open });
  });
  afterAll(async () => {
    await strict?.close();
    await open?.close();
    await a?.close();
    await b?.close();
  });

  it("refuses a retry whose first URL is no longer allowed, naming that URL's host; it never goes to the new URL", async () => {
    const owner = await signUp(open);
    const { slug } = await createOrg(open, owner, "Strict Retry Org");
    const project = await createActiveProject(open, owner, slug, "Strict Retry");
    // A by name, B by address: a refusal names the host it was for.
    const created = await ws(open, project, "POST", "/webhooks", {
      name: "first at a",
      url: `http://localhost:${new URL(a.url).port}/first`,
      events: ["items:none"],
      headers: HEADERS,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.webhook.id;
    const sent = await ws(open, project, "POST", `/webhooks/${id}/test`);
    expect(sent.body.delivery.status, JSON.stringify(sent.body.delivery)).toBe("succeeded");
    expect(a.at("/first")).toHaveLength(1);
    const moved = await ws(open, project, "PATCH", `/webhooks/${id}`, {
      url: `${b.url}/second`,
      headers: { Authorization: "Bearer for-b" },
    });
    expect(moved.status, JSON.stringify(moved.body)).toBe(200);

    const retried = await ws(strict, project, "POST", `/webhooks/_deliveries/${sent.body.delivery.id}/retry`);
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(retried.body.delivery.attempts[1]).toMatchObject({
      statusCode: null,
      error:
        "refused: localhost resolves to an address that is not allowed (private, loopback, link-local or metadata)",
    });
    expect(a.at("/first")).toHaveLength(1);
    expect(b.requests).toHaveLength(0);
    // The same retry through a process that allows the address goes to A, not B.
    const again = await ws(open, project, "POST", `/webhooks/_deliveries/${sent.body.delivery.id}/retry`);
    expect(again.body.delivery.attempts[2]).toMatchObject({ statusCode: 200 });
    expect(a.at("/first")).toHaveLength(2);
    expect(a.at("/first")[1]!.headers.authorization).toBe(TOKEN);
    expect(b.requests).toHaveLength(0);
  });
});
