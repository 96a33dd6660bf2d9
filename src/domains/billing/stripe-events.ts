import Stripe from "stripe";
import type { Db } from "../../db/database.ts";
import type { Deps } from "../../deps.ts";
import { BadRequestError, NotFoundError } from "../../errors.ts";
import { newId } from "../../lib/ids.ts";
import { toJsonColumn } from "../../lib/json.ts";
import { recordSystemAudit } from "../audit/service.ts";
import { forgetOrgUsage } from "../usage/quotas.ts";
import type { PlanInterval } from "./providers/provider.ts";
import { changePlan, completeCheckoutFromProvider, endSubscriptionIn } from "./service.ts";

/** An id Stripe may give as a string or as the expanded object. */
function idOf(value: string | { id: string } | null | undefined): string | null {
  if (!value) return null;
  return typeof value === "string" ? value : value.id;
}

const seconds = (value: number | null | undefined) => (value ? new Date(value * 1000) : undefined);

/** Stripe's subscription states, as Plinth's three. */
function statusOf(status: string): "active" | "past_due" | "canceled" {
  if (status === "active" || status === "trialing") return "active";
  if (status === "canceled" || status === "incomplete_expired") return "canceled";
  return "past_due";
}

/**
 * Verifies and applies one Stripe webhook delivery. A bad or stale signature is 400 and nothing
 * is applied. The event's id is recorded in the transaction that applies it, so a delivery Stripe
 * repeats is applied once; subscription changes older than the last one applied are ignored, so
 * events arriving out of order cannot undo a newer state. An event about a customer Plinth does
 * not know is logged and acknowledged, so that Stripe stops sending it.
 */
export async function applyStripeWebhook(deps: Deps, payload: string, signature: string | undefined): Promise<void> {
  const settings = deps.config.billing.stripe;
  if (deps.config.billing.provider !== "stripe" || !settings)
    throw new NotFoundError("Stripe billing is not configured");
  let event: Stripe.Event;
  try {
    event = Stripe.webhooks.constructEvent(payload, signature ?? "", settings.webhookSecret);
  } catch {
    throw new BadRequestError("invalid Stripe signature (or too old a timestamp)");
  }
  const touched = new Set<string>();
  await deps.db.transaction().execute(async (trx) => {
    const recorded = await trx
      .insertInto("billing_events")
      .values({ provider: "stripe", event_id: event.id, received_at: deps.clock.now().toISOString() })
      .onConflict((oc) => oc.columns(["provider", "event_id"]).doNothing())
      .executeTakeFirst();
    if (Number(recorded.numInsertedOrUpdatedRows ?? 0) === 0) return;
    const orgId = await applyEvent(trx, deps, event, settings.prices);
    if (orgId === undefined)
      deps.log.warn({ eventId: event.id, type: event.type }, "stripe: event for an unknown customer");
    else if (orgId) touched.add(orgId);
  });
  for (const orgId of touched) forgetOrgUsage(orgId);
}

/** Applies the event in `trx`; returns its org, undefined when no org is found, null when the event changes nothing. */
async function applyEvent(
  trx: Db,
  deps: Deps,
  event: Stripe.Event,
  prices: Record<string, string>,
): Promise<string | null | undefined> {
  switch (event.type) {
    case "checkout.session.completed":
    case "checkout.session.async_payment_succeeded": {
      const session = event.data.object as Stripe.Checkout.Session;
      // `no_payment_required` too: a 100%-discount or trial checkout is settled without a payment.
      if (session.payment_status !== "paid" && session.payment_status !== "no_payment_required") return null;
      const checkoutId = session.metadata?.checkoutId;
      if (!checkoutId) return undefined;
      const completed = await completeCheckoutFromProvider(trx, deps, checkoutId, {
        customerId: idOf(session.customer),
        providerSubscriptionId: idOf(session.subscription),
        providerInvoices: session.mode === "subscription",
        paymentRef: session.id,
        ...(session.amount_total !== null ? { amountCents: session.amount_total } : {}),
      });
      if (completed) return completed;
      const known = await trx.selectFrom("checkouts").select("org_id").where("id", "=", checkoutId).executeTakeFirst();
      return known ? null : undefined;
    }
    case "customer.subscription.created":
    case "customer.subscription.updated":
      return applySubscription(trx, deps, event, event.data.object as Stripe.Subscription, prices);
    case "customer.subscription.deleted": {
      const subscription = event.data.object as Stripe.Subscription;
      const orgId = await orgOfSubscription(trx, subscription);
      if (!orgId) return undefined;
      const current = await trx
        .selectFrom("subscriptions")
        .select("provider_subscription_id")
        .where("org_id", "=", orgId)
        .executeTakeFirst();
      if (current?.provider_subscription_id && current.provider_subscription_id !== subscription.id) return null;
      await endSubscriptionIn(trx, deps, orgId, null);
      return orgId;
    }
    case "invoice.paid":
    case "invoice.payment_failed":
      return applyInvoice(trx, deps, event, event.data.object as Stripe.Invoice);
    default:
      return null;
  }
}

