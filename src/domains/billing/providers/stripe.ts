import Stripe from "stripe";
import type { Config } from "../../../config.ts";
import { ConflictError } from "../../../errors.ts";
import type { BillingProvider } from "./provider.ts";

type StripeSettings = NonNullable<Config["billing"]["stripe"]>;

/** The Stripe client of these settings (`STRIPE_API_BASE` points it at a stand-in in tests). */
export function stripeClient(settings: StripeSettings): Stripe {
  const base = settings.apiBase ? new URL(settings.apiBase) : undefined;
  return new Stripe(settings.secretKey, {
    maxNetworkRetries: 1,
    timeout: 10_000,
    ...(base
      ? {
          host: base.hostname,
          port: base.port || (base.protocol === "https:" ? 443 : 80),
          protocol: base.protocol === "https:" ? "https" : "http",
        }
      : {}),
  });
}

/**
 * Stripe Checkout: a plan is a subscription-mode session on the plan's price for the interval, a
 * pack a payment-mode session on the pack's price; both carry the checkout's id in their metadata,
 * which is how the signed webhook that reports the payment finds it (billing/stripe-events.ts).
 */
export function stripeBilling(settings: StripeSettings, publicUrl: string): BillingProvider {
  const stripe = stripeClient(settings);
  return {
    name: "stripe",
    async startCheckout(request) {
      const priceKey = request.kind === "plan" ? `${request.planId}:${request.interval}` : `pack:${request.packType}`;
      const price = settings.prices[priceKey];
      if (!price) throw new ConflictError(`billing has no Stripe price for ${priceKey.replace(":", " ")}`);
      const metadata = { checkoutId: request.checkoutId, orgId: request.orgId };
      const session = await stripe.checkout.sessions.create({
        mode: request.kind === "plan" ? "subscription" : "payment",
        line_items: [{ price, quantity: 1 }],
        client_reference_id: request.orgId,
        metadata,
        ...(request.kind === "plan" ? { subscription_data: { metadata } } : {}),
        ...(request.customerId ? { customer: request.customerId } : {}),
        success_url: `${publicUrl}/?checkout=${request.checkoutId}`,
        cancel_url: `${publicUrl}/?checkout=${request.checkoutId}&canceled=1`,
        expires_at: Math.floor(request.expiresAt.getTime() / 1000),
      });
      if (!session.url) throw new Error("Stripe returned a checkout session without a url");
      return { url: session.url, providerRef: session.id };
    },
    async cancelAtPeriodEnd({ providerSubscriptionId }) {
      if (!providerSubscriptionId) return;
      await stripe.subscriptions.update(providerSubscriptionId, { cancel_at_period_end: true });
    },
  };
}
