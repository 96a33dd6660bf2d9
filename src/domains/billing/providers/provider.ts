import type { PackType } from "../entitlements.ts";

export const BILLING_PROVIDERS = ["none", "test", "stripe"] as const;
export type BillingProviderName = (typeof BILLING_PROVIDERS)[number];

export const PLAN_INTERVALS = ["monthly", "annual"] as const;
export type PlanInterval = (typeof PLAN_INTERVALS)[number];

/** A checkout Plinth has recorded and asks the provider to take payment for. */
export interface CheckoutRequest {
  checkoutId: string;
  orgId: string;
  kind: "plan" | "pack";
  planId: string | null;
  interval: PlanInterval | null;
  packType: PackType | null;
  /** The org's customer at the provider, when it has one already. */
  customerId: string | null;
  expiresAt: Date;
}

/**
 * A payment provider (DESIGN §11). Plinth asks it to take payments and to stop renewals; what it
 * reports back (a completed checkout, a renewal, a failed payment) arrives through Plinth's own
 * routes and is applied by the billing service, whichever provider it came from.
 */
export interface BillingProvider {
  readonly name: BillingProviderName;
  /** Where the payer goes to pay; throws ConflictError when billing is not configured. */
  startCheckout(request: CheckoutRequest): Promise<{ url: string; providerRef: string | null }>;
  /** Stops the subscription renewing: it runs to the end of its period. */
  cancelAtPeriodEnd(subscription: { providerSubscriptionId: string | null }): Promise<void>;
}
