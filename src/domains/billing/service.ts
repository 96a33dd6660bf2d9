import type { z } from "@hono/zod-openapi";
import type { Selectable } from "kysely";
import type { Db } from "../../db/database.ts";
import type { CheckoutsTable, InvoicesTable } from "../../db/schema.ts";
import type { Deps } from "../../deps.ts";
import { ConflictError, NotFoundError, UnavailableError } from "../../errors.ts";
import { isIdOf, newId } from "../../lib/ids.ts";
import { fromJsonColumn, toJsonColumn } from "../../lib/json.ts";
import { type AuditActor, recordAudit, recordAuditAs, recordSystemAudit, SYSTEM_ACTOR } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { planOf } from "../plans/service.ts";
import { forgetOrgUsage } from "../usage/quotas.ts";
import { emitOrgEvent } from "../webhooks/events.ts";
import {
  entitlementsOf,
  PACK_AMOUNTS,
  PACK_PRICES_CENTS,
  type PackType,
  type SubscriptionRow,
} from "./entitlements.ts";
import { billingProvider } from "./providers/index.ts";
import type { PlanInterval } from "./providers/provider.ts";
import type { CheckoutInput, PackCheckoutInput } from "./schemas.ts";

/** How long a checkout may be paid. */
const CHECKOUT_TTL_MS = 24 * 60 * 60 * 1000;

export interface Subscription {
  planId: string;
  interval: PlanInterval;
  status: "active" | "past_due" | "canceled";
  currentPeriodStart: string;
  currentPeriodEnd: string;
  cancelAtPeriodEnd: boolean;
  provider: "none" | "test" | "stripe";
}

export function toSubscription(row: SubscriptionRow): Subscription {
  return {
    planId: row.plan_id,
    interval: row.interval as PlanInterval,
    status: row.status as Subscription["status"],
    currentPeriodStart: row.current_period_start,
    currentPeriodEnd: row.current_period_end,
    cancelAtPeriodEnd: Boolean(Number(row.cancel_at_period_end)),
    provider: row.provider as Subscription["provider"],
  };
}

export type CheckoutRow = Selectable<CheckoutsTable>;

export function toCheckout(row: CheckoutRow) {
  return {
    id: row.id,
    url: row.url,
    kind: row.kind as "plan" | "pack",
    ...(row.plan_id ? { plan: row.plan_id } : {}),
    ...(row.interval ? { interval: row.interval as PlanInterval } : {}),
    ...(row.pack_type ? { packType: row.pack_type as PackType } : {}),
    status: row.status as "open" | "completed" | "expired",
    expiresAt: row.expires_at,
  };
}

export function toInvoice(row: Selectable<InvoicesTable>) {
  return {
    id: row.id,
    number: row.number,
    status: row.status as "paid" | "open" | "void",
    amountCents: Number(row.amount_cents),
    currency: row.currency,
    periodStart: row.period_start,
    periodEnd: row.period_end,
    lines: fromJsonColumn<{ description: string; amountCents: number }[]>(row.lines, []),
    createdAt: row.created_at,
  };
}

async function findSubscription(db: Db, orgId: string): Promise<SubscriptionRow | undefined> {
  return db.selectFrom("subscriptions").selectAll().where("org_id", "=", orgId).executeTakeFirst();
}

export async function getSubscription({ ctx }: { ctx: OrgCtx }): Promise<{ subscription: Subscription | null }> {
  authorize(ctx, "billing:read");
  const row = await findSubscription(ctx.deps.db, ctx.org.id);
  return { subscription: row ? toSubscription(row) : null };
}

export async function listInvoices({
  ctx,
  query,
}: {
  ctx: OrgCtx;
  query: { limit?: number; offset?: number };
}): Promise<{ invoices: ReturnType<typeof toInvoice>[] }> {
  authorize(ctx, "billing:read");
  const rows = await ctx.deps.db
    .selectFrom("invoices")
    .selectAll()
    .where("org_id", "=", ctx.org.id)
    .orderBy("created_at", "desc")
    .orderBy("id", "desc")
    .limit(query.limit ?? 50)
    .offset(query.offset ?? 0)
    .execute();
  return { invoices: rows.map(toInvoice) };
}

