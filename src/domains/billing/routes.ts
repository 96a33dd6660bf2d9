import { createRoute, z } from "@hono/zod-openapi";
import type { Deps } from "../../deps.ts";
import { NotFoundError } from "../../errors.ts";
import { actorOf, requirePrincipal } from "../../http/principal.ts";
import {
  anyone,
  authedErrors,
  createRouter,
  errorResponses,
  jsonBody,
  jsonContent,
  sessionOrKey,
} from "../../http/router.ts";
import { orgCtx, requires } from "../../http/service-context.ts";
import { authorize, resolveOrgAccess } from "../orgs/access.ts";
import { SlugParams } from "../orgs/schemas.ts";
import {
  CheckoutInput,
  CheckoutResponse,
  InvoicesQuery,
  InvoicesResponse,
  PackCheckoutInput,
  SubscriptionResponse,
  SubscriptionSchema,
  TestCheckoutParams,
} from "./schemas.ts";
import {
  cancelSubscription,
  completeCheckout,
  createCheckout,
  createPackCheckout,
  findCheckoutForPayment,
  getSubscription,
  listInvoices,
  toCheckout,
} from "./service.ts";
import { applyStripeWebhook } from "./stripe-events.ts";

const tags = ["Billing"];
const base = "/org/{slug}/billing";

const routes = {
  subscription: createRoute({
    method: "get",
    path: `${base}/subscription`,
    tags,
    summary: "The org's subscription, or null on the default plan (admin)",
    security: sessionOrKey,
    request: { params: SlugParams },
    responses: { 200: jsonContent(SubscriptionResponse, "The subscription"), ...authedErrors },
  }),
  cancel: createRoute({
    method: "delete",
    path: `${base}/subscription`,
    tags,
    summary:
      "Cancel at the end of the period: the plan holds until then, then the org returns to the default plan (admin)",
    security: sessionOrKey,
    request: { params: SlugParams },
    responses: {
      200: jsonContent(z.object({ subscription: SubscriptionSchema }), "The subscription, cancelAtPeriodEnd"),
      ...authedErrors,
      ...errorResponses(503),
    },
  }),
  checkout: createRoute({
    method: "post",
    path: `${base}/checkout`,
    tags,
    summary: "Start paying for a plan: a checkout whose `url` takes the payment (admin)",
    description:
      "The org's plan changes when the payment completes, never before. 409 when billing is not configured " +
      "(BILLING_PROVIDER=none) or the org already has this plan and interval; 503 when the payment provider cannot be reached.",
    security: sessionOrKey,
    request: { params: SlugParams, body: jsonBody(CheckoutInput) },
    responses: { 201: jsonContent(CheckoutResponse, "The checkout"), ...authedErrors, ...errorResponses(503) },
  }),
  packs: createRoute({
    method: "post",
    path: `${base}/packs`,
    tags,
    summary: "Buy a pack that raises one metric's limit for the current period (admin)",
    security: sessionOrKey,
    request: { params: SlugParams, body: jsonBody(PackCheckoutInput) },
    responses: { 201: jsonContent(CheckoutResponse, "The checkout"), ...authedErrors, ...errorResponses(503) },
  }),
  invoices: createRoute({
    method: "get",
    path: `${base}/invoices`,
    tags,
    summary: "The org's invoices, newest first (limit default 50, at most 200; offset) (admin)",
    security: sessionOrKey,
    request: { params: SlugParams, query: InvoicesQuery },
    responses: { 200: jsonContent(InvoicesResponse, "Invoices"), ...authedErrors },
  }),
  testCheckout: createRoute({
    method: "post",
    path: "/billing/test-checkout/{id}",
    tags,
    summary: "Pay a checkout of the `test` provider (an admin of its org)",
    description:
      "Where a checkout's `url` points when BILLING_PROVIDER=test. Completed or expired: 409; another org's or unknown: 404.",
    security: sessionOrKey,
    request: { params: TestCheckoutParams },
    responses: { 200: jsonContent(CheckoutResponse, "The completed checkout"), ...authedErrors },
  }),
  stripeWebhook: createRoute({
    method: "post",
    path: "/billing/stripe/webhook",
    tags,
    summary: "Stripe's signed events (BILLING_PROVIDER=stripe)",
    description:
      "Verified with STRIPE_WEBHOOK_SECRET (a bad or stale signature is 400 and applies nothing); each event is applied once, " +
      "and an event older than what is applied changes nothing. Events for unknown customers are logged and answered 200.",
    security: anyone,
    responses: {
      200: jsonContent(z.object({ received: z.literal(true) }), "Received"),
      ...errorResponses(400, 404, 413, 429),
    },
  }),
};

export function billingRoutes(deps: Deps) {
  return createRouter()
    .openapi({ ...routes.subscription, middleware: requires(deps, "billing:read") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await getSubscription({ ctx: await orgCtx(c, deps, slug) }), 200);
    })
    .openapi({ ...routes.cancel, middleware: requires(deps, "billing:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await cancelSubscription({ ctx: await orgCtx(c, deps, slug) }), 200);
    })
    .openapi({ ...routes.checkout, middleware: requires(deps, "billing:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await createCheckout({ ctx: await orgCtx(c, deps, slug), input: c.req.valid("json") }), 201);
    })
    .openapi({ ...routes.packs, middleware: requires(deps, "billing:manage") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await createPackCheckout({ ctx: await orgCtx(c, deps, slug), input: c.req.valid("json") }), 201);
    })
    .openapi({ ...routes.invoices, middleware: requires(deps, "billing:read") }, async (c) => {
      const { slug } = c.req.valid("param");
      return c.json(await listInvoices({ ctx: await orgCtx(c, deps, slug), query: c.req.valid("query") }), 200);
    })
    .openapi(routes.testCheckout, async (c) => {
      const principal = requirePrincipal(c);
      const checkout = await findCheckoutForPayment(deps, c.req.valid("param").id);
      const org = await deps.db.selectFrom("orgs").select("slug").where("id", "=", checkout.org_id).executeTakeFirst();
      // Another org's checkout is as good as unknown to the caller.
      const access = await resolveOrgAccess(deps, principal, org?.slug ?? "").catch(() => {
        throw new NotFoundError("checkout not found");
      });
      authorize(access, "billing:manage");
      const completed = await completeCheckout(deps, checkout.id, { actor: actorOf(principal), ip: c.get("clientIp") });
      return c.json({ checkout: toCheckout(completed) }, 200);
    })
    .openapi(routes.stripeWebhook, async (c) => {
      await applyStripeWebhook(deps, await c.req.text(), c.req.header("stripe-signature"));
      return c.json({ received: true as const }, 200);
    });
}
