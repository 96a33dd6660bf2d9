import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forgetIntegrationCredentials } from "../src/db/migrations/0007-forget-integration-credentials.ts";
import { integrationConfig } from "../src/domains/integrations/sealed-config.ts";
import {
  addMember,
  type CallResult,
  call,
  createApiKey,
  createOrg,
  expectError,
  expectStatus,
  expectValidation,
  type Mailbox,
  type ReceivedRequest,
  type Receiver,
  signUp,
  sleep,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
  type TestUser,
  uniqueEmail,
} from "./harness.ts";

// ---- a real local receiver, answering by path prefix ----

interface PrefixReceiver extends Receiver {
  /** Requests whose path starts with one of these prefixes are answered with that status. */
  statusByPrefix: Map<string, number>;
  /** Requests whose path starts with one of these prefixes are answered only once the promise settles. */
  holdByPrefix: Map<string, Promise<void>>;
}

/** The harness receiver, answering 200 unless a prefix says otherwise. */
async function startPrefixReceiver(): Promise<PrefixReceiver> {
  const statusByPrefix = new Map<string, number>();
  const holdByPrefix = new Map<string, Promise<void>>();
  const receiver = await startReceiver(async (request) => {
    for (const [prefix, hold] of holdByPrefix) if (request.path.startsWith(`${prefix}/`)) await hold;
    let status = 200;
    for (const [prefix, code] of statusByPrefix) if (request.path.startsWith(`${prefix}/`)) status = code;
    return { status, body: status < 300 ? "ok" : "receiver says no" };
  });
  return Object.assign(receiver, { statusByPrefix, holdByPrefix });
}

function json(request: ReceivedRequest): any {
  return JSON.parse(request.body);
}

/** The event kind a Slack message is about (`Plinth: <kind> in <org>…`). */
function slackKind(request: ReceivedRequest): string | undefined {
  return /^Plinth: (\S+) in /.exec(String(json(request).text))?.[1];
}

/** How long to keep listening after the expected deliveries, before asserting that no others came. */
const SETTLE_MS = 600;

function masked(secret: string): string {
  return `••••${secret.slice(-4)}`;
}

// ---- the suite ----

type Who = "owner" | "admin" | "developer" | "viewer" | "full" | "deploy" | "read-only" | "none";
const EVERYONE: Who[] = ["owner", "admin", "developer", "viewer", "full", "deploy", "read-only", "none"];
const MANAGERS = new Set<Who>(["owner", "admin", "full"]);