/** The org of a Stripe subscription: by its id, its metadata (set at checkout) or its customer. */
async function orgOfSubscription(trx: Db, subscription: Stripe.Subscription): Promise<string | null> {
  const byId = await trx
    .selectFrom("subscriptions")
    .select("org_id")
    .where("provider_subscription_id", "=", subscription.id)
    .executeTakeFirst();
  if (byId) return byId.org_id;
  return orgOf(trx, subscription.metadata?.orgId, idOf(subscription.customer));
}

async function orgOf(trx: Db, metadataOrgId: string | undefined, customerId: string | null): Promise<string | null> {
  if (metadataOrgId) {
    const org = await trx
      .selectFrom("orgs")
      .select("id")
      .where("id", "=", metadataOrgId)
      .where("deleted_at", "is", null)
      .executeTakeFirst();
    if (org) return org.id;
  }
  if (!customerId) return null;
  const customer = await trx
    .selectFrom("billing_customers")
    .select("org_id")
    .where("customer_id", "=", customerId)
    .executeTakeFirst();
  return customer?.org_id ?? null;
}

/** The plan and interval of a Stripe price id, by the configured prices. */
function planOfPrice(prices: Record<string, string>, priceId: string | undefined) {
  const key = Object.entries(prices).find(([name, id]) => id === priceId && !name.startsWith("pack:"))?.[0];
  if (!key) return null;
  const [planId, interval] = key.split(":") as [string, PlanInterval];
  return { planId, interval };
}

/**
 * Records the subscription; the org moves to its plan only while Stripe says it is paid for
 * (`active`, `trialing`). An `incomplete`, `past_due`, `unpaid` or `paused` one is kept as
 * past due without changing the plan: its first paid invoice moves the org (applyInvoice).
 */
async function applySubscription(
  trx: Db,
  deps: Deps,
  event: Stripe.Event,
  subscription: Stripe.Subscription,
  prices: Record<string, string>,
): Promise<string | null | undefined> {
  const orgId = await orgOfSubscription(trx, subscription);
  if (!orgId) return undefined;
  const current = await trx.selectFrom("subscriptions").selectAll().where("org_id", "=", orgId).executeTakeFirst();
  if (current && Number(current.provider_event_at) > event.created) return null;
  const item = subscription.items?.data?.[0];
  const plan = planOfPrice(prices, item?.price?.id);
  const legacy = subscription as unknown as { current_period_start?: number; current_period_end?: number };
  const start = seconds(item?.current_period_start ?? legacy.current_period_start);
  const end = seconds(item?.current_period_end ?? legacy.current_period_end);
  const now = deps.clock.now().toISOString();
  const org = await trx.selectFrom("orgs").select("plan_id").where("id", "=", orgId).executeTakeFirstOrThrow();
  const planId = plan?.planId ?? current?.plan_id ?? org.plan_id;
  const status = statusOf(subscription.status);
  const row = {
    plan_id: planId,
    interval: plan?.interval ?? current?.interval ?? "monthly",
    status,
    current_period_start: start?.toISOString() ?? current?.current_period_start ?? now,
    current_period_end: end?.toISOString() ?? current?.current_period_end ?? now,
    cancel_at_period_end: subscription.cancel_at_period_end ? 1 : 0,
    provider: "stripe",
    provider_subscription_id: subscription.id,
    provider_event_at: event.created,
    updated_at: now,
  };
  await trx
    .insertInto("subscriptions")
    .values({ org_id: orgId, ...row, created_at: now })
    .onConflict((oc) => oc.column("org_id").doUpdateSet(row))
    .execute();
  if (status === "canceled") {
    await endSubscriptionIn(trx, deps, orgId, null);
    return orgId;
  }
  if (status === "active") {
    await moveToPlan(trx, deps, { orgId, from: org.plan_id, to: planId, interval: row.interval });
  }
  return orgId;
}