/** Starts a checkout of a plan or a pack: the provider is asked first, then the checkout is recorded with its URL. */
async function startCheckout(
  ctx: OrgCtx,
  order: { kind: "plan"; planId: string; interval: PlanInterval } | { kind: "pack"; packType: PackType },
): Promise<{ checkout: ReturnType<typeof toCheckout> }> {
  const { deps } = ctx;
  const provider = billingProvider(deps);
  const now = deps.clock.now();
  const id = newId("chk", now);
  const expiresAt = new Date(now.getTime() + CHECKOUT_TTL_MS);
  const customer = await deps.db
    .selectFrom("billing_customers")
    .select("customer_id")
    .where("org_id", "=", ctx.org.id)
    .where("provider", "=", provider.name)
    .executeTakeFirst();
  let started: { url: string; providerRef: string | null };
  try {
    started = await provider.startCheckout({
      checkoutId: id,
      orgId: ctx.org.id,
      kind: order.kind,
      planId: order.kind === "plan" ? order.planId : null,
      interval: order.kind === "plan" ? order.interval : null,
      packType: order.kind === "pack" ? order.packType : null,
      customerId: customer?.customer_id ?? null,
      expiresAt,
    });
  } catch (error) {
    if (error instanceof ConflictError) throw error;
    deps.log.error({ err: error, orgId: ctx.org.id }, "billing: the payment provider refused a checkout");
    throw new UnavailableError("the payment provider could not be reached; try again");
  }
  const row: CheckoutRow = {
    id,
    org_id: ctx.org.id,
    kind: order.kind,
    plan_id: order.kind === "plan" ? order.planId : null,
    interval: order.kind === "plan" ? order.interval : null,
    pack_type: order.kind === "pack" ? order.packType : null,
    status: "open",
    url: started.url,
    provider: provider.name,
    provider_ref: started.providerRef,
    expires_at: expiresAt.toISOString(),
    completed_at: null,
    created_by: ctx.principal.type === "account" ? ctx.principal.accountId : ctx.principal.keyId,
    created_at: now.toISOString(),
  };
  await inOrgTransaction(ctx, async (trx) => {
    await trx.insertInto("checkouts").values(row).execute();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "billing.checkout_started",
      target: { type: "checkout", id },
      data: {
        kind: order.kind,
        ...(order.kind === "plan" ? { plan: order.planId, interval: order.interval } : { packType: order.packType }),
      },
    });
  });
  return { checkout: toCheckout(row) };
}

export async function createCheckout({
  ctx,
  input,
}: {
  ctx: OrgCtx;
  input: z.infer<typeof CheckoutInput>;
}): Promise<{ checkout: ReturnType<typeof toCheckout> }> {
  authorize(ctx, "billing:manage");
  if (!ctx.deps.config.plans.some((plan) => plan.id === input.plan)) {
    throw new ConflictError(`this deployment's catalog has no plan '${input.plan}'`);
  }
  const current = await findSubscription(ctx.deps.db, ctx.org.id);
  if (
    current &&
    current.status !== "canceled" &&
    current.plan_id === input.plan &&
    current.interval === input.interval &&
    !Number(current.cancel_at_period_end)
  ) {
    throw new ConflictError(`the org is already subscribed to ${input.plan} (${input.interval})`);
  }
  return startCheckout(ctx, { kind: "plan", planId: input.plan, interval: input.interval });
}

export async function createPackCheckout({
  ctx,
  input,
}: {
  ctx: OrgCtx;
  input: z.infer<typeof PackCheckoutInput>;
}): Promise<{ checkout: ReturnType<typeof toCheckout> }> {
  authorize(ctx, "billing:manage");
  return startCheckout(ctx, { kind: "pack", packType: input.type });
}

