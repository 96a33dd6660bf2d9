import { useEffect, useRef, useState } from "preact/hooks";
import { useRoute } from "preact-iso";
import { api, data } from "../api.ts";
import { OrgLayout } from "../components/layout.tsx";
import { Button, ConfirmButton, Field, Loading, Page, ProblemNote, Select, Table, When } from "../components/ui.tsx";
import { useAction, useLoad } from "../hooks.ts";

const METRICS = ["requests", "d1", "r2"] as const;
const LABELS: Record<string, string> = {
  requests: "Requests",
  d1: "Database bytes (d1)",
  r2: "File bytes (r2)",
  neurons: "Neurons",
};

function figure(value: number, metric: string): string {
  if (metric === "d1" || metric === "r2") {
    const units = ["B", "KB", "MB", "GB", "TB"];
    let scaled = value;
    let unit = 0;
    while (scaled >= 1024 && unit < units.length - 1) {
      scaled /= 1024;
      unit++;
    }
    return `${scaled.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
  }
  return value.toLocaleString();
}

/** A daily series as a uPlot chart; uPlot loads with the first chart, not with the console. */
function DailyChart({ title, days, values }: { title: string; days: string[]; values: number[] }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    let chart: { destroy(): void } | undefined;
    let cancelled = false;
    void Promise.all([import("uplot"), import("uplot/dist/uPlot.min.css")]).then(([{ default: UPlot }]) => {
      if (cancelled || !box.current) return;
      const width = Math.max(280, box.current.clientWidth);
      chart = new UPlot(
        {
          width,
          height: 180,
          legend: { show: false },
          scales: { x: { time: true } },
          series: [{}, { label: title, stroke: "#2f5bea", width: 2, fill: "rgba(47, 91, 234, 0.08)" }],
          axes: [{}, { size: 70 }],
        },
        [days.map((day) => Date.parse(`${day}T00:00:00Z`) / 1000), values],
        box.current,
      );
    });
    return () => {
      cancelled = true;
      chart?.destroy();
    };
  }, [title, days, values]);
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} role="img" aria-label={`${title}, daily, last 30 days`} />
    </figure>
  );
}

/** `/orgs/:slug/usage`: the period against the plan, charts of the daily history, and alarms. */
export function Usage() {
  const { slug } = useRoute().params as { slug: string };
  const usage = useLoad(() => data(api.GET("/org/{slug}/usage", { params: { path: { slug } } })), [slug]);
  const history = useLoad(() => data(api.GET("/org/{slug}/usage/history", { params: { path: { slug } } })), [slug]);
  const alarms = useLoad(() => data(api.GET("/org/{slug}/alarms", { params: { path: { slug } } })), [slug]);
  const create = useAction();
  const action = useAction();
  const [metric, setMetric] = useState<(typeof METRICS)[number]>("requests");
  const [threshold, setThreshold] = useState("80");
  return (
    <OrgLayout slug={slug}>
      <Page title="Usage">
        <Loading loaded={usage}>
          {(current) => (
            <>
              <p class="muted">
                Plan <strong>{current.planId}</strong>, this period from{" "}
                {new Date(current.periodStart).toLocaleDateString()} to{" "}
                {new Date(current.periodEnd).toLocaleDateString()}.
              </p>
              <div class="meters">
                {Object.entries(current.metrics).map(([name, value]) => (
                  <div class="meter card" key={name}>
                    <span class="meter-label">{LABELS[name] ?? name}</span>
                    <strong>{figure(value.used, name)}</strong>
                    <span class="muted">
                      of {figure(value.limit, name)} ({value.pct}%)
                    </span>
                    <progress max={100} value={Math.min(100, value.pct)} aria-label={`${LABELS[name] ?? name} used`} />
                  </div>
                ))}
              </div>
            </>
          )}
        </Loading>
        <Loading loaded={history}>
          {({ days, from, to }) => {
            // Every day of the range, so one day's figures still read as a day of the month.
            const dates: string[] = [];
            for (
              let day = new Date(`${from}T00:00:00Z`);
              day <= new Date(`${to}T00:00:00Z`);
              day.setUTCDate(day.getUTCDate() + 1)
            ) {
              dates.push(day.toISOString().slice(0, 10));
            }
            const sum = (metric: "requests" | "d1" | "r2") =>
              dates.map((date) =>
                days.filter((day) => day.date === date).reduce((total, day) => total + day[metric], 0),
              );
            return days.length === 0 ? (
              <p class="empty">No usage recorded yet: the charts fill in as projects are used.</p>
            ) : (
              <div class="charts">
                {METRICS.map((name) => (
                  <DailyChart key={name} title={LABELS[name] as string} days={dates} values={sum(name)} />
                ))}
              </div>
            );
          }}
        </Loading>
        <section class="card" aria-labelledby="alarms">
          <h2 id="alarms">Alarms</h2>
          <form
            class="form inline"
            aria-label="Create an alarm"
            onSubmit={async (event) => {
              event.preventDefault();
              const done = await create.run(() =>
                data(
                  api.POST("/org/{slug}/alarms", {
                    params: { path: { slug } },
                    body: { metric, thresholdPct: Number(threshold) },
                  }),
                ),
              );
              if (done) alarms.reload();
            }}
          >
            <ProblemNote problem={create.problem} />
            <Select
              label="Metric"
              name="metric"
              value={metric}
              problem={create.problem}
              options={METRICS.map((name) => [name, LABELS[name] as string] as const)}
              onChange={(event) => setMetric(event.currentTarget.value as (typeof METRICS)[number])}
            />
            <Field
              label="Threshold (%)"
              name="thresholdPct"
              type="number"
              min={1}
              max={100}
              required
              value={threshold}
              problem={create.problem}
              onInput={(event) => setThreshold(event.currentTarget.value)}
            />
            <Button type="submit" variant="primary" busy={create.busy}>
              Create alarm
            </Button>
          </form>
          <ProblemNote problem={action.problem} />
          <Loading loaded={alarms}>
            {({ alarms: list }) => (
              <Table
                label="Alarms"
                rows={list}
                empty="No alarms."
                columns={[
                  { header: "Metric", cell: (alarm) => LABELS[alarm.metric] ?? alarm.metric },
                  { header: "Threshold", cell: (alarm) => `${alarm.thresholdPct}%` },
                  { header: "Last fired", cell: (alarm) => <When at={alarm.lastFiredAt} /> },
                  {
                    header: "Actions",
                    cell: (alarm) => (
                      <ConfirmButton
                        label="Delete"
                        question="Delete this alarm?"
                        onConfirm={() =>
                          action.run(async () => {
                            await data(
                              api.DELETE("/org/{slug}/alarms/{id}", { params: { path: { slug, id: alarm.id } } }),
                            );
                            alarms.reload();
                          })
                        }
                      />
                    ),
                  },
                ]}
              />
            )}
          </Loading>
        </section>
      </Page>
    </OrgLayout>
  );
}
