import type { BillingProvider } from "./provider.ts";

/**
 * Payments that complete inside Plinth, for development and tests: a checkout's URL is Plinth's
 * own `POST /api/billing/test-checkout/{id}`, which an admin of the org calls to pay. Renewals
 * happen at the end of each period (the `billing.periods` job).
 */
export function testBilling(publicUrl: string): BillingProvider {
  return {
    name: "test",
    async startCheckout({ checkoutId }) {
      return { url: `${publicUrl}/api/billing/test-checkout/${checkoutId}`, providerRef: null };
    },
    async cancelAtPeriodEnd() {},
  };
}
