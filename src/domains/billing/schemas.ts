import { z } from "@hono/zod-openapi";
import { pageQuery } from "../fields.ts";
import { PACK_TYPES } from "./entitlements.ts";
import { BILLING_PROVIDERS, PLAN_INTERVALS } from "./providers/provider.ts";

/** The plans a checkout can buy (SPEC's CheckoutInput); the default plan is where cancelling leads. */
export const PAID_PLANS = ["pro", "scale", "max"] as const;

export const CheckoutInput = z
  .object({
    plan: z.enum(PAID_PLANS),
    interval: z.enum(PLAN_INTERVALS).default("monthly"),
  })
  .openapi("CheckoutInput");

export const PackCheckoutInput = z
  .object({
    type: z.enum(PACK_TYPES).openapi({
      description:
        "The metric the pack adds to this period: requests +1,000,000, neurons +1,000,000, r2 +10 GiB, d1 +1 GiB",
    }),
  })
  .openapi("PackCheckoutInput");

export const SubscriptionSchema = z
  .object({
    planId: z.string(),
    interval: z.enum(PLAN_INTERVALS),
    status: z.enum(["active", "past_due", "canceled"]),
    currentPeriodStart: z.string(),
    currentPeriodEnd: z.string(),
    cancelAtPeriodEnd: z.boolean(),
    provider: z.enum(BILLING_PROVIDERS),
  })
  .openapi("Subscription");

export const SubscriptionResponse = z.object({ subscription: SubscriptionSchema.nullable() });

export const CheckoutSchema = z
  .object({
    id: z.string().openapi({ example: "chk_01jx0000000000000000000000" }),
    url: z.string().openapi({ description: "Where the payer completes the payment" }),
    kind: z.enum(["plan", "pack"]),
    plan: z.string().optional(),
    interval: z.enum(PLAN_INTERVALS).optional(),
    packType: z.enum(PACK_TYPES).optional(),
    status: z.enum(["open", "completed", "expired"]),
    expiresAt: z.string(),
  })
  .openapi("Checkout");

export const CheckoutResponse = z.object({ checkout: CheckoutSchema });

export const InvoiceSchema = z
  .object({
    id: z.string().openapi({ example: "invc_01jx0000000000000000000000" }),
    number: z.string(),
    status: z.enum(["paid", "open", "void"]),
    amountCents: z.number().int(),
    currency: z.string(),
    periodStart: z.string(),
    periodEnd: z.string(),
    lines: z.array(z.object({ description: z.string(), amountCents: z.number().int() })),
    createdAt: z.string(),
  })
  .openapi("Invoice");

export const InvoicesResponse = z.object({ invoices: z.array(InvoiceSchema) });

export const InvoicesQuery = z.object(pageQuery(50, 200));

export const TestCheckoutParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "chk_01jx0000000000000000000000" }),
});