/** Moves the org to its paid subscription's plan, when that is another: `billing.plan_change` and an audit row. */
async function moveToPlan(
  trx: Db,
  deps: Deps,
  change: { orgId: string; from: string; to: string; interval: string },
): Promise<void> {
  if (change.to === change.from) return;
  await changePlan(trx, deps, change);
  await recordSystemAudit(trx, deps, {
    orgId: change.orgId,
    action: "billing.plan_changed",
    target: { type: "subscription", id: change.orgId },
    data: { from: change.from, to: change.to, interval: change.interval, source: "stripe" },
  });
}

/**
 * A paid invoice is recorded (or updated) by its Stripe id and makes its subscription active, on
 * its plan; a failed payment leaves it open and the subscription past due.
 */
async function applyInvoice(
  trx: Db,
  deps: Deps,
  event: Stripe.Event,
  invoice: Stripe.Invoice,
): Promise<string | null | undefined> {
  const details = invoice.parent?.subscription_details;
  const subscriptionId = idOf(details?.subscription as string | { id: string } | undefined);
  let orgId: string | null = null;
  if (subscriptionId) {
    const bySubscription = await trx
      .selectFrom("subscriptions")
      .select("org_id")
      .where("provider_subscription_id", "=", subscriptionId)
      .executeTakeFirst();
    orgId = bySubscription?.org_id ?? null;
  }
  orgId ??= await orgOf(trx, details?.metadata?.orgId ?? invoice.metadata?.orgId, idOf(invoice.customer));
  if (!orgId) return undefined;
  const paid = event.type === "invoice.paid";
  const lines = (invoice.lines?.data ?? []).map((line) => ({
    description: line.description ?? "Plinth subscription",
    amountCents: line.amount,
  }));
  const values = {
    status: paid ? "paid" : "open",
    amount_cents: paid ? invoice.amount_paid : invoice.amount_due,
    currency: invoice.currency,
    number: invoice.number ?? invoice.id ?? "",
    period_start: (
      seconds(invoice.lines?.data?.[0]?.period?.start) ??
      seconds(invoice.period_start) ??
      new Date()
    ).toISOString(),
    period_end: (
      seconds(invoice.lines?.data?.[0]?.period?.end) ??
      seconds(invoice.period_end) ??
      new Date()
    ).toISOString(),
    lines: toJsonColumn(lines) as string,
  };
  await trx
    .insertInto("invoices")
    .values({
      id: newId("invc", deps.clock.now()),
      org_id: orgId,
      provider_ref: invoice.id ?? null,
      created_at: deps.clock.now().toISOString(),
      ...values,
    })
    .onConflict((oc) =>
      // A failure reported after the payment went through leaves the invoice paid.
      oc.column("provider_ref").doUpdateSet(paid ? values : { amount_cents: values.amount_cents }),
    )
    .execute();
  if (subscriptionId) {
    const subscription = await trx
      .updateTable("subscriptions")
      .set({ status: paid ? "active" : "past_due", updated_at: deps.clock.now().toISOString() })
      .where("org_id", "=", orgId)
      .where("provider_subscription_id", "=", subscriptionId)
      .where("status", "!=", "canceled")
      .where("provider_event_at", "<=", event.created)
      .returning(["plan_id", "interval"])
      .executeTakeFirst();
    // How a subscription that began unpaid (`incomplete`) gets its plan.
    if (paid && subscription) {
      const org = await trx.selectFrom("orgs").select("plan_id").where("id", "=", orgId).executeTakeFirstOrThrow();
      await moveToPlan(trx, deps, {
        orgId,
        from: org.plan_id,
        to: subscription.plan_id,
        interval: subscription.interval,
      });
    }
  }
  return orgId;
}
