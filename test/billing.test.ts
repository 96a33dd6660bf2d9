import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAY_MS } from "../src/clock.ts";
import { settleBillingPeriods } from "../src/domains/billing/service.ts";
import {
  addMember,
  call,
  createApiKey,
  createOrg,
  expectError,
  expectValidation,
  type Mailbox,
  ownerWithOrg,
  type Receiver,
  signUp,
  sleep,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
  type TestUser,
} from "./harness.ts";

/**
 * Plans and billing with the `test` provider (DESIGN §8, §11) over real HTTP: checkout, payment,
 * the plan change with its invoice, event, notification and audit rows; packs raising the
 * period's limits; cancellation at the period's end on the manual clock; and every refusal.
 */

const ENV = {
  BILLING_PROVIDER: "test",
  ALLOW_PRIVATE_WEBHOOK_URLS: "true",
  WORKER_POLL_MS: "50",
  RATE_LIMIT_PER_MINUTE: "1000000",
};

describe("billing with the test provider", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let receiver: Receiver;
  let owner: TestUser;
  let slug: string;

  const asOwner = (method: string, path: string, body?: unknown) =>
    call(app, method, `/org/${slug}${path}`, { cookie: owner.cookie, body });

  /** Pays a checkout through its URL (the test provider's payment page), as `as`. */
  const pay = (url: string, as: { cookie?: string; token?: string }) =>
    call(app, "POST", new URL(url).pathname.replace(/^\/api/, ""), as);

  beforeAll(async () => {
    mailbox = await startMailbox();
    app = await startApp({ ...ENV, SMTP_URL: mailbox.url });
    receiver = await startReceiver();
    ({ owner, slug } = await ownerWithOrg(app, "Paying Org"));
    const hook = await asOwner("POST", "/webhooks", {
      url: `${receiver.url}/billing`,
      events: ["billing.plan_change"],
    });
    expect(hook.status).toBe(201);
  });
  afterAll(async () => {
    await receiver?.close();
    await app?.close();
    await mailbox?.close();
  });

  it("starts on the default plan with no subscription and no invoices", async () => {
    expect((await asOwner("GET", "/billing/subscription")).body).toEqual({ subscription: null });
    expect((await asOwner("GET", "/billing/invoices")).body).toEqual({ invoices: [] });
    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("free");
  });

  it("changes the plan when the checkout is paid, never before: invoice, event, notification, audit", async () => {
    const started = await asOwner("POST", "/billing/checkout", { plan: "pro" });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    const { checkout } = started.body;
    expect(checkout).toEqual({
      id: expect.stringMatching(/^chk_/),
      url: `${app.config.publicUrl}/api/billing/test-checkout/${checkout.id}`,
      kind: "plan",
      plan: "pro",
      interval: "monthly",
      status: "open",
      expiresAt: expect.any(String),
    });
    // Not before the payment.
    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("free");
    expect((await asOwner("GET", "/billing/subscription")).body.subscription).toBeNull();

    const paid = await pay(checkout.url, { cookie: owner.cookie });
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    expect(paid.body.checkout).toMatchObject({ id: checkout.id, status: "completed" });

    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("pro");
    const { subscription } = (await asOwner("GET", "/billing/subscription")).body;
    expect(subscription).toEqual({
      planId: "pro",
      interval: "monthly",
      status: "active",
      currentPeriodStart: expect.any(String),
      currentPeriodEnd: expect.any(String),
      cancelAtPeriodEnd: false,
      provider: "test",
    });
    const days = (Date.parse(subscription.currentPeriodEnd) - Date.parse(subscription.currentPeriodStart)) / DAY_MS;
    expect(days).toBeGreaterThanOrEqual(28);
    expect(days).toBeLessThanOrEqual(31);

    const { invoices } = (await asOwner("GET", "/billing/invoices")).body;
    expect(invoices).toHaveLength(1);
    expect(invoices[0]).toMatchObject({
      status: "paid",
      amountCents: 2_500,
      currency: "usd",
      periodStart: subscription.currentPeriodStart,
      periodEnd: subscription.currentPeriodEnd,
      lines: [{ description: "Pro plan, monthly", amountCents: 2_500 }],
    });

    const delivery = await receiver.waitFor("billing.plan_change", (r) => r.path === "/billing");
    expect(JSON.parse(delivery.body)).toMatchObject({
      event: "billing.plan_change",
      payload: { from: "free", to: "pro", interval: "monthly" },
    });
    const notes = (await asOwner("GET", "/notifications")).body.notifications;
    expect(notes.some((n: { kind: string }) => n.kind === "billing.plan_change")).toBe(true);
    const audit = (await asOwner("GET", "/audit?action=billing.*")).body.events.map(
      (e: { action: string }) => e.action,
    );
    expect(audit).toEqual(["billing.plan_changed", "billing.checkout_started"]);

    // Paid once only.
    expectError(await pay(checkout.url, { cookie: owner.cookie }), 409, "CONFLICT");
    // The usage page reads the subscription's period and the new plan's limits.
    const usage = (await asOwner("GET", "/usage")).body;
    expect(usage.periodStart).toBe(subscription.currentPeriodStart);
    expect(usage.metrics.requests.limit).toBe(5_000_000);
  });

  it("raises the period's limit with a pack, and writes its invoice", async () => {
    const before = (await asOwner("GET", "/usage")).body.metrics;
    const started = await asOwner("POST", "/billing/packs", { type: "requests" });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    expect(started.body.checkout).toMatchObject({ kind: "pack", packType: "requests", status: "open" });
    expect((await asOwner("GET", "/usage")).body.metrics.requests.limit).toBe(before.requests.limit);
    expect((await pay(started.body.checkout.url, { cookie: owner.cookie })).status).toBe(200);
    const after = (await asOwner("GET", "/usage")).body.metrics;
    expect(after.requests.limit).toBe(before.requests.limit + 1_000_000);
    expect(after.r2.limit).toBe(before.r2.limit);

    const r2 = await asOwner("POST", "/billing/packs", { type: "r2" });
    expect((await pay(r2.body.checkout.url, { cookie: owner.cookie })).status).toBe(200);
    expect((await asOwner("GET", "/usage")).body.metrics.r2.limit).toBe(before.r2.limit + 10 * 1024 ** 3);
    const { invoices } = (await asOwner("GET", "/billing/invoices")).body;
    expect(invoices.map((i: { lines: { description: string }[] }) => i.lines[0]?.description).slice(0, 2)).toEqual([
      "r2 pack",
      "requests pack",
    ]);
  });

  it("cancels at the period's end: the plan holds until then, then the org is back on free", async () => {
    const canceled = await asOwner("DELETE", "/billing/subscription");
    expect(canceled.status, JSON.stringify(canceled.body)).toBe(200);
    expect(canceled.body.subscription).toMatchObject({ planId: "pro", status: "active", cancelAtPeriodEnd: true });
    const { deps } = app.server;
    await settleBillingPeriods(deps);
    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("pro");

    const end = Date.parse(canceled.body.subscription.currentPeriodEnd);
    const ahead = end - Date.now() + 60_000;
    app.clock.advance(ahead);
    try {
      const since = receiver.at("/billing").length;
      await settleBillingPeriods(deps);
      await settleBillingPeriods(deps);
      expect((await asOwner("GET", "/overview")).body.org.planId).toBe("free");
      expect((await asOwner("GET", "/billing/subscription")).body.subscription).toMatchObject({
        planId: "pro",
        status: "canceled",
      });
      await receiver.waitFor(
        "the return to free",
        (r) => r.path === "/billing" && receiver.at("/billing").length > since,
      );
      await sleep(200);
      const changes = receiver
        .at("/billing")
        .slice(since)
        .map((r) => JSON.parse(r.body).payload);
      expect(changes).toEqual([{ from: "pro", to: "free", interval: null }]);
      // Nothing left to cancel.
      expectError(await asOwner("DELETE", "/billing/subscription"), 409, "CONFLICT");
      // Back on free's limits (the packs were for the period that ended).
      expect((await asOwner("GET", "/usage")).body.metrics.requests.limit).toBe(500_000);
    } finally {
      app.clock.advance(-ahead);
    }
  });

  it("renews a test subscription at its period's end with a paid invoice", async () => {
    const other = await ownerWithOrg(app, "Renewing Org");
    const started = await call(app, "POST", `/org/${other.slug}/billing/checkout`, {
      cookie: other.owner.cookie,
      body: { plan: "scale", interval: "annual" },
    });
    expect((await pay(started.body.checkout.url, { cookie: other.owner.cookie })).status).toBe(200);
    const first = (await call(app, "GET", `/org/${other.slug}/billing/subscription`, { cookie: other.owner.cookie }))
      .body.subscription;
    expect(first).toMatchObject({ planId: "scale", interval: "annual" });
    const ahead = Date.parse(first.currentPeriodEnd) - Date.now() + 60_000;
    app.clock.advance(ahead);
    try {
      await settleBillingPeriods(app.server.deps);
      const renewed = (
        await call(app, "GET", `/org/${other.slug}/billing/subscription`, { cookie: other.owner.cookie })
      ).body.subscription;
      expect(renewed.currentPeriodStart).toBe(first.currentPeriodEnd);
      expect(renewed.status).toBe("active");
      const invoices = (await call(app, "GET", `/org/${other.slug}/billing/invoices`, { cookie: other.owner.cookie }))
        .body.invoices;
      expect(invoices.map((i: { amountCents: number }) => i.amountCents)).toEqual([599_000, 599_000]);
      expect(
        (await call(app, "GET", `/org/${other.slug}/overview`, { cookie: other.owner.cookie })).body.org.planId,
      ).toBe("scale");
    } finally {
      app.clock.advance(-ahead);
    }
  });

  it("refuses an expired checkout, another org's payer (404) and a non-admin (403)", async () => {
    const started = await asOwner("POST", "/billing/checkout", { plan: "max", interval: "annual" });
    expect(started.status).toBe(201);
    const url = started.body.checkout.url;

    const stranger = await ownerWithOrg(app, "Stranger Org");
    expectError(await pay(url, { cookie: stranger.owner.cookie }), 404, "NOT_FOUND");
    const strangerKey = await createApiKey(app, stranger.owner, stranger.slug, "full");
    expectError(await pay(url, { token: strangerKey.token }), 404, "NOT_FOUND");
    const { user: developer } = await addMember(app, mailbox, owner, slug, "developer");
    expectError(await pay(url, { cookie: developer.cookie }), 403, "FORBIDDEN");
    expectError(await pay(`${app.config.publicUrl}/api/billing/test-checkout/chk_nope`, { cookie: owner.cookie }), 404);
    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("free");

    app.clock.advance(25 * 60 * 60 * 1000);
    try {
      expectError(await pay(url, { cookie: owner.cookie }), 409, "CONFLICT");
    } finally {
      app.clock.advance(-25 * 60 * 60 * 1000);
    }
    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("free");
  });

  it("is for admins: developers and viewers 403, keys of other orgs 404, read-only keys read", async () => {
    const { user: viewer } = await addMember(app, mailbox, owner, slug, "viewer");
    for (const [method, path, body] of [
      ["GET", "/billing/subscription", undefined],
      ["GET", "/billing/invoices", undefined],
      ["POST", "/billing/checkout", { plan: "pro" }],
      ["POST", "/billing/packs", { type: "d1" }],
      ["DELETE", "/billing/subscription", undefined],
    ] as const) {
      expectError(await call(app, method, `/org/${slug}${path}`, { cookie: viewer.cookie, body }), 403, "FORBIDDEN");
    }
    const other = await ownerWithOrg(app, "Other Org");
    const otherKey = await createApiKey(app, other.owner, other.slug, "full");
    expectError(await call(app, "GET", `/org/${slug}/billing/subscription`, { token: otherKey.token }), 404);
    expectError(
      await call(app, "POST", `/org/${slug}/billing/checkout`, { token: otherKey.token, body: { plan: "pro" } }),
      404,
    );
    const readOnly = await createApiKey(app, owner, slug, "read-only");
    expect((await call(app, "GET", `/org/${slug}/billing/invoices`, { token: readOnly.token })).status).toBe(200);
    expectError(
      await call(app, "POST", `/org/${slug}/billing/checkout`, { token: readOnly.token, body: { plan: "pro" } }),
      403,
    );
    const deploy = await createApiKey(app, owner, slug, "deploy");
    expectError(
      await call(app, "POST", `/org/${slug}/billing/packs`, { token: deploy.token, body: { type: "d1" } }),
      403,
    );
    const full = await createApiKey(app, owner, slug, "full");
    expect(
      (await call(app, "POST", `/org/${slug}/billing/packs`, { token: full.token, body: { type: "d1" } })).status,
    ).toBe(201);
  });

  it("validates plan, interval and pack type (422 naming the field)", async () => {
    for (const plan of ["free", "enterprise", "", 3, null]) {
      expectValidation(await asOwner("POST", "/billing/checkout", { plan }), "plan");
    }
    expectValidation(await asOwner("POST", "/billing/checkout", {}), "plan");
    for (const interval of ["weekly", "Monthly", 12]) {
      expectValidation(await asOwner("POST", "/billing/checkout", { plan: "pro", interval }), "interval");
    }
    for (const type of ["cpu", "", null]) expectValidation(await asOwner("POST", "/billing/packs", { type }), "type");
    expectValidation(await asOwner("GET", "/billing/invoices?limit=0"), "limit");
  });
});

describe("billing without a provider", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it("refuses checkouts with 409 'billing is not configured', and shows no subscription", async () => {
    const owner = await signUp(app);
    const { slug } = await createOrg(app, owner, "Unbilled");
    for (const [path, body] of [
      ["/billing/checkout", { plan: "pro" }],
      ["/billing/packs", { type: "requests" }],
    ] as const) {
      const res = await call(app, "POST", `/org/${slug}${path}`, { cookie: owner.cookie, body });
      expectError(res, 409, "CONFLICT");
      expect(res.body.error.message).toBe("billing is not configured");
    }
    expect((await call(app, "GET", `/org/${slug}/billing/subscription`, { cookie: owner.cookie })).body).toEqual({
      subscription: null,
    });
    expectError(await call(app, "DELETE", `/org/${slug}/billing/subscription`, { cookie: owner.cookie }), 409);
    const webhook = await call(app, "POST", "/billing/stripe/webhook", {
      rawBody: "{}",
      headers: { "stripe-signature": "t=1,v1=x" },
    });
    expectError(webhook, 404);
  });
});
