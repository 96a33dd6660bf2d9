import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addMember,
  call,
  createApiKey,
  createOrg,
  expectError,
  expectStatus,
  type Mailbox,
  type Receiver,
  signUp,
  sleep,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
  type TestUser,
  uniqueEmail,
  until,
} from "./harness.ts";

interface Notification {
  id: string;
  kind: string;
  title: string;
  body: string;
  data: Record<string, unknown>;
  read: boolean;
  readAt: string | null;
  createdAt: string;
}

describe("notifications", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let receiver: Receiver;
  let owner: TestUser;
  let admin: TestUser;
  let developer: TestUser;
  let viewer: TestUser;
  let slug: string;

  beforeAll(async () => {
    mailbox = await startMailbox();
    receiver = await startReceiver();
    app = await startApp({
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      WEBHOOK_BACKOFF_BASE_MS: "20",
      // Failed deliveries keep retrying instead of dead-lettering while events pile up toward the breaker.
      WEBHOOK_MAX_ATTEMPTS: "20",
      WORKER_POLL_MS: "50",
      AUTH_RATE_LIMIT_PER_MINUTE: "10000",
      RATE_LIMIT_PER_MINUTE: "100000",
      SMTP_URL: mailbox.url,
      // A project in any other region fails to provision: a real cause of project.failed.
      SERVED_REGIONS: "fra",
    });
    owner = await signUp(app, uniqueEmail("owner"), "Olive Owner");
    slug = (await createOrg(app, owner, "Notified Org")).slug;
    admin = (await addMember(app, mailbox, owner, slug, "admin")).user;
    developer = (await addMember(app, mailbox, owner, slug, "developer")).user;
    viewer = (await addMember(app, mailbox, owner, slug, "viewer")).user;
  });

  afterAll(async () => {
    await app?.close();
    await receiver?.close();
    await mailbox?.close();
  });

  async function list(user: TestUser, query = "", orgSlug = slug): Promise<Notification[]> {
    const res = await call(app, "GET", `/org/${orgSlug}/notifications${query}`, { cookie: user.cookie });
    expectStatus(res, 200);
    expect(Array.isArray(res.body.notifications)).toBe(true);
    return res.body.notifications;
  }

  async function invite(role: "admin" | "developer" | "viewer" = "developer", orgSlug = slug): Promise<string> {
    const email = uniqueEmail("invitee");
    const res = await call(app, "POST", `/org/${orgSlug}/invitations`, {
      cookie: owner.cookie,
      body: { email, role },
    });
    expectStatus(res, 201);
    return email;
  }

  function invitedFor(notifications: Notification[], email: string): Notification[] {
    return notifications.filter((n) => n.kind === "member.invited" && n.data.email === email);
  }

  function expectWellFormed(n: Notification): void {
    expect(n.id).toEqual(expect.any(String));
    expect(n.title).toEqual(expect.any(String));
    expect(n.title.length).toBeGreaterThan(0);
    expect(n.body).toEqual(expect.any(String));
    expect(n.data).toEqual(expect.any(Object));
    expect(Number.isNaN(Date.parse(n.createdAt))).toBe(false);
  }

  async function projectStatus(projectSlug: string, status: string): Promise<any> {
    return until(
      `project ${projectSlug} to be ${status}`,
      async () => {
        const res = await call(app, "GET", `/org/${slug}/projects/${projectSlug}`, { cookie: owner.cookie });
        expectStatus(res, 200);
        return res.body.project.status === status ? res.body.project : undefined;
      },
      15_000,
    );
  }

  // ---- which events notify whom ----

  it("an invitation notifies each admin and owner of the org, and no developer or viewer", async () => {
    const email = await invite("viewer");
    for (const user of [owner, admin]) {
      const mine = invitedFor(await list(user), email);
      expect(mine, user.email).toHaveLength(1);
      const n = mine[0] as Notification;
      expectWellFormed(n);
      expect(n).toMatchObject({ kind: "member.invited", read: false, readAt: null });
      expect(n.data).toMatchObject({ email, role: "viewer" });
      expect(`${n.title} ${n.body}`).toContain(email);
    }
    // Each recipient has a row of their own.
    const ownerId = invitedFor(await list(owner), email)[0]?.id;
    const adminId = invitedFor(await list(admin), email)[0]?.id;
    expect(ownerId).not.toBe(adminId);
    for (const user of [developer, viewer]) expect(await list(user)).toEqual([]);
  });

  it("an invitation made with a full API key notifies the admins and owners too", async () => {
    const key = await createApiKey(app, owner, slug, "full");
    const email = uniqueEmail("key-invitee");
    const res = await call(app, "POST", `/org/${slug}/invitations`, {
      token: key.token,
      body: { email, role: "developer" },
    });
    expectStatus(res, 201);
    for (const user of [owner, admin]) expect(invitedFor(await list(user), email)).toHaveLength(1);
    for (const user of [developer, viewer]) expect(await list(user)).toEqual([]);
  });

  it("a project that fails to provision notifies admins and owners (project.failed); a provisioned one does not", async () => {
    const failing = await call(app, "POST", `/org/${slug}/projects`, {
      cookie: owner.cookie,
      body: { name: "Far Away", region: "sjc" },
    });
    expectStatus(failing, 201);
    const failedSlug: string = failing.body.project.slug;
    const fine = await call(app, "POST", `/org/${slug}/projects`, {
      cookie: owner.cookie,
      body: { name: "Close By", region: "fra" },
    });
    expectStatus(fine, 201);
    const fineSlug: string = fine.body.project.slug;

    const failed = await projectStatus(failedSlug, "failed");
    expect(failed.failureReason).toEqual(expect.any(String));
    await projectStatus(fineSlug, "active");

    for (const user of [owner, admin]) {
      const all = await list(user);
      const mine = all.filter((n) => n.kind === "project.failed");
      expect(mine, user.email).toHaveLength(1);
      const n = mine[0] as Notification;
      expectWellFormed(n);
      expect(n).toMatchObject({ read: false, readAt: null });
      expect(n.data).toMatchObject({ projectSlug: failedSlug });
      expect(n.title).toContain(failedSlug);
      // Success is not something anyone needs to be told about.
      expect(all.filter((x) => x.kind === "project.provisioned")).toEqual([]);
      expect(all.filter((x) => x.data.projectSlug === fineSlug)).toEqual([]);
    }
    for (const user of [developer, viewer]) expect(await list(user)).toEqual([]);
  });

  it("a webhook switched off by the breaker notifies admins and owners once (webhook.auto_disabled)", async () => {
    receiver.respondWith(() => ({ status: 500, body: "receiver says no" }));
    const created = await call(app, "POST", `/org/${slug}/webhooks`, {
      cookie: owner.cookie,
      body: { url: `${receiver.url}/always-failing`, events: ["*"] },
    });
    expectStatus(created, 201);
    const webhookId: string = created.body.webhook.id;

    const webhookState = async () => {
      const res = await call(app, "GET", `/org/${slug}/webhooks`, { cookie: owner.cookie });
      expectStatus(res, 200);
      return res.body.webhooks.find((w: any) => w.id === webhookId);
    };
    // Real events, each a delivery that fails (and retries) until the breaker trips; bounded.
    let events = 0;
    while ((await webhookState()).active && events < 30) {
      await invite("developer");
      events += 1;
      await sleep(100);
    }
    await until("the breaker to trip", async () => !(await webhookState()).active, 15_000);
    const disabled = await webhookState();
    expect(disabled.active).toBe(false);
    expect(disabled.disabledReason).toEqual(expect.any(String));
    expect(disabled.consecutiveFailures).toBeGreaterThanOrEqual(15);
    expect(receiver.requests.length).toBeGreaterThanOrEqual(15);

    // Let the remaining retries settle (they are skipped now) before counting.
    await sleep(500);
    for (const user of [owner, admin]) {
      const mine = (await list(user)).filter((n) => n.kind === "webhook.auto_disabled");
      expect(mine, user.email).toHaveLength(1);
      const n = mine[0] as Notification;
      expectWellFormed(n);
      expect(n).toMatchObject({ read: false, readAt: null });
      expect(n.data).toMatchObject({ webhookId });
    }
    for (const user of [developer, viewer]) expect(await list(user)).toEqual([]);
    receiver.respondWith(() => ({ status: 200, body: "ok" }));
  });

  // ---- reading ----

  it("each caller sees only their own; read marks one, read-all marks all, ?unread=true filters", async () => {
    const first = await invite();
    const second = await invite();
    const ownerFirst = invitedFor(await list(owner), first)[0] as Notification;
    const ownerSecond = invitedFor(await list(owner), second)[0] as Notification;
    const adminFirst = invitedFor(await list(admin), first)[0] as Notification;
    expect(ownerFirst).toBeDefined();
    expect(ownerSecond).toBeDefined();
    expect(adminFirst).toBeDefined();

    // Nobody's list contains another account's rows.
    const ownerIds = new Set((await list(owner)).map((n) => n.id));
    const adminIds = (await list(admin)).map((n) => n.id);
    expect(adminIds.filter((id) => ownerIds.has(id))).toEqual([]);

    // Newest first.
    const ownerAll = await list(owner);
    const times = ownerAll.map((n) => Date.parse(n.createdAt));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
    expect(ownerAll.findIndex((n) => n.id === ownerSecond.id)).toBeLessThan(
      ownerAll.findIndex((n) => n.id === ownerFirst.id),
    );

    // Read one.
    const before = Date.now();
    const read = await call(app, "POST", `/org/${slug}/notifications/${ownerFirst.id}/read`, { cookie: owner.cookie });
    expectStatus(read, 200);
    expect(read.body).toEqual({ ok: true });
    const afterRead = (await list(owner)).find((n) => n.id === ownerFirst.id) as Notification;
    expect(afterRead.read).toBe(true);
    expect(afterRead.readAt).toEqual(expect.any(String));
    expect(Date.parse(afterRead.readAt as string)).toBeGreaterThanOrEqual(before - 1_000);
    expect((await list(owner)).find((n) => n.id === ownerSecond.id)?.read).toBe(false);
    // Only the reader's row changed.
    expect((await list(admin)).find((n) => n.id === adminFirst.id)).toMatchObject({ read: false, readAt: null });

    // ?unread=true leaves it out; ?unread=false and no filter keep it.
    const unread = await list(owner, "?unread=true");
    expect(unread.map((n) => n.id)).not.toContain(ownerFirst.id);
    expect(unread.map((n) => n.id)).toContain(ownerSecond.id);
    expect(unread.every((n) => !n.read && n.readAt === null)).toBe(true);
    expect((await list(owner, "?unread=false")).map((n) => n.id)).toContain(ownerFirst.id);
    // 1 and 0 read as true and false.
    expect(await list(owner, "?unread=1")).toEqual(unread);
    expect((await list(owner, "?unread=0")).map((n) => n.id)).toContain(ownerFirst.id);
    expect(unread.length).toBe((await list(owner)).filter((n) => !n.read).length);

    // Reading it again is fine and keeps the first read time.
    await sleep(20);
    const again = await call(app, "POST", `/org/${slug}/notifications/${ownerFirst.id}/read`, { cookie: owner.cookie });
    expectStatus(again, 200);
    expect((await list(owner)).find((n) => n.id === ownerFirst.id)?.readAt).toBe(afterRead.readAt);

    // Read all.
    const all = await call(app, "POST", `/org/${slug}/notifications/read-all`, { cookie: owner.cookie });
    expectStatus(all, 200);
    expect(all.body).toEqual({ ok: true });
    const everything = await list(owner);
    expect(everything.length).toBeGreaterThan(2);
    for (const n of everything) {
      expect(n.read).toBe(true);
      expect(n.readAt).toEqual(expect.any(String));
    }
    expect(await list(owner, "?unread=true")).toEqual([]);
    // The admin's notifications are still unread.
    expect((await list(admin, "?unread=true")).map((n) => n.id)).toContain(adminFirst.id);

    // Something new is unread again, alone.
    const third = await invite();
    const fresh = await list(owner, "?unread=true");
    expect(fresh).toHaveLength(1);
    expect(fresh[0]).toMatchObject({ kind: "member.invited", data: { email: third }, read: false });
  });

  it("pages by limit and offset, newest first, and validates both", async () => {
    for (let i = 0; i < 3; i++) await invite();
    const all = await list(owner, "?limit=500");
    expect(all.length).toBeGreaterThanOrEqual(3);
    const firstTwo = await list(owner, "?limit=2");
    expect(firstTwo.map((n) => n.id)).toEqual(all.slice(0, 2).map((n) => n.id));
    const next = await list(owner, "?limit=2&offset=2");
    expect(next.map((n) => n.id)).toEqual(all.slice(2, 4).map((n) => n.id));
    // Counts are decimal digits: hex, exponents, fractions and empty values are refused, not read as numbers.
    const refused = ["?limit=0", "?limit=501", "?limit=x", "?offset=-1", "?limit=0x10", "?limit=1e1", "?limit=2.5"];
    for (const query of [...refused, "?limit=", "?offset=", "?offset=1e0", "?limit=%FF", "?x=a=%FF"]) {
      const res = await call(app, "GET", `/org/${slug}/notifications${query}`, { cookie: owner.cookie });
      expect(res.status, query).toBe(422);
      expect(res.body.error.code).toBe("VALIDATION");
      expect(
        res.body.error.details.map((d: { path: string }) => d.path),
        query,
      ).toEqual([query.slice(1).split("=")[0]]);
    }
    expect((await list(owner, "?limit=%202")).map((n) => n.id)).toEqual(all.slice(0, 2).map((n) => n.id));
  });

  it("refuses unknown ids, other accounts' ids, API keys, missing credentials and other orgs", async () => {
    const email = await invite();
    const ownerN = invitedFor(await list(owner), email)[0] as Notification;
    const adminN = invitedFor(await list(admin), email)[0] as Notification;

    // Unknown id.
    expectError(
      await call(app, "POST", `/org/${slug}/notifications/ntf_does_not_exist/read`, { cookie: owner.cookie }),
      404,
      "NOT_FOUND",
    );
    // Another account's notification, in an org both belong to.
    expectError(
      await call(app, "POST", `/org/${slug}/notifications/${adminN.id}/read`, { cookie: owner.cookie }),
      404,
      "NOT_FOUND",
    );
    expectError(
      await call(app, "POST", `/org/${slug}/notifications/${ownerN.id}/read`, { cookie: developer.cookie }),
      404,
      "NOT_FOUND",
    );
    expect((await list(admin)).find((n) => n.id === adminN.id)).toMatchObject({ read: false, readAt: null });
    expect((await list(owner)).find((n) => n.id === ownerN.id)).toMatchObject({ read: false, readAt: null });

    // A bad filter value names the field.
    const bad = await call(app, "GET", `/org/${slug}/notifications?unread=yes`, { cookie: owner.cookie });
    expectError(bad, 422, "VALIDATION");
    expect(bad.body.error.details.map((d: { path: string }) => d.path)).toContain("unread");

    // API keys have no notifications: 403 for every scope.
    for (const scope of ["full", "deploy", "read-only"] as const) {
      const { token } = await createApiKey(app, owner, slug, scope);
      expectError(await call(app, "GET", `/org/${slug}/notifications`, { token }), 403, "FORBIDDEN");
      expectError(await call(app, "POST", `/org/${slug}/notifications/${ownerN.id}/read`, { token }), 403, "FORBIDDEN");
      expectError(await call(app, "POST", `/org/${slug}/notifications/read-all`, { token }), 403, "FORBIDDEN");
    }
    // No credentials: 401.
    expectError(await call(app, "GET", `/org/${slug}/notifications`), 401, "UNAUTHORIZED");
    expectError(await call(app, "POST", `/org/${slug}/notifications/${ownerN.id}/read`), 401, "UNAUTHORIZED");
    expectError(await call(app, "POST", `/org/${slug}/notifications/read-all`), 401, "UNAUTHORIZED");
    expect((await list(owner)).find((n) => n.id === ownerN.id)?.read).toBe(false);

    // Another org: a stranger gets 404 for this org, and this org's ids are 404 in theirs.
    const stranger = await signUp(app, uniqueEmail("stranger"));
    const theirs = await createOrg(app, stranger, "Stranger Org");
    expectError(await call(app, "GET", `/org/${slug}/notifications`, { cookie: stranger.cookie }), 404, "NOT_FOUND");
    expectError(
      await call(app, "POST", `/org/${slug}/notifications/${ownerN.id}/read`, { cookie: stranger.cookie }),
      404,
      "NOT_FOUND",
    );
    expectError(
      await call(app, "POST", `/org/${slug}/notifications/read-all`, { cookie: stranger.cookie }),
      404,
      "NOT_FOUND",
    );
    expectError(
      await call(app, "POST", `/org/${theirs.slug}/notifications/${ownerN.id}/read`, { cookie: stranger.cookie }),
      404,
      "NOT_FOUND",
    );
    const strangerKey = await createApiKey(app, stranger, theirs.slug, "full");
    expectError(await call(app, "GET", `/org/${slug}/notifications`, { token: strangerKey.token }), 404, "NOT_FOUND");
    expect(await list(stranger, "", theirs.slug)).toEqual([]);

    // The owner's second org: its list holds only its own, and reading there touches nothing here.
    const second = await createOrg(app, owner, "Owner's Other Org");
    expect(await list(owner, "", second.slug)).toEqual([]);
    expectError(
      await call(app, "POST", `/org/${second.slug}/notifications/${ownerN.id}/read`, { cookie: owner.cookie }),
      404,
      "NOT_FOUND",
    );
    const otherEmail = await invite("viewer", second.slug);
    const inSecond = await list(owner, "", second.slug);
    expect(inSecond).toHaveLength(1);
    expect(inSecond[0]).toMatchObject({ kind: "member.invited", data: { email: otherEmail } });
    expect(invitedFor(await list(owner), otherEmail)).toEqual([]);
    const readAllThere = await call(app, "POST", `/org/${second.slug}/notifications/read-all`, {
      cookie: owner.cookie,
    });
    expectStatus(readAllThere, 200);
    expect((await list(owner, "", second.slug))[0]?.read).toBe(true);
    expect((await list(owner)).find((n) => n.id === ownerN.id)).toMatchObject({ read: false, readAt: null });
  });
});
