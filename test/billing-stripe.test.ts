import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  call,
  expectError,
  ownerWithOrg,
  type Receiver,
  sleep,
  startApp,
  startReceiver,
  type TestApp,
  type TestUser,
  tag,
} from "./harness.ts";

/**
 * The `stripe` provider against a local stand-in of the two Stripe endpoints Plinth calls
 * (Stripe's servers are the one thing that cannot run here), with Plinth's side on the official
 * `stripe` package, and webhooks signed by that package's own test helper: checkout, the
 * subscription's life (updated, past due, deleted), invoices, replays, out-of-order events and bad
 * signatures.
 */

const WEBHOOK_SECRET = "whsec_plinth_test_secret";
const stripe = new Stripe("sk_test_plinth");

interface FakeStripe {
  url: string;
  requests: { method: string; path: string; form: URLSearchParams }[];
  close(): Promise<void>;
}

/** Answers `POST /v1/checkout/sessions` and `POST /v1/subscriptions/{id}` as Stripe would, and records them. */
async function startFakeStripe(): Promise<FakeStripe> {
  const requests: FakeStripe["requests"] = [];
  let sessions = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
      const path = req.url ?? "/";
      requests.push({ method: req.method ?? "", path, form });
      res.setHeader("content-type", "application/json");
      if (req.headers.authorization !== "Bearer sk_test_plinth") {
        res.writeHead(401).end(JSON.stringify({ error: { type: "invalid_request_error", message: "bad key" } }));
        return;
      }
      if (req.method === "POST" && path === "/v1/checkout/sessions") {
        sessions += 1;
        const id = `cs_test_${sessions}`;
        res.writeHead(200).end(
          JSON.stringify({
            id,
            object: "checkout.session",
            url: `https://checkout.stripe.test/c/pay/${id}`,
            mode: form.get("mode"),
            metadata: { checkoutId: form.get("metadata[checkoutId]"), orgId: form.get("metadata[orgId]") },
          }),
        );
        return;
      }
      const subscription = /^\/v1\/subscriptions\/([\w]+)$/.exec(path)?.[1];
      if (req.method === "POST" && subscription) {
        const updated = {
          id: subscription,
          object: "subscription",
          cancel_at_period_end: form.get("cancel_at_period_end") === "true",
        };
        res.writeHead(200).end(JSON.stringify(updated));
        return;
      }
      res.writeHead(404).end(JSON.stringify({ error: { type: "invalid_request_error", message: "no such route" } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let eventCount = 0;
/** A Stripe event of `type` about `object`, `created` seconds (default now). */
function stripeEvent(type: string, object: Record<string, unknown>, created = Math.floor(Date.now() / 1000)) {
  eventCount += 1;
  return {
    id: `evt_test_${eventCount}_${Date.now()}`,
    object: "event",
    type,
    created,
    data: { object },
    api_version: "2025-01-01",
  };
}

describe("billing with the stripe provider", () => {
  let app: TestApp;
  let fake: FakeStripe;
  let receiver: Receiver;
  let owner: TestUser;
  let slug: string;
  let orgId: string;

  const asOwner = (method: string, path: string, body?: unknown) =>
    call(app, method, `/org/${slug}${path}`, { cookie: owner.cookie, body });

  /** Delivers an event to Plinth's webhook endpoint, signed with the stripe package's test helper. */
  function deliver(event: unknown, options: { secret?: string; timestamp?: number } = {}) {
    const payload = JSON.stringify(event);
    const header = stripe.webhooks.generateTestHeaderString({
      payload,
      secret: options.secret ?? WEBHOOK_SECRET,
      ...(options.timestamp ? { timestamp: options.timestamp } : {}),
    });
    return call(app, "POST", "/billing/stripe/webhook", {
      rawBody: payload,
      headers: { "content-type": "application/json", "stripe-signature": header },
    });
  }

  const planChanges = () => receiver.at("/billing").map((r) => JSON.parse(r.body).payload);

  beforeAll(async () => {
    fake = await startFakeStripe();
    receiver = await startReceiver();
    app = await startApp({
      BILLING_PROVIDER: "stripe",
      STRIPE_SECRET_KEY: "sk_test_plinth",
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      STRIPE_API_BASE: fake.url,
      STRIPE_PRICE_PRO_MONTHLY: "price_pro_monthly",
      STRIPE_PRICE_SCALE_MONTHLY: "price_scale_monthly",
      STRIPE_PRICE_PACK_REQUESTS: "price_pack_requests",
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      WORKER_POLL_MS: "50",
    });
    ({ owner, slug, orgId } = await ownerWithOrg(app, "Stripe Org"));
    expect(
      (await asOwner("POST", "/webhooks", { url: `${receiver.url}/billing`, events: ["billing.plan_change"] })).status,
    ).toBe(201);
  });
  afterAll(async () => {
    await app?.close();
    await receiver?.close();
    await fake?.close();
  });

  let checkoutId: string;

  it("starts a Stripe Checkout Session for the plan's price, with the checkout's id in its metadata", async () => {
    const started = await asOwner("POST", "/billing/checkout", { plan: "pro" });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    checkoutId = started.body.checkout.id;
    expect(started.body.checkout).toMatchObject({ kind: "plan", plan: "pro", status: "open" });
    expect(started.body.checkout.url).toMatch(/^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_/);
    const sent = fake.requests.find((r) => r.path === "/v1/checkout/sessions");
    expect(sent?.form.get("mode")).toBe("subscription");
    expect(sent?.form.get("line_items[0][price]")).toBe("price_pro_monthly");
    expect(sent?.form.get("metadata[checkoutId]")).toBe(checkoutId);
    expect(sent?.form.get("subscription_data[metadata][orgId]")).toBe(orgId);
    // No price configured for it: 409, and nothing is asked of Stripe.
    const before = fake.requests.length;
    expectError(await asOwner("POST", "/billing/checkout", { plan: "max", interval: "annual" }), 409, "CONFLICT");
    expect(fake.requests).toHaveLength(before);
    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("free");
  });

  it("refuses a bad or stale signature with 400 and applies nothing", async () => {
    const completed = stripeEvent("checkout.session.completed", {
      id: "cs_test_1",
      object: "checkout.session",
      mode: "subscription",
      payment_status: "paid",
      customer: "cus_plinth",
      subscription: "sub_plinth",
      amount_total: 2500,
      metadata: { checkoutId, orgId },
    });
    expectError(await deliver(completed, { secret: "whsec_wrong" }), 400, "BAD_REQUEST");
    expectError(await deliver(completed, { timestamp: Math.floor(Date.now() / 1000) - 3600 }), 400, "BAD_REQUEST");
    const unsigned = await call(app, "POST", "/billing/stripe/webhook", { body: completed });
    expectError(unsigned, 400, "BAD_REQUEST");
    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("free");

    // Signed: applied once, however often Stripe sends it.
    expect((await deliver(completed)).status).toBe(200);
    expect((await deliver(completed)).status).toBe(200);
    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("pro");
    const { subscription } = (await asOwner("GET", "/billing/subscription")).body;
    expect(subscription).toMatchObject({
      planId: "pro",
      status: "active",
      provider: "stripe",
      cancelAtPeriodEnd: false,
    });
    await receiver.waitFor("the plan change", (r) => r.path === "/billing");
    await sleep(300);
    expect(planChanges()).toEqual([{ from: "free", to: "pro", interval: "monthly" }]);
    const audit = (await asOwner("GET", "/audit?action=billing.plan_changed")).body.events;
    expect(audit).toHaveLength(1);
    expect(audit[0].actor).toMatchObject({ type: "system" });
  });

  it("records paid and failed invoices; a failed payment makes the subscription past due", async () => {
    const period = { start: Math.floor(Date.now() / 1000), end: Math.floor(Date.now() / 1000) + 30 * 86_400 };
    const invoice = (id: string, extra: Record<string, unknown>) => ({
      id,
      object: "invoice",
      customer: "cus_plinth",
      currency: "usd",
      number: `PLINTH-${id}`,
      amount_paid: 2500,
      amount_due: 2500,
      period_start: period.start,
      period_end: period.end,
      parent: {
        type: "subscription_details",
        subscription_details: { subscription: "sub_plinth", metadata: { orgId } },
      },
      lines: { object: "list", data: [{ description: "Pro plan", amount: 2500, period }] },
      ...extra,
    });
    const paid = stripeEvent("invoice.paid", invoice("in_1", {}));
    expect((await deliver(paid)).status).toBe(200);
    expect((await deliver(paid)).status).toBe(200);
    let invoices = (await asOwner("GET", "/billing/invoices")).body.invoices;
    expect(invoices).toHaveLength(1);
    expect(invoices[0]).toMatchObject({
      number: "PLINTH-in_1",
      status: "paid",
      amountCents: 2500,
      currency: "usd",
      lines: [{ description: "Pro plan", amountCents: 2500 }],
    });

    expect((await deliver(stripeEvent("invoice.payment_failed", invoice("in_2", { amount_paid: 0 })))).status).toBe(
      200,
    );
    expect((await asOwner("GET", "/billing/subscription")).body.subscription.status).toBe("past_due");
    invoices = (await asOwner("GET", "/billing/invoices")).body.invoices;
    expect(invoices.find((i: { number: string }) => i.number === "PLINTH-in_2")).toMatchObject({ status: "open" });
    // Paid on retry: active again.
    expect((await deliver(stripeEvent("invoice.paid", invoice("in_2", {})))).status).toBe(200);
    expect((await asOwner("GET", "/billing/subscription")).body.subscription.status).toBe("active");
    invoices = (await asOwner("GET", "/billing/invoices")).body.invoices;
    expect(invoices.find((i: { number: string }) => i.number === "PLINTH-in_2")).toMatchObject({ status: "paid" });
  });

  it("follows subscription updates in order: a late, older event changes nothing", async () => {
    const now = Math.floor(Date.now() / 1000);
    const subscription = (price: string, extra: Record<string, unknown> = {}) => ({
      id: "sub_plinth",
      object: "subscription",
      customer: "cus_plinth",
      status: "active",
      cancel_at_period_end: false,
      metadata: { orgId },
      items: {
        object: "list",
        data: [{ price: { id: price }, current_period_start: now, current_period_end: now + 30 * 86_400 }],
      },
      ...extra,
    });
    const newer = stripeEvent("customer.subscription.updated", subscription("price_scale_monthly"), now + 10);
    const older = stripeEvent("customer.subscription.updated", subscription("price_pro_monthly"), now + 5);
    expect((await deliver(newer)).status).toBe(200);
    expect((await deliver(older)).status).toBe(200);
    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("scale");
    const { subscription: current } = (await asOwner("GET", "/billing/subscription")).body;
    expect(current).toMatchObject({ planId: "scale", currentPeriodStart: new Date(now * 1000).toISOString() });
    await receiver.waitFor("the change to scale", (r) => r.path === "/billing" && r.body.includes('"to":"scale"'));
  });

  it("cancels through Stripe, and returns to free when Stripe deletes the subscription", async () => {
    const canceled = await asOwner("DELETE", "/billing/subscription");
    expect(canceled.status, JSON.stringify(canceled.body)).toBe(200);
    expect(canceled.body.subscription.cancelAtPeriodEnd).toBe(true);
    const sent = fake.requests.find((r) => r.path === "/v1/subscriptions/sub_plinth");
    expect(sent?.form.get("cancel_at_period_end")).toBe("true");

    const deleted = stripeEvent(
      "customer.subscription.deleted",
      { id: "sub_plinth", object: "subscription", customer: "cus_plinth", status: "canceled", metadata: { orgId } },
      Math.floor(Date.now() / 1000) + 60,
    );
    expect((await deliver(deleted)).status).toBe(200);
    expect((await asOwner("GET", "/overview")).body.org.planId).toBe("free");
    expect((await asOwner("GET", "/billing/subscription")).body.subscription).toMatchObject({ status: "canceled" });
    await receiver.waitFor("the return to free", (r) => r.path === "/billing" && r.body.includes('"to":"free"'));
  });

  it("applies a paid pack checkout, and acknowledges events for unknown customers", async () => {
    const started = await asOwner("POST", "/billing/packs", { type: "requests" });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    const sent = fake.requests.filter((r) => r.path === "/v1/checkout/sessions").at(-1);
    expect(sent?.form.get("mode")).toBe("payment");
    expect(sent?.form.get("line_items[0][price]")).toBe("price_pack_requests");
    const before = (await asOwner("GET", "/usage")).body.metrics.requests.limit;
    const completed = stripeEvent("checkout.session.completed", {
      id: "cs_test_pack",
      object: "checkout.session",
      mode: "payment",
      payment_status: "paid",
      customer: "cus_plinth",
      subscription: null,
      amount_total: 1000,
      metadata: { checkoutId: started.body.checkout.id, orgId },
    });
    expect((await deliver(completed)).status).toBe(200);
    expect((await asOwner("GET", "/usage")).body.metrics.requests.limit).toBe(before + 1_000_000);
    const invoices = (await asOwner("GET", "/billing/invoices")).body.invoices;
    expect(invoices[0]).toMatchObject({ status: "paid", amountCents: 1000, lines: [{ description: "requests pack" }] });

    for (const event of [
      stripeEvent("invoice.paid", {
        id: "in_x",
        object: "invoice",
        customer: "cus_unknown",
        currency: "usd",
        lines: { data: [] },
      }),
      stripeEvent("customer.subscription.updated", {
        id: "sub_unknown",
        object: "subscription",
        customer: "cus_unknown",
        status: "active",
        metadata: {},
      }),
      stripeEvent("checkout.session.completed", {
        id: "cs_x",
        object: "checkout.session",
        payment_status: "paid",
        metadata: { checkoutId: "chk_unknown" },
      }),
      stripeEvent("payment_intent.created", { id: "pi_x", object: "payment_intent" }),
    ]) {
      expect((await deliver(event)).status).toBe(200);
    }
  });

  describe("when the plan changes", () => {
    /** A subscription to `price` of a fresh org, as Stripe sends it, with `status`. */
    const subscriptionOf = (org: { id: string; tag: string }, price: string, status: string) => {
      const now = Math.floor(Date.now() / 1000);
      return {
        id: `sub_${org.tag}`,
        object: "subscription",
        customer: `cus_${org.tag}`,
        status,
        cancel_at_period_end: false,
        metadata: { orgId: org.id },
        items: {
          object: "list",
          data: [{ price: { id: price }, current_period_start: now, current_period_end: now + 30 * 86_400 }],
        },
      };
    };

    async function freshOrg() {
      const fresh = await ownerWithOrg(app, "Stripe Plans");
      const get = async (path: string) =>
        (await call(app, "GET", `/org/${fresh.slug}${path}`, { cookie: fresh.owner.cookie })).body;
      return { id: fresh.orgId, tag: tag(), get, planId: async () => (await get("/overview")).org.planId as string };
    }

    it("keeps the plan for an incomplete, past due, unpaid or paused subscription, until its invoice is paid (#11)", async () => {
      const org = await freshOrg();
      const at = Math.floor(Date.now() / 1000);
      const created = stripeEvent(
        "customer.subscription.created",
        subscriptionOf(org, "price_pro_monthly", "incomplete"),
        at,
      );
      expect((await deliver(created)).status).toBe(200);
      expect(await org.planId()).toBe("free");
      expect((await org.get("/billing/subscription")).subscription).toMatchObject({
        planId: "pro",
        status: "past_due",
        provider: "stripe",
      });
      for (const [offset, status] of [
        [1, "past_due"],
        [2, "unpaid"],
        [3, "paused"],
      ] as const) {
        const updated = stripeEvent(
          "customer.subscription.updated",
          subscriptionOf(org, "price_pro_monthly", status),
          at + offset,
        );
        expect((await deliver(updated)).status).toBe(200);
        expect(await org.planId(), status).toBe("free");
      }
      expect((await org.get("/audit?action=billing.plan_changed")).events).toEqual([]);

      // The subscription's first paid invoice is its payment: now the org has its plan.
      const paid = stripeEvent(
        "invoice.paid",
        {
          id: `in_${org.tag}`,
          object: "invoice",
          customer: `cus_${org.tag}`,
          currency: "usd",
          number: `PLINTH-${org.tag}`,
          amount_paid: 2500,
          amount_due: 2500,
          parent: {
            type: "subscription_details",
            subscription_details: { subscription: `sub_${org.tag}`, metadata: { orgId: org.id } },
          },
          lines: {
            object: "list",
            data: [{ description: "Pro plan", amount: 2500, period: { start: at, end: at + 30 * 86_400 } }],
          },
        },
        at + 4,
      );
      expect((await deliver(paid)).status).toBe(200);
      expect(await org.planId()).toBe("pro");
      expect((await org.get("/billing/subscription")).subscription).toMatchObject({ planId: "pro", status: "active" });
      const audit = (await org.get("/audit?action=billing.plan_changed")).events;
      expect(audit).toHaveLength(1);
      expect(audit[0]).toMatchObject({
        actor: { type: "system" },
        data: { from: "free", to: "pro", interval: "monthly", source: "stripe" },
      });
      // Applied once: Stripe repeating the invoice changes nothing more.
      expect((await deliver(paid)).status).toBe(200);
      expect((await org.get("/audit?action=billing.plan_changed")).events).toHaveLength(1);

      // Past due on another price: recorded, and the plan stays until that is paid for.
      const unpaidUpgrade = stripeEvent(
        "customer.subscription.updated",
        subscriptionOf(org, "price_scale_monthly", "past_due"),
        at + 5,
      );
      expect((await deliver(unpaidUpgrade)).status).toBe(200);
      expect(await org.planId()).toBe("pro");
      expect((await org.get("/billing/subscription")).subscription).toMatchObject({
        planId: "scale",
        status: "past_due",
      });
    });

    it("changes the plan at once on an active or trialing subscription, or a paid or free checkout (#11)", async () => {
      const org = await freshOrg();
      const at = Math.floor(Date.now() / 1000);
      const active = stripeEvent(
        "customer.subscription.created",
        subscriptionOf(org, "price_pro_monthly", "active"),
        at,
      );
      expect((await deliver(active)).status).toBe(200);
      expect(await org.planId()).toBe("pro");
      expect((await org.get("/billing/subscription")).subscription).toMatchObject({ planId: "pro", status: "active" });
      const trialing = stripeEvent(
        "customer.subscription.updated",
        subscriptionOf(org, "price_scale_monthly", "trialing"),
        at + 1,
      );
      expect((await deliver(trialing)).status).toBe(200);
      expect(await org.planId()).toBe("scale");

      // A checkout: unpaid changes nothing; paid for nothing (a full discount, a trial) completes it.
      const checkoutOrg = await ownerWithOrg(app, "Stripe Checkout");
      const started = await call(app, "POST", `/org/${checkoutOrg.slug}/billing/checkout`, {
        cookie: checkoutOrg.owner.cookie,
        body: { plan: "pro" },
      });
      expect(started.status, JSON.stringify(started.body)).toBe(201);
      const session = (paymentStatus: string) =>
        stripeEvent("checkout.session.completed", {
          id: `cs_${paymentStatus}`,
          object: "checkout.session",
          mode: "subscription",
          payment_status: paymentStatus,
          customer: `cus_${org.tag}_checkout`,
          subscription: `sub_${org.tag}_checkout`,
          amount_total: 0,
          metadata: { checkoutId: started.body.checkout.id, orgId: checkoutOrg.orgId },
        });
      const overview = async () =>
        (await call(app, "GET", `/org/${checkoutOrg.slug}/overview`, { cookie: checkoutOrg.owner.cookie })).body.org
          .planId;
      expect((await deliver(session("unpaid"))).status).toBe(200);
      expect(await overview()).toBe("free");
      expect((await deliver(session("no_payment_required"))).status).toBe(200);
      expect(await overview()).toBe("pro");
    });
  });
});
