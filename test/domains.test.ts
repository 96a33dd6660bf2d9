/**
 * Custom domains (DESIGN §10), through the real HTTP API on SQLite and PostgreSQL, against a real
 * DNS server (dns2, UDP) started by the test: TXT verification, its errors, the re-check job and
 * its deadline, requests routed by Host, the on-demand TLS check, limits, roles.
 */
import { request as httpRequest } from "node:http";
import dns2 from "dns2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAY_MS } from "../src/clock.ts";
import { recheckDomains } from "../src/domains/domains/service.ts";
import {
  addMember,
  call,
  createActiveProject,
  createApiKey,
  createOrg,
  expectError,
  expectNoContent,
  expectValidation,
  type Mailbox,
  type Receiver,
  signUp,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
  type TestUser,
} from "./harness.ts";
import { freePort } from "./ports.ts";

const PUBLIC_HOST = "plinth.example.net";

/** What the test's DNS server answers for a name: TXT records, SERVFAIL, or nothing at all. */
type Answer = string[] | "servfail" | "silence";

describe("custom domains", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let receiver: Receiver;
  let owner: TestUser;
  let slug: string;
  let project: { id: string; slug: string; adminToken: string };
  let other: { id: string; slug: string; adminToken: string };
  let dns: ReturnType<typeof dns2.createServer>;
  const answers = new Map<string, Answer>();

  const domainsOf = (p = project) => `/org/${slug}/projects/${p.slug}/domains`;
  const add = (hostname: unknown, p = project, who: { cookie?: string; token?: string } = { cookie: owner.cookie }) =>
    call(app, "POST", domainsOf(p), { ...who, body: { hostname } });
  const verify = (id: string, p = project) =>
    call(app, "POST", `${domainsOf(p)}/${id}/verify`, { cookie: owner.cookie });
  const publish = (domain: { verification: { name: string; value: string } }, ...extra: string[]) =>
    answers.set(domain.verification.name, [...extra, domain.verification.value]);

  /** A request to the app's port naming `host` in its Host header. */
  function viaHost(host: string, path: string, token: string): Promise<{ status: number; body: any }> {
    const url = new URL(app.url);
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        { host: url.hostname, port: url.port, path, headers: { host, authorization: `Bearer ${token}` } },
        (res) => {
          let text = "";
          res.on("data", (chunk) => {
            text += chunk;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
        },
      );
      req.on("error", reject);
      req.end();
    });
  }

  beforeAll(async () => {
    dns = dns2.createServer({
      udp: true,
      handle: (request, send) => {
        const response = dns2.Packet.createResponseFromRequest(request);
        const [question] = request.questions;
        const answer = answers.get(question?.name ?? "");
        if (answer === "silence") return;
        if (answer === "servfail") {
          response.header.rcode = 2;
        } else if (answer) {
          for (const data of answer) {
            response.answers.push({
              name: question?.name ?? "",
              type: dns2.Packet.TYPE.TXT,
              class: dns2.Packet.CLASS.IN,
              ttl: 1,
              data,
            } as never);
          }
        } else {
          response.header.rcode = 3; // NXDOMAIN
        }
        send(response);
      },
    });
    const port = await freePort();
    await dns.listen({ udp: { port, address: "127.0.0.1" } });
    mailbox = await startMailbox();
    receiver = await startReceiver();
    app = await startApp({
      SMTP_URL: mailbox.url,
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      RATE_LIMIT_PER_MINUTE: "100000",
      DNS_SERVERS: `127.0.0.1:${port}`,
      PUBLIC_URL: `https://${PUBLIC_HOST}`,
    });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Domain Org")).slug;
    project = await createActiveProject(app, owner, slug, "Storefront");
    other = await createActiveProject(app, owner, slug, "Other");
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await receiver?.close();
    await mailbox?.close();
    await dns?.close();
  });

  it("verifies by TXT record, says what it found until then, and routes the host to the workspace", async () => {
    expect(
      (
        await call(app, "POST", `/org/${slug}/webhooks`, {
          cookie: owner.cookie,
          body: { url: `${receiver.url}/org`, events: ["domain.verified"] },
        })
      ).status,
    ).toBe(201);
    const created = await add("Shop.Example.com");
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const domain = created.body.domain;
    expect(domain).toMatchObject({
      hostname: "shop.example.com",
      status: "pending",
      verification: {
        type: "TXT",
        name: "_plinth-challenge.shop.example.com",
        value: expect.stringMatching(/^plinth-verification=[0-9a-f]{32}$/),
      },
      target: { type: "CNAME", value: PUBLIC_HOST },
      lastCheckedAt: null,
      verifiedAt: null,
      error: null,
    });

    const missing = await verify(domain.id);
    expect(missing.status).toBe(200);
    expect(missing.body.domain).toMatchObject({ status: "pending", error: expect.stringContaining("no TXT record") });
    expect(missing.body.domain.lastCheckedAt).toBeTruthy();

    answers.set(domain.verification.name, ["plinth-verification=somebody-else"]);
    const wrong = await verify(domain.id);
    expect(wrong.body.domain.status).toBe("pending");
    expect(wrong.body.domain.error).toContain("somebody-else");

    answers.set(domain.verification.name, "servfail");
    const servfail = await verify(domain.id);
    expect(servfail.body.domain).toMatchObject({ status: "pending", error: expect.stringContaining("SERVFAIL") });

    // Not yet active: the host serves nothing, and the TLS check says no.
    expect((await viaHost("shop.example.com", "/api/items/posts", project.adminToken)).status).toBe(404);
    expectError(await call(app, "GET", "/domains/check?domain=shop.example.com"), 404, "NOT_FOUND");

    publish(domain, "v=spf1 -all");
    const verified = await verify(domain.id);
    expect(verified.body.domain).toMatchObject({ status: "active", error: null, verifiedAt: expect.any(String) });
    const event = await receiver.waitFor("domain.verified", (r) => r.path === "/org");
    expect(JSON.parse(event.body)).toMatchObject({
      event: "domain.verified",
      payload: { domainId: domain.id, hostname: "shop.example.com", projectId: project.id },
    });
    const notes = await call(app, "GET", `/org/${slug}/notifications`, { cookie: owner.cookie });
    expect(notes.body.notifications.some((n: { kind: string }) => n.kind === "domain.verified")).toBe(true);

    // The host now serves the project's workspace API at /api/…
    const ws = await viaHost("shop.example.com:443", "/api/collections", project.adminToken);
    expect(ws.status, JSON.stringify(ws.body)).toBe(200);
    expect(ws.body).toHaveProperty("collections");
    expect((await viaHost("shop.example.com", "/api/collections", other.adminToken)).status).toBe(401);
    expect(await call(app, "GET", "/domains/check?domain=shop.example.com")).toMatchObject({ status: 200 });
    expect(await call(app, "GET", "/domains/check?domain=SHOP.example.com")).toMatchObject({ status: 200 });

    // Deleted: it stops serving at once.
    expectNoContent(await call(app, "DELETE", `${domainsOf()}/${domain.id}`, { cookie: owner.cookie }));
    expect((await viaHost("shop.example.com", "/api/collections", project.adminToken)).status).toBe(404);
    expectError(await call(app, "GET", "/domains/check?domain=shop.example.com"), 404, "NOT_FOUND");
    expectError(await call(app, "DELETE", `${domainsOf()}/${domain.id}`, { cookie: owner.cookie }), 404, "NOT_FOUND");
  }, 30_000);

  it("says so when the DNS server does not answer", async () => {
    const created = await add("quiet.example.org");
    answers.set(created.body.domain.verification.name, "silence");
    const res = await verify(created.body.domain.id);
    expect(res.status).toBe(200);
    expect(res.body.domain).toMatchObject({ status: "pending", error: expect.stringContaining("timed out") });
    // Gone, so that the re-check job below does not wait on it.
    expectNoContent(await call(app, "DELETE", `${domainsOf()}/${created.body.domain.id}`, { cookie: owner.cookie }));
  }, 30_000);

  it("re-checks pending domains with backoff, and fails them after DOMAIN_VERIFY_DAYS", async () => {
    const { deps } = app.server;
    const later = (await add("later.example.com")).body.domain;
    const never = (await add("never.example.com")).body.domain;
    // Not due yet: nothing is looked up.
    await recheckDomains(deps);
    expect(
      (await call(app, "GET", domainsOf(), { cookie: owner.cookie })).body.domains.find(
        (d: { id: string }) => d.id === later.id,
      ).lastCheckedAt,
    ).toBeNull();
    publish(later);
    app.clock.advance(2 * 60_000);
    try {
      await recheckDomains(deps);
    } finally {
      app.clock.advance(-2 * 60_000);
    }
    const list = (await call(app, "GET", domainsOf(), { cookie: owner.cookie })).body.domains as Array<{
      id: string;
      status: string;
      error: string | null;
    }>;
    expect(list.find((d) => d.id === later.id)?.status).toBe("active");
    expect(list.find((d) => d.id === never.id)).toMatchObject({
      status: "pending",
      error: expect.stringContaining("no TXT record"),
    });

    app.clock.advance(8 * DAY_MS);
    try {
      await recheckDomains(deps);
    } finally {
      app.clock.advance(-8 * DAY_MS);
    }
    const failed = (await call(app, "GET", domainsOf(), { cookie: owner.cookie })).body.domains.find(
      (d: { id: string }) => d.id === never.id,
    );
    expect(failed).toMatchObject({ status: "failed", error: expect.stringContaining("not verified within 7 days") });
    const notes = await call(app, "GET", `/org/${slug}/notifications`, { cookie: owner.cookie });
    expect(notes.body.notifications.some((n: { kind: string }) => n.kind === "domain.failed")).toBe(true);
    // Verify retries a failed one.
    publish(never);
    expect((await verify(never.id)).body.domain.status).toBe("active");
  });

  it("refuses hostnames that are not domain names, naming hostname", async () => {
    for (const hostname of [
      "1.2.3.4",
      "[::1]",
      "::1",
      "localhost",
      "example",
      "example.com.",
      "a..example.com",
      `${Array.from({ length: 5 }, () => "a".repeat(50)).join(".")}.com`,
      "bücher.de",
      "-bad.example.com",
      "under_score.example.com",
      PUBLIC_HOST,
      `api.${PUBLIC_HOST}`,
      "",
      5,
    ]) {
      expectValidation(await add(hostname), "hostname");
    }
    // Punycode is fine.
    expect((await add("xn--bcher-kva.de")).status).toBe(201);
  });

  it("allows a hostname once per project, active on one project only, 10 per project", async () => {
    const first = (await add("dup.example.com")).body.domain;
    expectError(await add("DUP.example.com"), 409, "CONFLICT");
    // Pending on two projects: whoever proves it first has it.
    const theirs = await add("dup.example.com", other);
    expect(theirs.status).toBe(201);
    publish(first);
    expect((await verify(first.id)).body.domain.status).toBe("active");
    answers.set(theirs.body.domain.verification.name, [theirs.body.domain.verification.value]);
    const refused = await verify(theirs.body.domain.id, other);
    expect(refused.body.domain).toMatchObject({ status: "pending", error: expect.stringContaining("another project") });
    expectError(await add("dup.example.com", other), 409, "CONFLICT");

    const fresh = await createActiveProject(app, owner, slug, "Many domains");
    for (let i = 0; i < 10; i++) expect((await add(`d${i}.example.com`, fresh)).status).toBe(201);
    const over = await add("d10.example.com", fresh);
    expectError(over, 409, "PLAN_LIMIT");
    expect(over.body.error.details).toMatchObject({ limit: 10, used: 10 });
  });

  it("frees a deleted project's domains: they stop serving, and another project may have them", async () => {
    const doomed = await createActiveProject(app, owner, slug, "Doomed");
    const domain = (await add("doomed.example.com", doomed)).body.domain;
    publish(domain);
    expect((await verify(domain.id, doomed)).body.domain.status).toBe("active");
    expect((await viaHost("doomed.example.com", "/api/collections", doomed.adminToken)).status).toBe(200);
    expect((await call(app, "DELETE", `/org/${slug}/projects/${doomed.slug}`, { cookie: owner.cookie })).status).toBe(
      200,
    );
    expect((await viaHost("doomed.example.com", "/api/collections", doomed.adminToken)).status).toBe(404);
    expect((await add("doomed.example.com", other)).status).toBe(201);
  });

  it("is for developers and full keys; viewers read; deploy keys, other orgs and unknown ids are refused", async () => {
    const viewer = await addMember(app, mailbox, owner, slug, "viewer");
    const developer = await addMember(app, mailbox, owner, slug, "developer");
    const deployKey = await createApiKey(app, owner, slug, "deploy");
    const fullKey = await createApiKey(app, owner, slug, "full");
    const outsider = await signUp(app);
    await createOrg(app, outsider, "Elsewhere");
    expect((await add("dev.example.com", project, { cookie: developer.user.cookie })).status).toBe(201);
    expect((await add("key.example.com", project, { token: fullKey.token })).status).toBe(201);
    expectError(await add("viewer.example.com", project, { cookie: viewer.user.cookie }), 403, "FORBIDDEN");
    expectError(await add("deploy.example.com", project, { token: deployKey.token }), 403, "FORBIDDEN");
    expect((await call(app, "GET", domainsOf(), { cookie: viewer.user.cookie })).status).toBe(200);
    expect((await call(app, "GET", domainsOf(), { token: deployKey.token })).status).toBe(200);
    expectError(await add("out.example.com", project, { cookie: outsider.cookie }), 404, "NOT_FOUND");
    expectError(await call(app, "GET", domainsOf(), { cookie: outsider.cookie }), 404, "NOT_FOUND");
    expectError(await call(app, "GET", domainsOf(), {}), 401, "UNAUTHORIZED");
    const otherDomain = (await add("elsewhere.example.com", other)).body.domain;
    for (const id of [otherDomain.id, "dom_00000000000000000000000000", "nope"]) {
      expectError(await verify(id), 404, "NOT_FOUND");
      expectError(await call(app, "DELETE", `${domainsOf()}/${id}`, { cookie: owner.cookie }), 404, "NOT_FOUND");
    }
  });
});
