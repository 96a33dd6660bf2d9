/**
 * What an operator runs Plinth with (DESIGN §16): `GET /metrics`, readiness, and who may sign up
 * (SIGNUP, and a project's own workspace switch).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  call,
  callWorkspace,
  createActiveProject,
  expectError,
  expectStatus,
  invitationToken,
  type Mailbox,
  ownerWithOrg,
  signUp,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
  uniqueEmail,
  until,
} from "./harness.ts";

const TOKEN = "metrics-token-for-the-tests-0123";

async function scrape(app: TestApp, token = TOKEN): Promise<{ status: number; text: string; type: string | null }> {
  const response = await fetch(`${app.url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  return { status: response.status, text: await response.text(), type: response.headers.get("content-type") };
}

/** The value of a series (its name and labels as written), or undefined when it is not there. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((entry) => entry.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("GET /metrics", () => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startApp({ METRICS_TOKEN: TOKEN });
  });
  afterAll(() => app?.close());

  it("is not there without METRICS_TOKEN", async () => {
    const plain = await startApp();
    try {
      const response = await fetch(`${plain.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(response.status).toBe(404);
      expect(((await response.json()) as any).error.code).toBe("NOT_FOUND");
    } finally {
      await plain.close();
    }
  });

  it("asks for the bearer token", async () => {
    const attempts: Record<string, string>[] = [
      {},
      { authorization: "Bearer wrong-token-wrong-token" },
      { authorization: TOKEN },
    ];
    for (const headers of attempts) {
      const response = await fetch(`${app.url}/metrics`, { headers });
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toContain("Bearer");
      expect(((await response.json()) as any).error.code).toBe("UNAUTHORIZED");
    }
  });

  it("labels requests by route template, never by a raw path or id", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Metered Org");
    const project = await createActiveProject(app, owner, slug, "Metered");
    expectStatus(await call(app, "GET", `/org/${slug}/projects/${project.slug}`, { cookie: owner.cookie }), 200);
    expect(
      (await callWorkspace(app, project.id, "POST", "/collections", { token: project.adminToken, body: { slug: "c" } }))
        .status,
    ).toBe(201);
    expectError(await call(app, "GET", "/no/such/path"), 404);

    const { status, text, type } = await scrape(app);
    expect(status).toBe(200);
    expect(type).toContain("text/plain");
    expect(text).toContain("# TYPE http_server_request_duration_seconds histogram");
    expect(
      sample(
        text,
        'http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="200",http_route="/api/org/{slug}/projects/{projectSlug}"}',
      ),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sample(
        text,
        'http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="201",http_route="/w/{projectId}/api/collections"}',
      ),
    ).toBe(1);
    // A path that matched nothing has no route label at all.
    expect(
      sample(
        text,
        'http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="404"}',
      ),
    ).toBeGreaterThanOrEqual(1);
    for (const raw of [slug, project.slug, project.id, "/no/such/path"]) expect(text).not.toContain(raw);
    expect(text).toContain("# TYPE http_server_active_requests gauge");
    expect(sample(text, "plinth_workspaces_open")).toBeGreaterThanOrEqual(1);
  });

  it("shows Plinth's own series and the process's", async () => {
    // No job slots: nobody claims the job, so it waits, ready.
    const idle = await startApp({ METRICS_TOKEN: TOKEN, WORKERS: "0" });
    try {
      const { deps } = idle.server;
      await deps.jobs.enqueue(deps.db, { kind: "metrics.test", payload: {}, runAt: new Date(Date.now() - 5_000) });
      const { text } = await scrape(idle);
      expect(sample(text, "plinth_jobs_ready")).toBe(1);
      expect(sample(text, "plinth_jobs_oldest_ready_seconds")).toBeGreaterThanOrEqual(4);
      expect(sample(text, "plinth_storage_errors_total")).toBe(0);
      expect(text).toContain("# TYPE plinth_webhook_deliveries_total counter");
      expect(text).toContain("process_cpu_user_seconds_total");
      expect(text).toContain("nodejs_heap_size_used_bytes");
    } finally {
      await idle.close();
    }
  });
});

describe("webhook delivery metrics from the worker thread", () => {
  it("adds the thread's counts to the server's", async () => {
    const receiver = await startReceiver();
    const app = await startApp({ METRICS_TOKEN: TOKEN, WORKER_THREAD: "true", ALLOW_PRIVATE_WEBHOOK_URLS: "true" });
    try {
      const { owner, slug } = await ownerWithOrg(app, "Hooked Org");
      const hook = await call(app, "POST", `/org/${slug}/webhooks`, {
        cookie: owner.cookie,
        body: { url: `${receiver.url}/hook`, events: ["project.*"] },
      });
      expectStatus(hook, 201);
      await createActiveProject(app, owner, slug, "Announced");
      await until("a delivery", () => receiver.requests.length > 0, 20_000);
      const delivered = await until(
        "the thread's count",
        async () =>
          sample((await scrape(app)).text, 'plinth_webhook_deliveries_total{kind="control",outcome="succeeded"}') ?? 0,
        20_000,
      );
      expect(delivered).toBeGreaterThanOrEqual(1);
    } finally {
      await app.close();
      await receiver.close();
    }
  });
});

describe("GET /api/health/ready", () => {
  it("is 200 with the database and the storage reachable, 503 once the database is gone", async () => {
    const app = await startApp();
    let closed = false;
    try {
      const ready = await call(app, "GET", "/health/ready");
      expectStatus(ready, 200);
      expect(ready.body).toEqual({ status: "ok", database: "ok", storage: "ok" });
      // The database closed under it: not ready, and liveness says so too.
      await app.server.deps.db.destroy();
      closed = true;
      const down = await call(app, "GET", "/health/ready");
      expectError(down, 503, "UNAVAILABLE");
      expect(down.body.error.details).toEqual({ database: "unreachable", storage: "ok" });
    } finally {
      if (!closed) await app.close();
      else await app.close().catch(() => {});
    }
  });
});

describe("SIGNUP", () => {
  let open: TestApp;
  let mailbox: Mailbox;

  beforeAll(async () => {
    mailbox = await startMailbox();
    open = await startApp({ SMTP_URL: mailbox.url, PUBLIC_URL: "http://plinth.test" });
  });
  afterAll(async () => {
    await open?.close();
    await mailbox?.close();
  });

  const signUpAt = (app: TestApp, email: string) =>
    call(app, "POST", "/auth/sign-up/email", { body: { email, password: "correct-horse-battery", name: "New" } });
  const signInAt = (app: TestApp, email: string) =>
    call(app, "POST", "/auth/sign-in/email", { body: { email, password: "correct-horse-battery" } });

  it("closed: nobody signs up, not even an invitee; existing accounts still sign in", async () => {
    const existing = await signUp(open);
    const { owner, slug } = await ownerWithOrg(open, "Closed Org");
    const invitee = uniqueEmail("closed-invitee");
    expectStatus(
      await call(open, "POST", `/org/${slug}/invitations`, {
        cookie: owner.cookie,
        body: { email: invitee, role: "developer" },
      }),
      201,
    );
    const closed = await startApp({ SIGNUP: "closed" }, { shareDatabaseWith: open });
    try {
      const refused = await signUpAt(closed, uniqueEmail("stranger"));
      expectError(refused, 403, "FORBIDDEN");
      expect(refused.body.error.message).toContain("closed");
      expectError(await signUpAt(closed, invitee), 403, "FORBIDDEN");
      expectStatus(await signInAt(closed, existing.email), 200);
    } finally {
      await closed.close();
    }
  });

  it("invite: only an e-mail with a pending invitation signs up, and then accepts it", async () => {
    const { owner, slug } = await ownerWithOrg(open, "Invite Org");
    const invitee = uniqueEmail("invitee");
    const since = mailbox.messages.length;
    expectStatus(
      await call(open, "POST", `/org/${slug}/invitations`, {
        cookie: owner.cookie,
        body: { email: invitee, role: "developer" },
      }),
      201,
    );
    const token = invitationToken(await mailbox.waitFor(invitee, since));
    const inviteOnly = await startApp({ SIGNUP: "invite" }, { shareDatabaseWith: open });
    try {
      const stranger = await signUpAt(inviteOnly, uniqueEmail("uninvited"));
      expectError(stranger, 403, "FORBIDDEN");
      expect(stranger.body.error.message).toContain("invitation");
      // The invited address, in any case.
      const joined = await signUpAt(inviteOnly, invitee.toUpperCase());
      expectStatus(joined, 200);
      const cookie = (joined.headers.get("set-cookie") ?? "").split(";")[0] as string;
      expectStatus(await call(inviteOnly, "POST", "/invitations/accept", { cookie, body: { token } }), 200);
      const members = await call(inviteOnly, "GET", `/org/${slug}/members`, { cookie: owner.cookie });
      expect(members.body.members.some((m: { email: string }) => m.email === invitee)).toBe(true);
      // The invitation is used: the address cannot sign up a second account with it.
      expectError(await signUpAt(inviteOnly, uniqueEmail("second")), 403, "FORBIDDEN");
    } finally {
      await inviteOnly.close();
    }
  });

  it("refuses a SIGNUP value it does not know, at start", async () => {
    await expect(startApp({ SIGNUP: "maybe" })).rejects.toThrow(/SIGNUP/);
  });
});

describe("a project's workspace sign-up switch", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp();
  });
  afterAll(() => app?.close());

  it("is open by default; closed, the workspace's sign-up is 403 and its users still sign in", async () => {
    const { owner, slug } = await ownerWithOrg(app, "Switch Org");
    const project = await createActiveProject(app, owner, slug, "Switched");
    expect(project.signUp).toBe("open");
    const credentials = (email: string) => ({ body: { email, password: "correct horse battery" } });
    expectStatus(await callWorkspace(app, project.id, "POST", "/auth/sign-up", credentials("early@example.com")), 201);

    const patched = await call(app, "PATCH", `/org/${slug}/projects/${project.slug}`, {
      cookie: owner.cookie,
      body: { signUp: "closed" },
    });
    expectStatus(patched, 200);
    expect(patched.body.project.signUp).toBe("closed");
    const refused = await callWorkspace(app, project.id, "POST", "/auth/sign-up", credentials("late@example.com"));
    expectError(refused, 403, "FORBIDDEN");
    expectStatus(await callWorkspace(app, project.id, "POST", "/auth/sign-in", credentials("early@example.com")), 200);
    const audit = await call(app, "GET", `/org/${slug}/audit?action=project.updated`, { cookie: owner.cookie });
    expect(audit.body.events[0].data).toEqual({ signUp: "closed" });

    expectError(
      await call(app, "PATCH", `/org/${slug}/projects/${project.slug}`, {
        cookie: owner.cookie,
        body: { signUp: "sometimes" },
      }),
      422,
    );
    expectStatus(
      await call(app, "PATCH", `/org/${slug}/projects/${project.slug}`, {
        cookie: owner.cookie,
        body: { signUp: "open" },
      }),
      200,
    );
    expectStatus(await callWorkspace(app, project.id, "POST", "/auth/sign-up", credentials("later@example.com")), 201);
  });
});
