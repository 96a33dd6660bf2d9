import type { Alarm } from "../../client/index.ts";
import { UsageError } from "../errors.ts";
import { cliOf, type Program, parseCount } from "./shared.ts";

const METRICS = ["requests", "d1", "r2"] as const;

/** `usage [--history]`: the period's figures against the plan, or the daily history. */
export function usageCommand(program: Program): void {
  program
    .command("usage")
    .description("what the org used this billing period, against its plan's limits")
    .option("--history", "the daily figures per project instead")
    .option("--from <date>", "with --history: the first day (YYYY-MM-DD; default 30 days ago)")
    .option("--to <date>", "with --history: the last day (YYYY-MM-DD)")
    .action(async (options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const slug = await cli.org();
      if (options.history) {
        const query = { ...(options.from ? { from: options.from } : {}), ...(options.to ? { to: options.to } : {}) };
        const answer = await cli.call(client.GET("/org/{slug}/usage/history", { params: { path: { slug }, query } }));
        cli.out.answer(answer, () =>
          cli.out.table(
            answer.days,
            [
              { header: "date", value: (day) => day.date },
              { header: "project", value: (day) => `${day.projectSlug}${day.projectDeleted ? " (deleted)" : ""}` },
              { header: "requests", value: (day) => day.requests },
              { header: "d1", value: (day) => day.d1 },
              { header: "r2", value: (day) => day.r2 },
            ],
            "No usage in that time.",
          ),
        );
        return;
      }
      const answer = await cli.call(client.GET("/org/{slug}/usage", { params: { path: { slug } } }));
      cli.out.answer(answer, () =>
        [
          cli.out.fields([
            ["plan", answer.planId],
            ["period", `${answer.periodStart} – ${answer.periodEnd}`],
          ]),
          "",
          cli.out.table(
            Object.entries(answer.metrics).map(([metric, figures]) => ({ metric, ...figures })),
            [
              { header: "metric", value: (row) => row.metric },
              { header: "used", value: (row) => row.used },
              { header: "limit", value: (row) => row.limit },
              { header: "%", value: (row) => row.pct },
            ],
            "",
          ),
        ].join("\n"),
      );
    });
}

const alarmColumns = [
  { header: "id", value: (alarm: Alarm) => alarm.id },
  { header: "metric", value: (alarm: Alarm) => alarm.metric },
  { header: "threshold %", value: (alarm: Alarm) => alarm.thresholdPct },
  { header: "last fired", value: (alarm: Alarm) => alarm.lastFiredAt },
];

/** `alarms list | create --metric --threshold | delete <id>`. */
export function alarmCommands(program: Program): void {
  const alarms = program.command("alarms").description("alerts when a metric reaches a share of the plan");
  alarms
    .command("list")
    .description("the org's alarms")
    .action(async (_options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const answer = await cli.call(client.GET("/org/{slug}/alarms", { params: { path: { slug: await cli.org() } } }));
      cli.out.answer(answer, () => cli.out.table(answer.alarms, alarmColumns, "No alarms."));
    });
  alarms
    .command("create")
    .description("fire once per billing period when --metric reaches --threshold percent")
    .requiredOption("--metric <metric>", "requests, d1 or r2")
    .requiredOption("--threshold <percent>", "1 to 100")
    .action(async (options, command) => {
      const cli = cliOf(command);
      const metric = options.metric as (typeof METRICS)[number];
      if (!METRICS.includes(metric)) throw new UsageError(`--metric must be one of ${METRICS.join(", ")}`);
      const thresholdPct = parseCount(options.threshold, "--threshold");
      const client = await cli.client();
      const answer = await cli.call(
        client.POST("/org/{slug}/alarms", {
          params: { path: { slug: await cli.org() } },
          body: { metric, thresholdPct },
        }),
      );
      cli.out.answer(answer, () => cli.out.table([answer.alarm], alarmColumns, ""));
    });
  alarms
    .command("delete")
    .description("delete an alarm")
    .argument("<id>", "alm_…")
    .action(async (id, _options, command) => {
      const cli = cliOf(command);
      const client = await cli.client();
      const slug = await cli.org();
      await cli.confirm(`This deletes alarm ${id}`);
      await cli.call(client.DELETE("/org/{slug}/alarms/{id}", { params: { path: { slug, id } } }));
      cli.out.answer({ ok: true }, () => null);
      cli.out.message(`Deleted ${id}.`);
    });
}
