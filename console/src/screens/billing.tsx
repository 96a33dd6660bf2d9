import { useState } from "preact/hooks";
import { useRoute } from "preact-iso";
import { api, data } from "../api.ts";
import { OrgLayout } from "../components/layout.tsx";
import { Badge, Button, ConfirmButton, Loading, Page, ProblemNote, Select, Table, When } from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";
import { loadOrgs } from "../session.ts";

const money = (cents: number, currency = "usd") =>
  (cents / 100).toLocaleString(undefined, { style: "currency", currency: currency.toUpperCase() });

/** `/orgs/:slug/billing`: the plan and subscription, checkout, packs, invoices, cancelling. */
export function Billing() {
  const { slug } = useRoute().params as { slug: string };
  const subscription = useLoad(
    () => data(api.GET("/org/{slug}/billing/subscription", { params: { path: { slug } } })),
    [slug],
  );
  const plans = useLoad(() => data(api.GET("/plans")), []);
  const invoices = useLoad(() => data(api.GET("/org/{slug}/billing/invoices", { params: { path: { slug } } })), [slug]);
  const action = useAction();
  const [interval, setBilled] = useState<"monthly" | "annual">("monthly");
  const [pack, setPack] = useState<"requests" | "neurons" | "r2" | "d1">("requests");
  const [notice, setNotice] = useState<string | null>(null);
  const refresh = async () => {
    subscription.reload();
    invoices.reload();
    await loadOrgs();
  };
  /** A checkout's page: the provider's, or for the test provider a payment made here. */
  const pay = async (checkout: { id: string; url: string }) => {
    if (checkout.url.includes("/api/billing/test-checkout/")) {
      await data(api.POST("/billing/test-checkout/{id}", { params: { path: { id: checkout.id } } }));
      setNotice("Paid.");
      await refresh();
    } else {
      location.assign(checkout.url);
    }
  };
  return (
    <OrgLayout slug={slug}>
      <Page title="Billing">
        {notice ? <p role="status">{notice}</p> : null}
        <ProblemNote problem={action.problem} />
        <Loading loaded={subscription}>
          {({ subscription: current }) =>
            current ? (
              <section class="card" aria-labelledby="subscription">
                <h2 id="subscription">Subscription</h2>
                <dl class="facts">
                  <dt>Plan</dt>
                  <dd>{current.planId}</dd>
                  <dt>Status</dt>
                  <dd>
                    <Badge status={current.status === "past_due" ? "failed" : current.status} />
                  </dd>
                  <dt>Period</dt>
                  <dd>
                    <When at={current.currentPeriodStart} /> to <When at={current.currentPeriodEnd} />
                  </dd>
                  <dt>Renews</dt>
                  <dd>{current.cancelAtPeriodEnd ? "no: it ends with the period" : `yes, ${current.interval}`}</dd>
                </dl>
                {current.cancelAtPeriodEnd ? null : (
                  <ConfirmButton
                    label="Cancel subscription"
                    question="Cancel at the period's end? The plan stays until then, then the organization returns to the default plan."
                    onConfirm={() =>
                      action.run(async () => {
                        await data(api.DELETE("/org/{slug}/billing/subscription", { params: { path: { slug } } }));
                        await refresh();
                      })
                    }
                  />
                )}
              </section>
            ) : (
              <p class="empty">No subscription: the organization is on its default plan.</p>
            )
          }
        </Loading>
        <section class="card" aria-labelledby="plans">
          <h2 id="plans">Plans</h2>
          <Select
            label="Billed"
            name="interval"
            value={interval}
            options={[
              ["monthly", "Monthly"],
              ["annual", "Annually"],
            ]}
            onChange={(event) => setBilled(event.currentTarget.value as "monthly" | "annual")}
          />
          <Loading loaded={plans}>
            {({ plans: list }) => (
              <Table
                label="Plans"
                rows={list.filter((plan) => plan.id !== "free")}
                empty="No plans to buy."
                columns={[
                  { header: "Plan", cell: (plan) => plan.name },
                  {
                    header: "Price",
                    cell: (plan) => money(interval === "monthly" ? plan.prices.monthly : plan.prices.annual),
                  },
                  { header: "Projects", cell: (plan) => plan.limits.projects ?? "unlimited" },
                  { header: "Requests", cell: (plan) => plan.limits.requests.toLocaleString() },
                  {
                    header: "Actions",
                    cell: (plan) => (
                      <Button
                        variant="primary"
                        busy={action.busy}
                        onClick={() =>
                          action.run(async () => {
                            const { checkout } = await data(
                              api.POST("/org/{slug}/billing/checkout", {
                                params: { path: { slug } },
                                body: { plan: plan.id as "pro" | "scale" | "max", interval },
                              }),
                            );
                            await pay(checkout);
                          })
                        }
                      >
                        Choose {plan.name}
                      </Button>
                    ),
                  },
                ]}
              />
            )}
          </Loading>
        </section>
        <section class="card" aria-labelledby="packs">
          <h2 id="packs">Packs</h2>
          <p class="muted">
            More for this period only: requests +1,000,000, neurons +1,000,000, r2 +10 GiB, d1 +1 GiB.
          </p>
          <div class="form inline">
            <Select
              label="Pack"
              name="type"
              value={pack}
              options={["requests", "neurons", "r2", "d1"]}
              onChange={(event) => setPack(event.currentTarget.value as typeof pack)}
            />
            <Button
              busy={action.busy}
              onClick={() =>
                action.run(async () => {
                  const { checkout } = await data(
                    api.POST("/org/{slug}/billing/packs", { params: { path: { slug } }, body: { type: pack } }),
                  );
                  await pay(checkout);
                })
              }
            >
              Buy pack
            </Button>
          </div>
        </section>
        <section class="card" aria-labelledby="invoices">
          <h2 id="invoices">Invoices</h2>
          <Loading loaded={invoices}>
            {({ invoices: list }) => (
              <Table
                label="Invoices"
                rows={list}
                empty="No invoices yet."
                columns={[
                  { header: "Number", cell: (invoice) => invoice.number },
                  { header: "Date", cell: (invoice) => <When at={invoice.createdAt} /> },
                  { header: "Amount", cell: (invoice) => money(invoice.amountCents, invoice.currency) },
                  { header: "Status", cell: (invoice) => invoice.status },
                  { header: "For", cell: (invoice) => invoice.lines.map((line) => line.description).join("; ") },
                ]}
              />
            )}
          </Loading>
        </section>
      </Page>
    </OrgLayout>
  );
}