/** Cancels at the end of the period: the org keeps its plan until then, then returns to the default plan. */
export async function cancelSubscription({ ctx }: { ctx: OrgCtx }): Promise<{ subscription: Subscription }> {
  authorize(ctx, "billing:manage");
  const { deps } = ctx;
  const current = await findSubscription(deps.db, ctx.org.id);
  if (!current || current.status === "canceled") throw new ConflictError("the org has no subscription to cancel");
  if (Number(current.cancel_at_period_end)) return { subscription: toSubscription(current) };
  try {
    await billingProvider(deps, current.provider).cancelAtPeriodEnd({
      providerSubscriptionId: current.provider_subscription_id,
    });
  } catch (error) {
    deps.log.error({ err: error, orgId: ctx.org.id }, "billing: the payment provider refused a cancellation");
    throw new UnavailableError("the payment provider could not be reached; try again");
  }
  const updated = await inOrgTransaction(ctx, async (trx) => {
    const row = await trx
      .updateTable("subscriptions")
      .set({ cancel_at_period_end: 1, updated_at: deps.clock.now().toISOString() })
      .where("org_id", "=", ctx.org.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordAudit(trx, ctx, {
      orgId: ctx.org.id,
      action: "billing.subscription_canceled",
      target: { type: "subscription", id: ctx.org.id },
      data: { planId: row.plan_id, endsAt: row.current_period_end },
    });
    return row;
  });
  return { subscription: toSubscription(updated) };
}

/** The end of a period of `interval` that starts at `start`. */
export function periodEnd(start: Date, interval: PlanInterval): Date {
  const end = new Date(start);
  if (interval === "annual") end.setUTCFullYear(end.getUTCFullYear() + 1);
  else end.setUTCMonth(end.getUTCMonth() + 1);
  return end;
}

/** What the provider reports about a completed payment, where it knows more than the checkout. */
export interface CompletedPayment {
  providerSubscriptionId?: string | null;
  customerId?: string | null;
  periodStart?: Date;
  periodEnd?: Date;
  /** The provider sends the plan's invoices as events of their own (Stripe's `invoice.paid`): none is written here. */
  providerInvoices?: boolean;
  /** The provider's id of a one-time payment (a pack's), kept on its invoice. */
  paymentRef?: string | null;
  amountCents?: number;
}

/**
 * Completes a test-provider checkout paid by `actor`, once: 409 when it is already completed or
 * has expired (it is marked so), 404 when it is not found.
 */
export async function completeCheckout(
  deps: Deps,
  checkoutId: string,
  actor: { actor: AuditActor; ip: string | null },
): Promise<CheckoutRow> {
  const now = deps.clock.now();
  const result = await deps.db.transaction().execute(async (trx) => {
    const checkout = await trx.selectFrom("checkouts").selectAll().where("id", "=", checkoutId).executeTakeFirst();
    if (!checkout) throw new NotFoundError("checkout not found");
    if (checkout.status === "completed") throw new ConflictError("this checkout is already completed");
    if (checkout.status === "expired" || checkout.expires_at <= now.toISOString()) {
      await trx.updateTable("checkouts").set({ status: "expired" }).where("id", "=", checkoutId).execute();
      return null;
    }
    const claimed = await claimCheckout(trx, deps, checkoutId);
    if (!claimed) throw new ConflictError("this checkout is already completed");
    await applyCheckout(trx, deps, claimed, actor, {});
    return claimed;
  });
  if (!result) throw new ConflictError("this checkout has expired");
  forgetOrgUsage(result.org_id);
  return result;
}

/**
 * Completes a checkout the provider reports paid, in the caller's transaction (the one that
 * records the provider's event): once, whatever its local expiry (the payment was taken). Returns
 * the org, or null when the checkout is unknown or was applied already.
 */
export async function completeCheckoutFromProvider(
  trx: Db,
  deps: Deps,
  checkoutId: string,
  payment: CompletedPayment,
): Promise<string | null> {
  const claimed = await claimCheckout(trx, deps, checkoutId);
  if (!claimed) return null;
  await applyCheckout(trx, deps, claimed, { actor: SYSTEM_ACTOR, ip: null }, payment);
  return claimed.org_id;
}

/** Marks an open checkout completed; undefined when it is not open (completed already, or unknown). */
function claimCheckout(trx: Db, deps: Deps, checkoutId: string): Promise<CheckoutRow | undefined> {
  return trx
    .updateTable("checkouts")
    .set({ status: "completed", completed_at: deps.clock.now().toISOString() })
    .where("id", "=", checkoutId)
    .where("status", "in", ["open", "expired"])
    .returningAll()
    .executeTakeFirst();
}

/**
 * What a paid checkout does, in `trx`: its plan becomes the org's subscription and plan
 * (`billing.plan_change`, with its notification), or its pack adds to the current period; a paid
 * invoice unless the provider records its own; an audit row.
 */
async function applyCheckout(
  trx: Db,
  deps: Deps,
  checkout: CheckoutRow,
  actor: { actor: AuditActor; ip: string | null },
  payment: CompletedPayment,
): Promise<void> {
  const now = deps.clock.now();
  const org = await trx
    .selectFrom("orgs")
    .select(["id", "plan_id"])
    .where("id", "=", checkout.org_id)
    .where("deleted_at", "is", null)
    .executeTakeFirst();
  if (!org) throw new NotFoundError("checkout not found");
  if (payment.customerId) {
    const customerId = payment.customerId;
    await trx
      .insertInto("billing_customers")
      .values({ org_id: org.id, provider: checkout.provider, customer_id: customerId })
      .onConflict((oc) => oc.column("org_id").doUpdateSet({ provider: checkout.provider, customer_id: customerId }))
      .execute();
  }
  const audit = (action: string, data: Record<string, unknown>) =>
    recordAuditAs(trx, deps, actor.actor, actor.ip, {
      orgId: org.id,
      action,
      target: { type: "checkout", id: checkout.id },
      data,
    });
  if (checkout.kind === "plan") {
    const planId = checkout.plan_id as string;
    const interval = checkout.interval as PlanInterval;
    const plan = planOf(deps.config, planId);
    const start = payment.periodStart ?? now;
    const end = payment.periodEnd ?? periodEnd(start, interval);
    const row = {
      plan_id: planId,
      interval,
      status: "active",
      current_period_start: start.toISOString(),
      current_period_end: end.toISOString(),
      cancel_at_period_end: 0,
      provider: checkout.provider,
      provider_subscription_id: payment.providerSubscriptionId ?? null,
      updated_at: now.toISOString(),
    };
    await trx
      .insertInto("subscriptions")
      .values({ org_id: org.id, ...row, provider_event_at: 0, created_at: now.toISOString() })
      .onConflict((oc) => oc.column("org_id").doUpdateSet(row))
      .execute();
    if (!payment.providerInvoices) {
      const amount = payment.amountCents ?? plan.prices[interval];
      await writeInvoice(trx, deps, {
        orgId: org.id,
        amountCents: amount,
        periodStart: start,
        periodEnd: end,
        lines: [{ description: `${plan.name} plan, ${interval}`, amountCents: amount }],
      });
    }
    await changePlan(trx, deps, { orgId: org.id, from: org.plan_id, to: planId, interval });
    await audit("billing.plan_changed", { from: org.plan_id, to: planId, interval });
    return;
  }
  const type = checkout.pack_type as PackType;
  const { periodStart, periodEnd: end } = await entitlementsOf({ ...deps, db: trx }, org);
  await trx
    .insertInto("packs")
    .values({
      id: newId("pck", now),
      org_id: org.id,
      type,
      amount: PACK_AMOUNTS[type],
      period_start: periodStart.toISOString(),
      period_end: end.toISOString(),
      checkout_id: checkout.id,
      created_at: now.toISOString(),
    })
    .execute();
  const amount = payment.amountCents ?? PACK_PRICES_CENTS[type];
  await writeInvoice(trx, deps, {
    orgId: org.id,
    amountCents: amount,
    periodStart,
    periodEnd: end,
    lines: [{ description: `${type} pack`, amountCents: amount }],
    providerRef: payment.paymentRef ?? null,
  });
  await audit("billing.pack_purchased", { type, amount: PACK_AMOUNTS[type] });
}

/** Moves the org to another plan: `billing.plan_change` (deliveries and the admins' notification) in `trx`. */
export async function changePlan(
  trx: Db,
  deps: Deps,
  change: { orgId: string; from: string; to: string; interval: string | null },
): Promise<void> {
  await trx.updateTable("orgs").set({ plan_id: change.to }).where("id", "=", change.orgId).execute();
  if (change.from === change.to) return;
  await emitOrgEvent(trx, deps, {
    orgId: change.orgId,
    kind: "billing.plan_change",
    payload: { from: change.from, to: change.to, interval: change.interval },
  });
}

/** Writes an invoice; `status` paid unless said, numbered per org in order. */
export async function writeInvoice(
  trx: Db,
  deps: Deps,
  invoice: {
    orgId: string;
    amountCents: number;
    periodStart: Date;
    periodEnd: Date;
    lines: { description: string; amountCents: number }[];
    status?: "paid" | "open" | "void";
    number?: string;
    currency?: string;
    providerRef?: string | null;
  },
): Promise<void> {
  const now = deps.clock.now();
  const count = await trx
    .selectFrom("invoices")
    .select((eb) => eb.fn.countAll<number | string>().as("n"))
    .where("org_id", "=", invoice.orgId)
    .executeTakeFirst();
  const number =
    invoice.number ??
    `PL-${invoice.orgId.slice(-6).toUpperCase()}-${String(Number(count?.n ?? 0) + 1).padStart(4, "0")}`;
  await trx
    .insertInto("invoices")
    .values({
      id: newId("invc", now),
      org_id: invoice.orgId,
      number,
      status: invoice.status ?? "paid",
      amount_cents: invoice.amountCents,
      currency: invoice.currency ?? "usd",
      period_start: invoice.periodStart.toISOString(),
      period_end: invoice.periodEnd.toISOString(),
      lines: toJsonColumn(invoice.lines) as string,
      provider_ref: invoice.providerRef ?? null,
      created_at: now.toISOString(),
    })
    .execute();
}

/** Where the test provider's checkout is paid: by an admin of its org (another org's checkout is not found). */
export async function findCheckoutForPayment(deps: Deps, id: string): Promise<CheckoutRow> {
  const row = isIdOf("chk", id)
    ? await deps.db.selectFrom("checkouts").selectAll().where("id", "=", id).executeTakeFirst()
    : undefined;
  if (row?.provider !== "test") throw new NotFoundError("checkout not found");
  return row;
}

/**
 * The `billing.periods` job (every minute, on the injectable clock): subscriptions cancelled at
 * their period's end return to the default plan; test-provider subscriptions renew (a paid
 * invoice, the next period); checkouts past their time expire. Stripe's renewals arrive as events.
 */
export async function settleBillingPeriods(deps: Deps): Promise<void> {
  const now = deps.clock.now();
  const nowIso = now.toISOString();
  const due = await deps.db
    .selectFrom("subscriptions")
    .innerJoin("orgs", "orgs.id", "subscriptions.org_id")
    .selectAll("subscriptions")
    .select("orgs.plan_id as org_plan_id")
    .where("subscriptions.status", "!=", "canceled")
    .where("subscriptions.current_period_end", "<=", nowIso)
    .where("orgs.deleted_at", "is", null)
    .execute();
  for (const subscription of due) {
    try {
      if (Number(subscription.cancel_at_period_end)) {
        await endSubscription(deps, subscription.org_id, subscription.current_period_end);
      } else if (subscription.provider === "test") {
        await renewTestSubscription(deps, subscription);
      }
    } catch (error) {
      deps.log.error({ err: error, orgId: subscription.org_id }, "billing: settling a period failed");
    }
  }
  await deps.db
    .updateTable("checkouts")
    .set({ status: "expired" })
    .where("status", "=", "open")
    .where("expires_at", "<=", nowIso)
    .execute();
}

/** Ends the org's subscription (cancelled at period end, or deleted at the provider): back to the default plan. */
export async function endSubscription(deps: Deps, orgId: string, periodEndIso: string | null): Promise<void> {
  await deps.db.transaction().execute((trx) => endSubscriptionIn(trx, deps, orgId, periodEndIso));
  forgetOrgUsage(orgId);
}

/**
 * `endSubscription` in the caller's transaction. `periodEndIso`: only the subscription of that
 * period (a renewal that overlapped is left alone). Does nothing when it has ended already.
 */
export async function endSubscriptionIn(
  trx: Db,
  deps: Deps,
  orgId: string,
  periodEndIso: string | null,
): Promise<void> {
  const now = deps.clock.now();
  let ended = trx
    .updateTable("subscriptions")
    .set({ status: "canceled", cancel_at_period_end: 0, updated_at: now.toISOString() })
    .where("org_id", "=", orgId)
    .where("status", "!=", "canceled");
  if (periodEndIso) ended = ended.where("current_period_end", "=", periodEndIso);
  const row = await ended.returningAll().executeTakeFirst();
  if (!row) return;
  const org = await trx.selectFrom("orgs").select("plan_id").where("id", "=", orgId).executeTakeFirstOrThrow();
  const to = deps.config.defaultPlan;
  await changePlan(trx, deps, { orgId, from: org.plan_id, to, interval: null });
  await recordSystemAudit(trx, deps, {
    orgId,
    action: "billing.plan_changed",
    target: { type: "subscription", id: orgId },
    data: { from: org.plan_id, to, reason: "subscription ended" },
  });
}

async function renewTestSubscription(deps: Deps, subscription: SubscriptionRow): Promise<void> {
  await deps.db.transaction().execute(async (trx) => {
    const start = new Date(subscription.current_period_end);
    const end = periodEnd(start, subscription.interval as PlanInterval);
    const renewed = await trx
      .updateTable("subscriptions")
      .set({
        current_period_start: start.toISOString(),
        current_period_end: end.toISOString(),
        updated_at: deps.clock.now().toISOString(),
      })
      .where("org_id", "=", subscription.org_id)
      .where("current_period_end", "=", subscription.current_period_end)
      .executeTakeFirst();
    if (Number(renewed.numUpdatedRows) === 0) return;
    const plan = planOf(deps.config, subscription.plan_id);
    const price = plan.prices[subscription.interval as PlanInterval];
    await writeInvoice(trx, deps, {
      orgId: subscription.org_id,
      amountCents: price,
      periodStart: start,
      periodEnd: end,
      lines: [{ description: `${plan.name} plan, ${subscription.interval} (renewal)`, amountCents: price }],
    });
  });
}
