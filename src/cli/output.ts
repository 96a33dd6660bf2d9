/**
 * How the CLI writes: data to stdout (a table or fields for people; with `--json` exactly the
 * API's JSON, for scripts), messages to stderr. Colour only on a terminal, and never with
 * NO_COLOR (https://no-color.org) or TERM=dumb.
 */
export interface Column<T> {
  header: string;
  value(row: T): unknown;
}

const STATUS_COLOURS: Record<string, number> = {
  active: 32,
  completed: 32,
  succeeded: 32,
  verified: 32,
  provisioning: 33,
  pending: 33,
  creating: 33,
  paused: 33,
  invited: 33,
  failed: 31,
  dead: 31,
  suspended: 31,
  expired: 31,
};

export class Output {
  private readonly colour: boolean;

  constructor(
    readonly json: boolean,
    private readonly stdout: NodeJS.WriteStream = process.stdout,
    private readonly stderr: NodeJS.WriteStream = process.stderr,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.colour = Boolean(stdout.isTTY) && !env.NO_COLOR && env.TERM !== "dumb";
  }

  /** An answer of the API: its JSON with `--json`, else what `human` makes of it (nothing when null). */
  answer(value: unknown, human: () => string | null): void {
    if (this.json) {
      this.stdout.write(`${JSON.stringify(value ?? null, null, 2)}\n`);
      return;
    }
    const text = human();
    if (text !== null) this.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
  }

  /** A line for people, on stderr: what happened, what to do next. */
  message(text: string): void {
    this.stderr.write(`${text}\n`);
  }

  /** Rows as a table with a header; `empty` (on stderr) when there are none. */
  table<T>(rows: readonly T[], columns: readonly Column<T>[], empty: string): string | null {
    if (rows.length === 0) {
      this.message(empty);
      return null;
    }
    const cells = rows.map((row) => columns.map((column) => text(column.value(row))));
    const widths = columns.map((column, i) =>
      Math.max(column.header.length, ...cells.map((line) => (line[i] as string).length)),
    );
    const line = (values: string[], paint: (value: string, i: number) => string) =>
      values
        .map((value, i) => paint(i === values.length - 1 ? value : value.padEnd(widths[i] as number), i))
        .join("  ")
        .trimEnd();
    return [
      line(
        columns.map((column) => column.header.toUpperCase()),
        (value) => this.paint(value, 1),
      ),
      ...cells.map((values) => line(values, (value) => this.paintStatus(value))),
    ].join("\n");
  }

  /** `label  value` lines, aligned: one resource for people. */
  fields(pairs: readonly [string, unknown][]): string {
    const width = Math.max(...pairs.map(([label]) => label.length));
    return pairs.map(([label, value]) => `${this.paint(label.padEnd(width), 1)}  ${text(value)}`).join("\n");
  }

  private paintStatus(value: string): string {
    const code = STATUS_COLOURS[value.trim()];
    return code ? this.paint(value, code) : value;
  }

  private paint(value: string, code: number): string {
    return this.colour ? `\u001b[${code}m${value}\u001b[0m` : value;
  }
}

/** A cell as text: `-` for none, lists joined, objects as JSON. */
function text(value: unknown): string {
  if (value === null || value === undefined || value === "") return "-";
  if (Array.isArray(value)) return value.length === 0 ? "-" : value.map(text).join(",");
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}