describe("integrations", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let receiver: PrefixReceiver;
  let owner: TestUser;
  let slug: string;
  const credentials = {} as Record<Exclude<Who, "none">, { cookie?: string; token?: string }>;

  beforeAll(async () => {
    mailbox = await startMailbox();
    receiver = await startPrefixReceiver();
    app = await startApp({
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      WEBHOOK_BACKOFF_BASE_MS: "20",
      WEBHOOK_MAX_ATTEMPTS: "3",
      WORKER_POLL_MS: "50",
      AUTH_RATE_LIMIT_PER_MINUTE: "10000",
      RATE_LIMIT_PER_MINUTE: "100000",
      SMTP_URL: mailbox.url,
    });
    owner = await signUp(app, uniqueEmail("owner"), "Olive Owner");
    slug = (await createOrg(app, owner, "Matrix Org")).slug;
    credentials.owner = { cookie: owner.cookie };
    for (const role of ["admin", "developer", "viewer"] as const) {
      credentials[role] = { cookie: (await addMember(app, mailbox, owner, slug, role)).user.cookie };
    }
    for (const scope of ["full", "deploy", "read-only"] as const) {
      credentials[scope] = { token: (await createApiKey(app, owner, slug, scope)).token };
    }
  });

  afterAll(async () => {
    await app?.close();
    await receiver?.close();
    await mailbox?.close();
  });

  function as(who: Who): { cookie?: string; token?: string } {
    return who === "none" ? {} : credentials[who];
  }

  let orgCounter = 0;
  /** A fresh org owned by `owner`, so that integrations of one test never see another test's events. */
  async function freshOrg(): Promise<{ slug: string; name: string }> {
    orgCounter += 1;
    const name = `Integrations Org ${orgCounter}`;
    const org = await createOrg(app, owner, name);
    return { slug: org.slug, name };
  }

  let tagCounter = 0;
  /** A unique path prefix on the receiver for one integration. */
  function tag(label: string): string {
    tagCounter += 1;
    return `/${label}-${tagCounter}`;
  }

  function create(orgSlug: string, body: unknown, who: { cookie?: string; token?: string } = { cookie: owner.cookie }) {
    return call(app, "POST", `/org/${orgSlug}/integrations`, { ...who, body });
  }

  async function createOk(orgSlug: string, body: unknown): Promise<any> {
    const res = await create(orgSlug, body);
    expectStatus(res, 201);
    return res.body.integration;
  }

  function slackBody(prefix: string, events?: string[] | null) {
    return {
      kind: "slack",
      config: { webhookUrl: `${receiver.url}${prefix}/services/T000/B000/slackSecret${tagCounter}Zq9x` },
      ...(events === undefined ? {} : { events }),
    };
  }

  async function invite(orgSlug: string): Promise<string> {
    const email = uniqueEmail("invitee");
    const res = await call(app, "POST", `/org/${orgSlug}/invitations`, {
      cookie: owner.cookie,
      body: { email, role: "developer" },
    });
    expectStatus(res, 201);
    return email;
  }

  async function waitForProject(orgSlug: string, projectSlug: string, status: string): Promise<any> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const res = await call(app, "GET", `/org/${orgSlug}/projects/${projectSlug}`, { cookie: owner.cookie });
      expectStatus(res, 200);
      if (res.body.project.status === status) return res.body.project;
      if (Date.now() > deadline) throw new Error(`project ${projectSlug} is ${res.body.project.status}, not ${status}`);
      await sleep(50);
    }
  }

  /** Creates a project, waits for it to be active and pauses it: `project.paused` is emitted. */
  async function createAndPauseProject(orgSlug: string, name: string): Promise<string> {
    const created = await call(app, "POST", `/org/${orgSlug}/projects`, { cookie: owner.cookie, body: { name } });
    expectStatus(created, 201);
    const projectSlug: string = created.body.project.slug;
    await waitForProject(orgSlug, projectSlug, "active");
    const paused = await call(app, "POST", `/org/${orgSlug}/projects/${projectSlug}/pause`, { cookie: owner.cookie });
    expectStatus(paused, 200);
    expect(paused.body.project.status).toBe("paused");
    return projectSlug;
  }

  function requestsUnder(prefix: string): ReceivedRequest[] {
    return receiver.requests.filter((r) => r.path.startsWith(`${prefix}/`));
  }

  // ---- create, read, masking ----

  it("creates each kind (201) and masks secret config values in every response and in the audit log", async () => {
    const org = await freshOrg();
    const slackUrl = `${receiver.url}${tag("slack")}/services/T0001/B0001/slackSecretValue1234AbCd`;
    const discordUrl = `${receiver.url}${tag("discord")}/api/webhooks/987/discordSecretToken5678WxYz`;
    const ddKey = "dd-api-key-0123456789abcdefQRST";
    const ghToken = "ghp_testtoken0123456789ABCDEFgh12";
    const ddApi = `${receiver.url}${tag("dd")}`;
    const ghApi = `${receiver.url}${tag("gh")}`;
    const secrets = [slackUrl, discordUrl, ddKey, ghToken];

    const slack = await createOk(org.slug, { kind: "slack", config: { webhookUrl: slackUrl } });
    const discord = await createOk(org.slug, {
      kind: "discord",
      config: { webhookUrl: discordUrl },
      events: ["project.*"],
    });
    const datadog = await createOk(org.slug, {
      kind: "datadog",
      config: { apiKey: ddKey, site: "datadoghq.eu", apiUrl: ddApi },
      events: ["project.failed", "member.invited"],
    });
    const github = await createOk(org.slug, {
      kind: "github",
      config: { repo: "acme/app", token: ghToken, apiUrl: ghApi },
      events: ["*"],
    });

    expect(slack).toMatchObject({ kind: "slack", config: { webhookUrl: masked(slackUrl) }, events: null });
    expect(discord).toMatchObject({
      kind: "discord",
      config: { webhookUrl: masked(discordUrl) },
      events: ["project.*"],
    });
    expect(datadog).toMatchObject({
      kind: "datadog",
      config: { apiKey: masked(ddKey), site: "datadoghq.eu", apiUrl: ddApi },
      events: ["project.failed", "member.invited"],
    });
    expect(github).toMatchObject({
      kind: "github",
      config: { repo: "acme/app", token: masked(ghToken), apiUrl: ghApi },
      events: ["*"],
    });
    for (const integration of [slack, discord, datadog, github]) {
      expect(integration.id).toEqual(expect.any(String));
      expect(Number.isNaN(Date.parse(integration.createdAt))).toBe(false);
      expect(Number.isNaN(Date.parse(integration.updatedAt))).toBe(false);
    }
    const ids = [slack.id, discord.id, datadog.id, github.id];
    expect(new Set(ids).size).toBe(4);

    const listed = await call(app, "GET", `/org/${org.slug}/integrations`, { cookie: owner.cookie });
    expectStatus(listed, 200);
    expect(listed.body.integrations.map((i: any) => i.id).sort()).toEqual([...ids].sort());
    expect(listed.body.integrations.find((i: any) => i.id === datadog.id)).toEqual(datadog);

    const bodies = [JSON.stringify(listed.body)];
    for (const integration of [slack, discord, datadog, github]) {
      const one = await call(app, "GET", `/org/${org.slug}/integrations/${integration.id}`, { cookie: owner.cookie });
      expectStatus(one, 200);
      expect(one.body.integration).toEqual(integration);
      bodies.push(JSON.stringify(one.body));
    }
    const patched = await call(app, "PATCH", `/org/${org.slug}/integrations/${datadog.id}`, {
      cookie: owner.cookie,
      body: { events: ["project.*"] },
    });
    expectStatus(patched, 200);
    expect(patched.body.integration.config.apiKey).toBe(masked(ddKey));
    bodies.push(JSON.stringify(patched.body));
    const tested = await call(app, "POST", `/org/${org.slug}/integrations/${github.id}/test`, { cookie: owner.cookie });
    expectStatus(tested, 200);
    bodies.push(JSON.stringify(tested.body));
    const ddTested = await call(app, "POST", `/org/${org.slug}/integrations/${datadog.id}/test`, {
      cookie: owner.cookie,
    });
    expectStatus(ddTested, 200);
    // The credentials went out in the request's headers, but are stored with no attempt.
    const stored = await app.server.deps.db
      .selectFrom("webhook_attempts")
      .select("request_headers")
      .where("delivery_id", "in", [tested.body.delivery.id, ddTested.body.delivery.id])
      .execute();
    expect(stored).toHaveLength(2);
    bodies.push(JSON.stringify(stored));

    const audit = await call(app, "GET", `/org/${org.slug}/audit?limit=500`, { cookie: owner.cookie });
    expectStatus(audit, 200);
    const actions = audit.body.events.map((e: any) => e.action);
    expect(actions.filter((a: string) => a === "integration.created")).toHaveLength(4);
    expect(actions).toContain("integration.updated");
    // A test send is audited too, naming the delivery it made.
    const testedRows = audit.body.events.filter((e: any) => e.action === "integration.tested");
    expect(testedRows.map((e: any) => e.data.deliveryId).sort()).toEqual(
      [tested.body.delivery.id, ddTested.body.delivery.id].sort(),
    );
    bodies.push(JSON.stringify(audit.body));

    for (const body of bodies) {
      for (const secret of secrets) expect(body).not.toContain(secret);
      // Not even the part before the last four characters.
      for (const secret of secrets) expect(body).not.toContain(secret.slice(0, -4));
    }
  });

  it("masks config keys beyond the provider's whose names say they are secret, for every reader", async () => {
    const created = await call(app, "POST", `/org/${slug}/integrations`, {
      cookie: owner.cookie,
      body: {
        kind: "datadog",
        config: {
          apiKey: "dd-api-key-1234",
          appKey: "dd-app-key-5678",
          signingSecret: "sig-secret-abcd",
          password: "hunter2hunter2",
          channel: "#alerts",
          // At any depth, in objects and arrays; a secret that is not a string is masked whole.
          login: { token: "nested-secret-abcdef", user: "bot" },
          list: [{ apiKey: "arr-secret-1234567", name: "first" }],
          credentials: { user: "bot", pass: "object-secret-9876" },
        },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.integration.id;
    const expected = {
      apiKey: masked("dd-api-key-1234"),
      appKey: masked("dd-app-key-5678"),
      signingSecret: masked("sig-secret-abcd"),
      password: masked("hunter2hunter2"),
      channel: "#alerts",
      login: { token: masked("nested-secret-abcdef"), user: "bot" },
      list: [{ apiKey: masked("arr-secret-1234567"), name: "first" }],
      credentials: "••••",
    };
    for (const secret of ["nested-secret-abcdef", "arr-secret-1234567", "object-secret-9876"]) {
      expect(JSON.stringify(created.body)).not.toContain(secret);
    }
    expect(created.body.integration.config).toMatchObject(expected);
    const read = await call(app, "GET", `/org/${slug}/integrations/${id}`, as("viewer"));
    expect(read.body.integration.config).toMatchObject(expected);
    // Sent back as read, a masked value keeps what is stored.
    const patched = await call(app, "PATCH", `/org/${slug}/integrations/${id}`, {
      cookie: owner.cookie,
      body: { config: { ...read.body.integration.config, channel: "#ops" } },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const row = await app.server.deps.db
      .selectFrom("integrations")
      .select(["id", "config"])
      .where("id", "=", id)
      .executeTakeFirstOrThrow();
    // Sealed at rest (issue 31 #13); opened, it holds every secret.
    expect(row.config).toMatch(/^enc:v1:/);
    expect(row.config).not.toContain("hunter2hunter2");
    expect(integrationConfig(app.server.deps, row)).toMatchObject({
      appKey: "dd-app-key-5678",
      password: "hunter2hunter2",
      channel: "#ops",
      login: { token: "nested-secret-abcdef", user: "bot" },
      list: [{ apiKey: "arr-secret-1234567", name: "first" }],
      credentials: { user: "bot", pass: "object-secret-9876" },
    });
    expect((await call(app, "DELETE", `/org/${slug}/integrations/${id}`, { cookie: owner.cookie })).status).toBe(204);
  });

  it("masks the usual names of credentials, and leaves names that only look alike", async () => {
    const secretNames = [
      "passphrase",
      "pass",
      "pin",
      "otp",
      "encryptionKey",
      "masterKey",
      "routingKey",
      "licenseKey",
      "accessKey",
      "access_key_id",
      "key",
      "jwt",
      "bearer",
      "auth",
      "cookie",
      "session",
      "sessionId",
      "hmac",
      "signature",
      "sig",
      "dsn",
      "connectionString",
      "databaseUrl",
      "DB_PASSWORD",
      "x-api-key",
      "appkey",
      "APPKEY",
      "privatekey",
      "apiKeys",
      "privateKeys",
      "HMACKey",
      "cookies",
      "pins",
    ];
    const plainNames = ["channel", "keyword", "author", "mapping", "design", "username", "keyboardLayout"];
    const config: Record<string, string> = { webhookUrl: "https://hooks.example.com/services/T0/B0/x" };
    for (const name of [...secretNames, ...plainNames]) config[name] = `value-of-${name}-0000`;
    const created = await call(app, "POST", `/org/${slug}/integrations`, {
      cookie: owner.cookie,
      body: { kind: "slack", config },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const read = await call(app, "GET", `/org/${slug}/integrations/${created.body.integration.id}`, as("viewer"));
    for (const body of [created.body, read.body]) {
      const shown = body.integration.config;
      for (const name of secretNames) expect(shown[name], name).toBe(masked(config[name] as string));
      for (const name of plainNames) expect(shown[name], name).toBe(config[name]);
    }
    const id = created.body.integration.id;
    expect((await call(app, "DELETE", `/org/${slug}/integrations/${id}`, { cookie: owner.cookie })).status).toBe(204);
  });

  it("reads long keys for a secret's name word by word: a run of capitals, humps after it, digits", async () => {
    // A run of capitals with no lower-case letter after it is the worst case for finding humps.
    const secretNames = [`${"q".repeat(95)}OTPId`, `${"9".repeat(96)}Auth`, `${"x_".repeat(48)}pin`];
    const plainNames = ["A".repeat(100), `${"A".repeat(99)}1`, `${"Q".repeat(95)}OTPId`];
    const config: Record<string, string> = { webhookUrl: "https://hooks.example.com/services/T0/B0/x" };
    for (const name of [...secretNames, ...plainNames]) config[name] = `value-of-a-long-name-${name.length}`;
    const created = await call(app, "POST", `/org/${slug}/integrations`, {
      cookie: owner.cookie,
      body: { kind: "slack", config },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.integration.id;
    const listed = await call(app, "GET", `/org/${slug}/integrations`, as("viewer"));
    expectStatus(listed, 200);
    const shownInList = listed.body.integrations.find((integration: { id: string }) => integration.id === id).config;
    for (const shown of [created.body.integration.config, shownInList]) {
      for (const name of secretNames) expect(shown[name], name).toBe(masked(config[name] as string));
      for (const name of plainNames) expect(shown[name], name).toBe(config[name]);
    }
    expect((await call(app, "DELETE", `/org/${slug}/integrations/${id}`, { cookie: owner.cookie })).status).toBe(204);
  });

  it("keeps a masked secret only while its destination stays: a new apiUrl or site needs the secrets again", async () => {
    const created = await call(app, "POST", `/org/${slug}/integrations`, {
      cookie: owner.cookie,
      body: {
        kind: "github",
        config: { repo: "acme/app", token: "ghp-kept-secret-0001", apiUrl: "https://github.example.com/api" },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.integration.id;
    const read = created.body.integration.config;
    const patch = (config: Record<string, unknown>) =>
      call(app, "PATCH", `/org/${slug}/integrations/${id}`, { cookie: owner.cookie, body: { config } });

    // Another address with the token kept masked: refused, naming the token, and nothing changes.
    const moved = await patch({ ...read, apiUrl: "https://elsewhere.example.com/api" });
    expect(moved.status).toBe(422);
    expect(moved.body.error.details).toEqual([
      { path: "config.token", message: expect.stringContaining("config.apiUrl") },
    ]);
    const stored = async () =>
      integrationConfig(
        app.server.deps,
        await app.server.deps.db
          .selectFrom("integrations")
          .select(["id", "config"])
          .where("id", "=", id)
          .executeTakeFirstOrThrow(),
      );
    expect(await stored()).toMatchObject({ token: "ghp-kept-secret-0001", apiUrl: "https://github.example.com/api" });
    // Dropping apiUrl (back to the provider's own) is a new address too.
    const { apiUrl: _apiUrl, ...withoutUrl } = read;
    expect((await patch(withoutUrl)).status).toBe(422);

    // The same address keeps the masked token; a new address with the token sent again is fine.
    expect((await patch({ ...read, repo: "acme/other" })).status).toBe(200);
    expect(await stored()).toMatchObject({ repo: "acme/other", token: "ghp-kept-secret-0001" });
    const resent = await patch({ ...read, token: "ghp-new-secret-0002", apiUrl: "https://elsewhere.example.com/api" });
    expect(resent.status, JSON.stringify(resent.body)).toBe(200);
    expect(await stored()).toMatchObject({ token: "ghp-new-secret-0002", apiUrl: "https://elsewhere.example.com/api" });

    // A Datadog site decides where its key goes, like apiUrl.
    const datadog = await call(app, "POST", `/org/${slug}/integrations`, {
      cookie: owner.cookie,
      body: { kind: "datadog", config: { apiKey: "dd-kept-key-0003", site: "datadoghq.eu" } },
    });
    expect(datadog.status, JSON.stringify(datadog.body)).toBe(201);
    const ddSite = await call(app, "PATCH", `/org/${slug}/integrations/${datadog.body.integration.id}`, {
      cookie: owner.cookie,
      body: { config: { ...datadog.body.integration.config, site: "us5.datadoghq.com" } },
    });
    expect(ddSite.status).toBe(422);
    expect(ddSite.body.error.details[0].path).toBe("config.apiKey");
    for (const created of [id, datadog.body.integration.id]) {
      expect((await call(app, "DELETE", `/org/${slug}/integrations/${created}`, { cookie: owner.cookie })).status).toBe(
        204,
      );
    }
  });

  it("20 deletes of one integration at once: one 204, the rest 404, one audit row; a PATCH after it is 404", async () => {
    const created = await call(app, "POST", `/org/${slug}/integrations`, {
      cookie: owner.cookie,
      body: { kind: "slack", config: { webhookUrl: `${receiver.url}/race` } },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.integration.id;
    const deletes = await Promise.all(
      Array.from({ length: 20 }, () =>
        call(app, "DELETE", `/org/${slug}/integrations/${id}`, { cookie: owner.cookie }),
      ),
    );
    expect(deletes.map((res) => res.status).sort()).toEqual([204, ...Array(19).fill(404)]);
    const patched = await call(app, "PATCH", `/org/${slug}/integrations/${id}`, {
      cookie: owner.cookie,
      body: { events: ["project.*"] },
    });
    expect(patched.status).toBe(404);
    const rows = await app.server.deps.db
      .selectFrom("audit_events")
      .select("action")
      .where("target_id", "=", id)
      .execute();
    expect(rows.map((row) => row.action).sort()).toEqual(["integration.created", "integration.deleted"]);
  });

  it("answers 404 for an unknown integration id", async () => {
    const missing = "int_does_not_exist";
    for (const [method, suffix] of [
      ["GET", ""],
      ["PATCH", ""],
      ["DELETE", ""],
      ["POST", "/test"],
    ] as const) {
      const res = await call(app, method, `/org/${slug}/integrations/${missing}${suffix}`, {
        cookie: owner.cookie,
        ...(method === "PATCH" ? { body: { events: ["*"] } } : {}),
      });
      expectError(res, 404, "NOT_FOUND");
    }
  });

  // ---- validation ----

  it("validates config per kind (422 naming config.<field>), the kind and the events; a PATCH's config must be whole", async () => {
    const org = await freshOrg();
    const cases: [unknown, string][] = [
      [{ kind: "slack", config: { webhookUrl: "ftp://example.com/hook" } }, "config.webhookUrl"],
      [{ kind: "discord", config: { webhookUrl: "ftp://example.com/hook" } }, "config.webhookUrl"],
      [{ kind: "discord", config: { webhookUrl: "not a url" } }, "config.webhookUrl"],
      [{ kind: "discord", config: { webhookUrl: 42 } }, "config.webhookUrl"],
      [{ kind: "github", config: { repo: "bad", token: "ghp_x1234" } }, "config.repo"],
      [{ kind: "github", config: { repo: "acme/app", token: "" } }, "config.token"],
      [{ kind: "github", config: { repo: "acme/app", token: "t0k3n", apiUrl: "ftp://x.test" } }, "config.apiUrl"],
      [{ kind: "datadog", config: { apiKey: "" } }, "config.apiKey"],
      [{ kind: "datadog", config: { apiKey: "k1234", site: "Not A Site!" } }, "config.site"],
      [{ kind: "datadog", config: { apiKey: "k1234", site: "localhost" } }, "config.site"],
      [{ kind: "datadog", config: { apiKey: "k1234", site: "datadoghq.eu.127.0.0.1" } }, "config.site"],
      [{ kind: "datadog", config: { apiKey: "k1234", apiUrl: "gopher://x.test" } }, "config.apiUrl"],
      [{ kind: "pagerduty", config: { webhookUrl: `${receiver.url}/x` } }, "kind"],
      [{ config: { webhookUrl: `${receiver.url}/x` } }, "kind"],
      [{ kind: "slack", config: { webhookUrl: `${receiver.url}/x` }, events: "project.*" }, "events"],
      [{ kind: "slack", config: { webhookUrl: `${receiver.url}/x` }, events: [""] }, "events.0"],
      [{ kind: "slack", config: "https://hooks.slack.test/x" }, "config"],
    ];
    for (const [body, field] of cases) {
      const res = await create(org.slug, body);
      expectValidation(res, field);
    }
    // Nothing was created by any of them.
    const listed = await call(app, "GET", `/org/${org.slug}/integrations`, { cookie: owner.cookie });
    expectStatus(listed, 200);
    expect(listed.body.integrations).toEqual([]);

    // PATCH validates the new config against the integration's kind, and leaves it unchanged on failure.
    const github = await createOk(org.slug, {
      kind: "github",
      config: { repo: "acme/app", token: "ghp_original9999", apiUrl: `${receiver.url}${tag("gh")}` },
    });
    const badRepo = await call(app, "PATCH", `/org/${org.slug}/integrations/${github.id}`, {
      cookie: owner.cookie,
      body: { config: { repo: "bad", token: "ghp_new00000" } },
    });
    expectValidation(badRepo, "config.repo");
    const noToken = await call(app, "PATCH", `/org/${org.slug}/integrations/${github.id}`, {
      cookie: owner.cookie,
      body: { config: { repo: "acme/other" } },
    });
    expectValidation(noToken, "config.token");
    const badEvents = await call(app, "PATCH", `/org/${org.slug}/integrations/${github.id}`, {
      cookie: owner.cookie,
      body: { events: [""] },
    });
    expectValidation(badEvents, "events.0");
    // The kind cannot change; sent back as read, it is no change.
    const otherKind = await call(app, "PATCH", `/org/${org.slug}/integrations/${github.id}`, {
      cookie: owner.cookie,
      body: { kind: "discord", config: { webhookUrl: `${receiver.url}/x` } },
    });
    expectValidation(otherKind, "kind");
    const after = await call(app, "GET", `/org/${org.slug}/integrations/${github.id}`, { cookie: owner.cookie });
    expectStatus(after, 200);
    expect(after.body.integration).toEqual(github);
    const sameKind = await call(app, "PATCH", `/org/${org.slug}/integrations/${github.id}`, {
      cookie: owner.cookie,
      body: { kind: "github" },
    });
    expectStatus(sameKind, 200);
    expect(sameKind.body.integration).toEqual(github);
  });

  it("bounds config keys at any depth: each at most 100 characters (422 naming it), at most 50 in all (422 naming config)", async () => {
    const org = await freshOrg();
    const webhookUrl = `${receiver.url}${tag("keys")}/hook`;
    const long = "k".repeat(101);
    /** `count` keys in all: webhookUrl, `nested` holding ten, and the rest at the top. */
    const configWithKeys = (count: number) => {
      const config: Record<string, unknown> = { webhookUrl };
      config.nested = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`inner${i}`, i]));
      for (let i = 0; i < count - 12; i++) config[`top${i}`] = i;
      return config;
    };
    const cases: [Record<string, unknown>, string][] = [
      [{ webhookUrl, [long]: "x" }, `config.${long}`],
      [{ webhookUrl, login: { [long]: "x" } }, `config.login.${long}`],
      [{ webhookUrl, list: [{ name: "first" }, { [long]: "x" }] }, `config.list.1.${long}`],
      [configWithKeys(51), "config"],
      // Keys inside arrays count too.
      [{ ...configWithKeys(48), list: [{ a: 1, b: 2 }] }, "config"],
    ];
    for (const [config, field] of cases) expectValidation(await create(org.slug, { kind: "slack", config }), field);
    const listed = await call(app, "GET", `/org/${org.slug}/integrations`, { cookie: owner.cookie });
    expect(listed.body.integrations).toEqual([]);

    // At the bounds: a key of 100 characters, and 50 keys in all.
    const atBounds = { ...configWithKeys(49), ["k".repeat(100)]: "x" };
    const created = await createOk(org.slug, { kind: "slack", config: atBounds });
    expect(created.config["k".repeat(100)]).toBe("x");
    expect(Object.keys(created.config.nested)).toHaveLength(10);

    // A PATCH is bounded the same way, and leaves the integration as it was.
    for (const [config, field] of cases) {
      const res = await call(app, "PATCH", `/org/${org.slug}/integrations/${created.id}`, {
        cookie: owner.cookie,
        body: { config },
      });
      expectValidation(res, field);
    }
    const read = await call(app, "GET", `/org/${org.slug}/integrations/${created.id}`, { cookie: owner.cookie });
    expect(read.body.integration).toEqual(created);
    const patched = await call(app, "PATCH", `/org/${org.slug}/integrations/${created.id}`, {
      cookie: owner.cookie,
      body: { config: atBounds },
    });
    expectStatus(patched, 200);
  });

  it("refuses private config URLs when private webhook targets are not allowed", async () => {
    const strict = await startApp({ AUTH_RATE_LIMIT_PER_MINUTE: "10000" });
    try {
      const user = await signUp(strict);
      const org = await createOrg(strict, user, "Strict Org");
      const cases: [unknown, string][] = [
        [{ kind: "slack", config: { webhookUrl: "http://127.0.0.1:9/hook" } }, "config.webhookUrl"],
        [{ kind: "discord", config: { webhookUrl: "http://[::1]/hook" } }, "config.webhookUrl"],
        [{ kind: "datadog", config: { apiKey: "k1234", apiUrl: "http://10.1.2.3" } }, "config.apiUrl"],
        [
          { kind: "github", config: { repo: "a/b", token: "t1234", apiUrl: "http://169.254.169.254" } },
          "config.apiUrl",
        ],
      ];
      for (const [body, field] of cases) {
        const res = await call(strict, "POST", `/org/${org.slug}/integrations`, { cookie: user.cookie, body });
        expectValidation(res, field);
      }
      const listed = await call(strict, "GET", `/org/${org.slug}/integrations`, { cookie: user.cookie });
      expect(listed.body.integrations).toEqual([]);
    } finally {
      await strict.close();
    }
  });

  // ---- provider payloads ----

  it("the test send delivers a provider-shaped request to each provider, with its credentials", async () => {
    const org = await freshOrg();
    const slackPrefix = tag("slack");
    const discordPrefix = tag("discord");
    const ddPrefix = tag("dd");
    const ghPrefix = tag("gh");
    const ddKey = "dd-key-test-send-0001";
    const ghToken = "ghp_testSendToken0002";
    const slack = await createOk(org.slug, {
      kind: "slack",
      config: { webhookUrl: `${receiver.url}${slackPrefix}/services/T1/B1/sEcReT01` },
    });
    const discord = await createOk(org.slug, {
      kind: "discord",
      config: { webhookUrl: `${receiver.url}${discordPrefix}/api/webhooks/1/tOkEn02` },
    });
    const datadog = await createOk(org.slug, {
      kind: "datadog",
      config: { apiKey: ddKey, site: "datadoghq.eu", apiUrl: `${receiver.url}${ddPrefix}` },
    });
    const github = await createOk(org.slug, {
      kind: "github",
      config: { repo: "acme/app", token: ghToken, apiUrl: `${receiver.url}${ghPrefix}///` },
    });

    const sent: Record<string, any> = {};
    for (const integration of [slack, discord, datadog, github]) {
      const res = await call(app, "POST", `/org/${org.slug}/integrations/${integration.id}/test`, {
        cookie: owner.cookie,
      });
      expectStatus(res, 200);
      expect(res.body.delivery).toMatchObject({
        event: "webhook.test",
        status: "succeeded",
        attemptCount: 1,
        lastStatusCode: 200,
        lastError: null,
      });
      expect(res.body.delivery.attempts).toHaveLength(1);
      expect(res.body.delivery.attempts[0]).toMatchObject({ attempt: 1, statusCode: 200, error: null });
      sent[integration.kind] = res.body.delivery;
    }
    // The attempt was synchronous: every request is already here.
    const slackReq = requestsUnder(slackPrefix);
    const discordReq = requestsUnder(discordPrefix);
    const ddReq = requestsUnder(ddPrefix);
    const ghReq = requestsUnder(ghPrefix);
    for (const list of [slackReq, discordReq, ddReq, ghReq]) expect(list).toHaveLength(1);

    const s = slackReq[0] as ReceivedRequest;
    expect(s.method).toBe("POST");
    expect(s.path).toBe(`${slackPrefix}/services/T1/B1/sEcReT01`);
    expect(s.headers["content-type"]).toMatch(/^application\/json/);
    expect(s.headers.authorization).toBeUndefined();
    expect(s.headers["dd-api-key"]).toBeUndefined();
    expect(json(s).text).toEqual(expect.any(String));
    expect(json(s).text).toContain("webhook.test");
    expect(json(s).text).toContain(org.name);
    expect(slackKind(s)).toBe("webhook.test");

    const d = discordReq[0] as ReceivedRequest;
    expect(d.method).toBe("POST");
    expect(d.path).toBe(`${discordPrefix}/api/webhooks/1/tOkEn02`);
    expect(d.headers["content-type"]).toMatch(/^application\/json/);
    expect(d.headers.authorization).toBeUndefined();
    expect(json(d).content).toEqual(expect.any(String));
    expect(json(d).content).toContain("webhook.test");
    expect(json(d).content).toContain(org.name);

    const dd = ddReq[0] as ReceivedRequest;
    expect(dd.method).toBe("POST");
    expect(dd.path).toBe(`${ddPrefix}/api/v1/events`);
    expect(dd.headers["content-type"]).toMatch(/^application\/json/);
    expect(dd.headers["dd-api-key"]).toBe(ddKey);
    expect(dd.headers.authorization).toBeUndefined();
    const ddBody = json(dd);
    expect(ddBody.title).toEqual(expect.any(String));
    expect(ddBody.title).toContain("webhook.test");
    expect(ddBody.text).toEqual(expect.any(String));
    expect(ddBody.tags).toContain("event:webhook.test");

    const gh = ghReq[0] as ReceivedRequest;
    expect(gh.method).toBe("POST");
    expect(gh.path).toBe(`${ghPrefix}/repos/acme/app/dispatches`);
    expect(gh.headers["content-type"]).toMatch(/^application\/json/);
    expect(gh.headers.authorization).toBe(`Bearer ${ghToken}`);
    expect(gh.headers["dd-api-key"]).toBeUndefined();
    const ghBody = json(gh);
    expect(ghBody.event_type).toBe("webhook.test");
    expect(ghBody.client_payload).toMatchObject({ event: "webhook.test" });
    expect(ghBody.client_payload.payload).toEqual(expect.any(Object));
    expect(ghBody.client_payload.payload.integrationId).toBe(github.id);

    // Credentials travel in headers only: never in a stored body the API shows.
    for (const delivery of Object.values(sent)) {
      expect(JSON.stringify(delivery)).not.toContain(ddKey);
      expect(JSON.stringify(delivery)).not.toContain(ghToken);
    }
    // Nor in an attempt: its URL, which for slack and discord is the credential, is not kept.
    const attempts = await app.server.deps.db
      .selectFrom("webhook_attempts")
      .select(["url", "request_headers"])
      .where(
        "delivery_id",
        "in",
        Object.values(sent).map((delivery) => delivery.id),
      )
      .execute();
    expect(attempts).toHaveLength(4);
    for (const attempt of attempts) expect(attempt.url).toBeNull();
    expect(JSON.stringify(attempts)).not.toMatch(/sEcReT01|tOkEn02/);
  });

  it("the test send reports a receiver's failure after one attempt", async () => {
    const org = await freshOrg();
    const prefix = tag("failing");
    receiver.statusByPrefix.set(prefix, 500);
    const slack = await createOk(org.slug, { kind: "slack", config: { webhookUrl: `${receiver.url}${prefix}/hook` } });
    const res = await call(app, "POST", `/org/${org.slug}/integrations/${slack.id}/test`, { cookie: owner.cookie });
    expectStatus(res, 200);
    expect(res.body.delivery.event).toBe("webhook.test");
    expect(["failed", "dead"]).toContain(res.body.delivery.status);
    expect(res.body.delivery).toMatchObject({ attemptCount: 1, lastStatusCode: 500 });
    expect(res.body.delivery.attempts).toHaveLength(1);
    expect(res.body.delivery.attempts[0]).toMatchObject({ attempt: 1, statusCode: 500 });
    expect(requestsUnder(prefix)).toHaveLength(1);
    // A test send is not retried in the background.
    await sleep(SETTLE_MS);
    expect(requestsUnder(prefix)).toHaveLength(1);
  });

  it("creates an integration without config, or with part of one (SPEC: optional, arbitrary values); its sends fail naming what it needs, until a PATCH gives it", async () => {
    const org = await freshOrg();
    const prefix = tag("later");
    const bare = await createOk(org.slug, { kind: "slack" });
    expect(bare).toMatchObject({ config: {}, configured: false });
    const github = await createOk(org.slug, { kind: "github", events: ["project.*"] });
    expect(github).toMatchObject({ config: {}, configured: false });
    // Keys of its own, and some of the provider's fields (each checked as it would be whole).
    const partial = await createOk(org.slug, { kind: "slack", config: { channel: "#ops", team: { id: 7 } } });
    expect(partial.config).toEqual({ channel: "#ops", team: { id: 7 } });
    expect(partial.configured).toBe(false);
    expect((await createOk(org.slug, { kind: "discord", config: {} })).config).toEqual({});
    const repoOnly = await createOk(org.slug, { kind: "github", config: { repo: "acme/app" } });
    expect(repoOnly.config).toEqual({ repo: "acme/app" });
    const keyOnly = await createOk(org.slug, { kind: "datadog", config: { apiKey: "dd-partial-key-1234" } });
    expect(keyOnly.config).toEqual({ apiKey: "••••1234", site: "datadoghq.com" });
    const sent = await call(app, "POST", `/org/${org.slug}/integrations/${repoOnly.id}/test`, { cookie: owner.cookie });
    expect(sent.body.delivery.attempts[0].error).toBe("integration is not configured: config.token needed");
    const slackPartial = await call(app, "POST", `/org/${org.slug}/integrations/${partial.id}/test`, {
      cookie: owner.cookie,
    });
    expect(slackPartial.body.delivery.attempts[0].error).toBe(
      "integration is not configured: config.webhookUrl needed",
    );

    const res = await call(app, "POST", `/org/${org.slug}/integrations/${bare.id}/test`, { cookie: owner.cookie });
    expectStatus(res, 200);
    expect(res.body.delivery).toMatchObject({ event: "webhook.test", status: "dead", attemptCount: 1 });
    expect(res.body.delivery.attempts[0]).toMatchObject({
      statusCode: null,
      error: "integration is not configured: config.webhookUrl needed",
    });
    const gh = await call(app, "POST", `/org/${org.slug}/integrations/${github.id}/test`, { cookie: owner.cookie });
    expect(gh.body.delivery.attempts[0].error).toBe("integration is not configured: config.repo, config.token needed");

    const configured = await call(app, "PATCH", `/org/${org.slug}/integrations/${bare.id}`, {
      cookie: owner.cookie,
      body: { config: { webhookUrl: `${receiver.url}${prefix}/hook` } },
    });
    expectStatus(configured, 200);
    expect(configured.body.integration.configured).toBe(true);
    const again = await call(app, "POST", `/org/${org.slug}/integrations/${bare.id}/test`, { cookie: owner.cookie });
    expect(again.body.delivery).toMatchObject({ status: "succeeded", attemptCount: 1 });
    expect(requestsUnder(prefix)).toHaveLength(1);
  });

  it("real events reach each provider in its own shape", async () => {
    const org = await freshOrg();
    const slackPrefix = tag("slack");
    const discordPrefix = tag("discord");
    const ddPrefix = tag("dd");
    const ghPrefix = tag("gh");
    const ddKey = "dd-key-real-events-0003";
    const ghToken = "ghp_realEventsToken0004";
    await createOk(org.slug, { kind: "slack", config: { webhookUrl: `${receiver.url}${slackPrefix}/hook` } });
    await createOk(org.slug, { kind: "discord", config: { webhookUrl: `${receiver.url}${discordPrefix}/hook` } });
    await createOk(org.slug, {
      kind: "datadog",
      config: { apiKey: ddKey, site: "datadoghq.com", apiUrl: `${receiver.url}${ddPrefix}` },
    });
    await createOk(org.slug, {
      kind: "github",
      config: { repo: "acme/app", token: ghToken, apiUrl: `${receiver.url}${ghPrefix}` },
    });

    const projectSlug = await createAndPauseProject(org.slug, "Event Shapes");

    const s = await receiver.waitFor(
      "slack project.paused",
      (r) => r.path === `${slackPrefix}/hook` && slackKind(r) === "project.paused",
    );
    expect(s.method).toBe("POST");
    expect(s.headers["content-type"]).toMatch(/^application\/json/);
    expect(json(s).text).toContain(org.name);
    expect(json(s).text).toContain(projectSlug);

    const d = await receiver.waitFor(
      "discord project.paused",
      (r) => r.path === `${discordPrefix}/hook` && String(json(r).content).includes("project.paused"),
    );
    expect(d.method).toBe("POST");
    expect(json(d).content).toContain(projectSlug);

    const dd = await receiver.waitFor(
      "datadog project.paused",
      (r) => r.path === `${ddPrefix}/api/v1/events` && (json(r).tags ?? []).includes("event:project.paused"),
    );
    expect(dd.method).toBe("POST");
    expect(dd.headers["dd-api-key"]).toBe(ddKey);
    expect(json(dd).title).toEqual(expect.any(String));
    expect(json(dd).title).toContain("project.paused");
    expect(json(dd).text).toContain(projectSlug);

    const gh = await receiver.waitFor(
      "github project.paused",
      (r) => r.path === `${ghPrefix}/repos/acme/app/dispatches` && json(r).event_type === "project.paused",
    );
    expect(gh.method).toBe("POST");
    expect(gh.headers.authorization).toBe(`Bearer ${ghToken}`);
    expect(json(gh).client_payload).toMatchObject({
      event: "project.paused",
      payload: { projectSlug },
    });

    // The provisioning that came first was delivered too (events null = all).
    expect(
      requestsUnder(ghPrefix).some((r) => json(r).event_type === "project.provisioned"),
      "github got project.provisioned",
    ).toBe(true);
  });

  // ---- events filtering ----

  it("delivers only the events an integration's patterns match; null, empty and * mean all", async () => {
    const org = await freshOrg();
    const prefixes = {
      project: tag("project-only"),
      invited: tag("invited-only"),
      nullEvents: tag("null-events"),
      emptyEvents: tag("empty-events"),
      star: tag("star"),
    };
    const created = {
      project: await createOk(org.slug, slackBody(prefixes.project, ["project.*"])),
      invited: await createOk(org.slug, slackBody(prefixes.invited, ["member.invited"])),
      nullEvents: await createOk(org.slug, slackBody(prefixes.nullEvents, null)),
      emptyEvents: await createOk(org.slug, slackBody(prefixes.emptyEvents, [])),
      star: await createOk(org.slug, slackBody(prefixes.star, ["*"])),
    };
    expect(created.project.events).toEqual(["project.*"]);
    expect(created.invited.events).toEqual(["member.invited"]);
    expect(created.nullEvents.events).toBeNull();
    // Empty means all events, whether it reads back as null or [].
    expect(created.emptyEvents.events === null || created.emptyEvents.events.length === 0).toBe(true);

    await invite(org.slug);
    await createAndPauseProject(org.slug, "Filter Project");

    const kindsAt = (prefix: string) => requestsUnder(prefix).map(slackKind);
    for (const prefix of [prefixes.project, prefixes.nullEvents, prefixes.emptyEvents, prefixes.star]) {
      await receiver.waitFor(
        `project.paused at ${prefix}`,
        (r) => r.path.startsWith(`${prefix}/`) && slackKind(r) === "project.paused",
      );
    }
    for (const prefix of [prefixes.invited, prefixes.nullEvents, prefixes.emptyEvents, prefixes.star]) {
      await receiver.waitFor(
        `member.invited at ${prefix}`,
        (r) => r.path.startsWith(`${prefix}/`) && slackKind(r) === "member.invited",
      );
    }
    await sleep(SETTLE_MS);

    expect(kindsAt(prefixes.project).sort()).toEqual(["project.paused", "project.provisioned"]);
    expect(kindsAt(prefixes.invited)).toEqual(["member.invited"]);
    for (const prefix of [prefixes.nullEvents, prefixes.emptyEvents, prefixes.star]) {
      expect(kindsAt(prefix).sort()).toEqual(["member.invited", "project.paused", "project.provisioned"]);
    }
  });

  // ---- update and delete ----

  it("PATCH replaces config and events, and later events follow the new settings", async () => {
    const org = await freshOrg();
    const first = tag("patch-first");
    const second = tag("patch-second");
    const integration = await createOk(org.slug, {
      kind: "slack",
      config: { webhookUrl: `${receiver.url}${first}/hook/oldSecretAAAA` },
      events: ["project.*"],
    });

    const eventsOnly = await call(app, "PATCH", `/org/${org.slug}/integrations/${integration.id}`, {
      cookie: owner.cookie,
      body: { events: ["member.invited"] },
    });
    expectStatus(eventsOnly, 200);
    expect(eventsOnly.body.integration).toMatchObject({
      id: integration.id,
      kind: "slack",
      events: ["member.invited"],
      config: { webhookUrl: "••••AAAA" },
    });

    const newUrl = `${receiver.url}${second}/hook/newSecretBBBB`;
    const configOnly = await call(app, "PATCH", `/org/${org.slug}/integrations/${integration.id}`, {
      cookie: owner.cookie,
      body: { config: { webhookUrl: newUrl } },
    });
    expectStatus(configOnly, 200);
    expect(configOnly.body.integration).toMatchObject({
      events: ["member.invited"],
      config: { webhookUrl: "••••BBBB" },
    });
    expect(JSON.stringify(configOnly.body)).not.toContain(newUrl);
    const got = await call(app, "GET", `/org/${org.slug}/integrations/${integration.id}`, { cookie: owner.cookie });
    expect(got.body.integration).toEqual(configOnly.body.integration);

    await invite(org.slug);
    await receiver.waitFor("member.invited at the new URL", (r) => r.path === `${second}/hook/newSecretBBBB`);
    await sleep(SETTLE_MS);
    expect(requestsUnder(first)).toEqual([]);
    expect(requestsUnder(second).map(slackKind)).toEqual(["member.invited"]);

    // events: null goes back to every event.
    const all = await call(app, "PATCH", `/org/${org.slug}/integrations/${integration.id}`, {
      cookie: owner.cookie,
      body: { events: null },
    });
    expectStatus(all, 200);
    expect(all.body.integration.events).toBeNull();
    await createAndPauseProject(org.slug, "Patched Project");
    await receiver.waitFor(
      "project.paused after events: null",
      (r) => r.path.startsWith(`${second}/`) && slackKind(r) === "project.paused",
    );

    // A new Datadog key is what the next request carries.
    const ddPrefix = tag("dd-patch");
    const datadog = await createOk(org.slug, {
      kind: "datadog",
      config: { apiKey: "dd-old-key-1111", apiUrl: `${receiver.url}${ddPrefix}` },
      events: ["billing.plan_change"],
    });
    const rekeyed = await call(app, "PATCH", `/org/${org.slug}/integrations/${datadog.id}`, {
      cookie: owner.cookie,
      body: { config: { apiKey: "dd-new-key-2222", apiUrl: `${receiver.url}${ddPrefix}` } },
    });
    expectStatus(rekeyed, 200);
    expect(rekeyed.body.integration.config.apiKey).toBe("••••2222");
    const tested = await call(app, "POST", `/org/${org.slug}/integrations/${datadog.id}/test`, {
      cookie: owner.cookie,
    });
    expectStatus(tested, 200);
    const ddRequests = requestsUnder(ddPrefix);
    expect(ddRequests).toHaveLength(1);
    expect(ddRequests[0]?.headers["dd-api-key"]).toBe("dd-new-key-2222");
  });

  it("DELETE answers 204, then the integration is gone (404) and receives nothing more", async () => {
    const org = await freshOrg();
    const doomed = tag("doomed");
    const control = tag("control");
    const victim = await createOk(org.slug, slackBody(doomed));
    await createOk(org.slug, slackBody(control));

    const removed = await call(app, "DELETE", `/org/${org.slug}/integrations/${victim.id}`, { cookie: owner.cookie });
    expectStatus(removed, 204);
    expect(removed.body).toBe("");

    expectError(
      await call(app, "GET", `/org/${org.slug}/integrations/${victim.id}`, { cookie: owner.cookie }),
      404,
      "NOT_FOUND",
    );
    expectError(
      await call(app, "DELETE", `/org/${org.slug}/integrations/${victim.id}`, { cookie: owner.cookie }),
      404,
      "NOT_FOUND",
    );
    expectError(
      await call(app, "PATCH", `/org/${org.slug}/integrations/${victim.id}`, {
        cookie: owner.cookie,
        body: { events: ["*"] },
      }),
      404,
      "NOT_FOUND",
    );
    expectError(
      await call(app, "POST", `/org/${org.slug}/integrations/${victim.id}/test`, { cookie: owner.cookie }),
      404,
      "NOT_FOUND",
    );
    const listed = await call(app, "GET", `/org/${org.slug}/integrations`, { cookie: owner.cookie });
    expect(listed.body.integrations.map((i: any) => i.id)).not.toContain(victim.id);
    expect(listed.body.integrations).toHaveLength(1);

    await invite(org.slug);
    await createAndPauseProject(org.slug, "After Delete");
    await receiver.waitFor(
      "project.paused at the control",
      (r) => r.path.startsWith(`${control}/`) && slackKind(r) === "project.paused",
    );
    await receiver.waitFor(
      "member.invited at the control",
      (r) => r.path.startsWith(`${control}/`) && slackKind(r) === "member.invited",
    );
    await sleep(SETTLE_MS);
    expect(requestsUnder(doomed)).toEqual([]);

    const audit = await call(app, "GET", `/org/${org.slug}/audit?limit=500`, { cookie: owner.cookie });
    expect(audit.body.events.some((e: any) => e.action === "integration.deleted" && e.target.id === victim.id)).toBe(
      true,
    );
  });

  /** Holds requests under `prefix` until the returned function is called. */
  function hold(prefix: string): () => void {
    let release = () => {};
    receiver.holdByPrefix.set(
      prefix,
      new Promise<void>((resolve) => {
        release = resolve;
      }),
    );
    return () => release();
  }

  it("a failing provider is retried by the delivery engine up to WEBHOOK_MAX_ATTEMPTS, then left alone", async () => {
    const org = await freshOrg();
    const prefix = tag("retried");
    receiver.statusByPrefix.set(prefix, 503);
    await createOk(org.slug, slackBody(prefix, ["member.invited"]));
    await invite(org.slug);
    const deadline = Date.now() + 5_000;
    while (requestsUnder(prefix).length < 3 && Date.now() < deadline) await sleep(20);
    await sleep(SETTLE_MS);
    const attempts = requestsUnder(prefix);
    // WEBHOOK_MAX_ATTEMPTS=3: the first attempt and two retries, the same message each time.
    expect(attempts).toHaveLength(3);
    expect(new Set(attempts.map((r) => r.body)).size).toBe(1);
    expect(slackKind(attempts[0] as ReceivedRequest)).toBe("member.invited");
  });

  it("a retry queued before DELETE is not sent after it", async () => {
    const org = await freshOrg();
    const prefix = tag("deleted-mid-retry");
    receiver.statusByPrefix.set(prefix, 500);
    const release = hold(prefix);
    const integration = await createOk(org.slug, slackBody(prefix, ["member.invited"]));
    await invite(org.slug);
    // The first attempt is in flight (held by the receiver); the integration goes away meanwhile.
    await receiver.waitFor("the first attempt", (r) => r.path.startsWith(`${prefix}/`));
    const removed = await call(app, "DELETE", `/org/${org.slug}/integrations/${integration.id}`, {
      cookie: owner.cookie,
    });
    expectStatus(removed, 204);
    release();
    // WEBHOOK_MAX_ATTEMPTS=3 with a 20 ms base would have retried twice within this time.
    await sleep(SETTLE_MS * 2);
    expect(requestsUnder(prefix)).toHaveLength(1);
  });

  it("a retry after a PATCH never sends the new credentials to the old address", async () => {
    const org = await freshOrg();
    const oldPrefix = tag("dd-old-address");
    const newPrefix = tag("dd-new-address");
    const oldKey = "dd-old-key-AAAA";
    const newKey = "dd-new-key-BBBB";
    receiver.statusByPrefix.set(oldPrefix, 500);
    const release = hold(oldPrefix);
    const datadog = await createOk(org.slug, {
      kind: "datadog",
      config: { apiKey: oldKey, apiUrl: `${receiver.url}${oldPrefix}` },
      events: ["member.invited"],
    });
    await invite(org.slug);
    await receiver.waitFor("the first attempt at the old address", (r) => r.path.startsWith(`${oldPrefix}/`));
    const patched = await call(app, "PATCH", `/org/${org.slug}/integrations/${datadog.id}`, {
      cookie: owner.cookie,
      body: { config: { apiKey: newKey, apiUrl: `${receiver.url}${newPrefix}` } },
    });
    expectStatus(patched, 200);
    release();
    // The first attempt fails (500); WEBHOOK_MAX_ATTEMPTS=3 leaves two retries, 20 and 40 ms later.
    const deadline = Date.now() + 5_000;
    while (requestsUnder(oldPrefix).length + requestsUnder(newPrefix).length < 3 && Date.now() < deadline) {
      await sleep(20);
    }
    await sleep(SETTLE_MS);
    const all = [...requestsUnder(oldPrefix), ...requestsUnder(newPrefix)];
    expect(all.length).toBeGreaterThanOrEqual(2);
    // Each request pairs an address with the key configured for that address: old with old, new with new.
    expect(
      requestsUnder(oldPrefix).map((r) => r.headers["dd-api-key"]),
      "requests to the old address",
    ).toEqual(requestsUnder(oldPrefix).map(() => oldKey));
    expect(
      requestsUnder(newPrefix).map((r) => r.headers["dd-api-key"]),
      "requests to the new address",
    ).toEqual(requestsUnder(newPrefix).map(() => newKey));
  });

  // ---- permissions and isolation ----

  it("role and key-scope matrix: admins, owners and full keys manage; everyone in the org reads; no credentials 401", async () => {
    const prefix = tag("matrix");
    const fixture = await createOk(slug, slackBody(prefix));
    for (const who of EVERYONE) {
      const creds = as(who);
      const expectedRead = who === "none" ? 401 : 200;
      const list = await call(app, "GET", `/org/${slug}/integrations`, creds);
      expectStatus(list, expectedRead);
      if (expectedRead === 200) expect(list.body.integrations.map((i: any) => i.id)).toContain(fixture.id);
      const one = await call(app, "GET", `/org/${slug}/integrations/${fixture.id}`, creds);
      expectStatus(one, expectedRead);
      if (expectedRead === 200) expect(one.body.integration).toEqual(fixture);

      const created = await create(slug, slackBody(`${prefix}-${who}`), creds);
      if (who === "none") {
        expectError(created, 401, "UNAUTHORIZED");
      } else if (!MANAGERS.has(who)) {
        expectError(created, 403, "FORBIDDEN");
      } else {
        expectStatus(created, 201);
      }
      // Writes on the fixture, or (for those allowed) on the integration just made.
      const target = MANAGERS.has(who) ? created.body.integration.id : fixture.id;
      const writes = [
        await call(app, "PATCH", `/org/${slug}/integrations/${target}`, {
          ...creds,
          body: { events: ["alarm.fired"] },
        }),
        await call(app, "POST", `/org/${slug}/integrations/${target}/test`, creds),
        await call(app, "DELETE", `/org/${slug}/integrations/${target}`, creds),
      ];
      if (who === "none") {
        for (const res of writes) expectError(res, 401, "UNAUTHORIZED");
      } else if (!MANAGERS.has(who)) {
        for (const res of writes) expectError(res, 403, "FORBIDDEN");
      } else {
        expectStatus(writes[0] as CallResult, 200);
        expect((writes[0] as CallResult).body.integration.events).toEqual(["alarm.fired"]);
        expectStatus(writes[1] as CallResult, 200);
        expect((writes[1] as CallResult).body.delivery.status).toBe("succeeded");
        expectStatus(writes[2] as CallResult, 204);
      }
    }
    // The refused writes changed nothing and sent nothing.
    const after = await call(app, "GET", `/org/${slug}/integrations`, { cookie: owner.cookie });
    expect(after.body.integrations.map((i: any) => i.id)).toEqual([fixture.id]);
    expect(after.body.integrations[0]).toEqual(fixture);
    expect(receiver.requests.filter((r) => r.path.startsWith(`${prefix}/`))).toEqual([]);
    // Only the three managers' test sends went out.
    for (const who of EVERYONE) {
      expect(requestsUnder(`${prefix}-${who}`)).toHaveLength(MANAGERS.has(who) ? 1 : 0);
    }
  });

  it("isolates orgs: another org's integrations are 404 whoever asks", async () => {
    const mine = await freshOrg();
    const prefix = tag("isolated");
    const integration = await createOk(mine.slug, slackBody(prefix));

    const stranger = await signUp(app, uniqueEmail("stranger"));
    const theirs = await createOrg(app, stranger, "Stranger Org");
    const strangerKey = await createApiKey(app, stranger, theirs.slug, "full");
    const ownerKey = await createApiKey(app, owner, mine.slug, "full");

    for (const creds of [{ cookie: stranger.cookie }, { token: strangerKey.token }]) {
      // Through the owner's org slug: not a member, so the org itself is 404.
      expectError(await call(app, "GET", `/org/${mine.slug}/integrations`, creds), 404, "NOT_FOUND");
      expectError(await call(app, "GET", `/org/${mine.slug}/integrations/${integration.id}`, creds), 404, "NOT_FOUND");
      expectError(await create(mine.slug, slackBody(prefix), creds), 404, "NOT_FOUND");
      // Through their own org: the id is not one of theirs.
      expectError(
        await call(app, "GET", `/org/${theirs.slug}/integrations/${integration.id}`, creds),
        404,
        "NOT_FOUND",
      );
      expectError(
        await call(app, "PATCH", `/org/${theirs.slug}/integrations/${integration.id}`, {
          ...creds,
          body: { events: ["*"] },
        }),
        404,
        "NOT_FOUND",
      );
      expectError(
        await call(app, "POST", `/org/${theirs.slug}/integrations/${integration.id}/test`, creds),
        404,
        "NOT_FOUND",
      );
      expectError(
        await call(app, "DELETE", `/org/${theirs.slug}/integrations/${integration.id}`, creds),
        404,
        "NOT_FOUND",
      );
      const theirList = await call(app, "GET", `/org/${theirs.slug}/integrations`, creds);
      expectStatus(theirList, 200);
      expect(theirList.body.integrations).toEqual([]);
    }
    // The owner's key for one org does not reach another org the owner belongs to.
    expectError(await call(app, "GET", `/org/${slug}/integrations`, { token: ownerKey.token }), 404, "NOT_FOUND");

    const still = await call(app, "GET", `/org/${mine.slug}/integrations/${integration.id}`, { cookie: owner.cookie });
    expectStatus(still, 200);
    expect(still.body.integration).toEqual(integration);
    expect(requestsUnder(prefix)).toEqual([]);
  });
});

describe("migration 0007-forget-integration-credentials", () => {
  let own: TestApp;
  beforeAll(async () => {
    own = await startApp();
  });
  afterAll(() => own.close());

  it("clears the request headers kept with integration attempts, and only theirs", async () => {
    const { db } = own.server.deps;
    const at = new Date().toISOString();
    const owner = await signUp(own);
    const org = await createOrg(own, owner, "Migrated Org");
    const orgId = (await db.selectFrom("orgs").select("id").where("slug", "=", org.slug).executeTakeFirstOrThrow()).id;
    const delivery = (id: string, targetType: string) => ({
      id,
      org_id: orgId,
      project_id: null,
      target_type: targetType,
      target_id: `${targetType}_x`,
      event: "project.paused",
      url: "https://example.test/hook",
      body: "{}",
      headers: "{}",
      status: "succeeded",
      attempts: 1,
      last_status_code: 200,
      last_error: null,
      created_at: at,
      updated_at: at,
    });
    const attempt = (id: string, deliveryId: string) => ({
      id,
      delivery_id: deliveryId,
      attempt: 1,
      status_code: 200,
      latency_ms: 1,
      error: null,
      response_body: "ok",
      request_headers: JSON.stringify({ "DD-API-KEY": "kept-secret-0123456789" }),
      created_at: at,
    });
    await db
      .insertInto("webhook_deliveries")
      .values([delivery("dlv_m7_int", "integration"), delivery("dlv_m7_hook", "webhook")])
      .execute();
    await db
      .insertInto("webhook_attempts")
      .values([attempt("att_m7_int", "dlv_m7_int"), attempt("att_m7_hook", "dlv_m7_hook")])
      .execute();
    await forgetIntegrationCredentials().up(db);
    const rows = await db
      .selectFrom("webhook_attempts")
      .select(["id", "request_headers"])
      .where("id", "in", ["att_m7_int", "att_m7_hook"])
      .orderBy("id")
      .execute();
    expect(rows).toEqual([
      { id: "att_m7_hook", request_headers: JSON.stringify({ "DD-API-KEY": "kept-secret-0123456789" }) },
      { id: "att_m7_int", request_headers: null },
    ]);
  });
});
