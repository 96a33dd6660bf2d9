import { ConflictError } from "../../../errors.ts";
import type { BillingProvider } from "./provider.ts";

/** No payments (the default): every org stays on the plan the operator gives it. */
export function noBilling(): BillingProvider {
  return {
    name: "none",
    async startCheckout() {
      throw new ConflictError("billing is not configured");
    },
    async cancelAtPeriodEnd() {},
  };
}
