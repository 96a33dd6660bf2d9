import type { Deps } from "../../../deps.ts";
import { noBilling } from "./none.ts";
import type { BillingProvider } from "./provider.ts";
import { stripeBilling } from "./stripe.ts";
import { testBilling } from "./test.ts";

const built = new WeakMap<object, Map<string, BillingProvider>>();

/**
 * The deployment's payment provider (BILLING_PROVIDER), or the one named (a subscription is
 * managed by the provider it was paid through), built once per configuration.
 */
export function billingProvider(
  deps: Pick<Deps, "config">,
  name: string = deps.config.billing.provider,
): BillingProvider {
  let providers = built.get(deps.config);
  if (!providers) {
    providers = new Map();
    built.set(deps.config, providers);
  }
  let provider = providers.get(name);
  if (!provider) {
    const { billing, publicUrl } = deps.config;
    provider =
      name === "test"
        ? testBilling(publicUrl)
        : name === "stripe" && billing.stripe
          ? stripeBilling(billing.stripe, publicUrl)
          : noBilling();
    providers.set(name, provider);
  }
  return provider;
}
