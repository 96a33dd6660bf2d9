import type { Dialect } from "./database.ts";

/*
 * SQLite keeps prepared statements by their text (see `withStatementCache`), and a multi-row
 * insert or an `IN` list has a different text for every length, so under load the cache fills
 * with one-off statements and SQLite parses and plans most of them anew. On SQLite these helpers
 * keep lengths to powers of two: a statement comes in a handful of shapes, each prepared once.
 * PostgreSQL prepares nothing by text here, and a statement more is a round trip more, so there
 * they only cut to the maximum.
 */

function largestPowerOfTwoAtMost(n: number): number {
  return 2 ** Math.floor(Math.log2(n));
}

/** `rows` in chunks of at most `max`; on SQLite of power-of-two sizes, largest first. */
export function chunked<T>(dialect: Dialect, rows: readonly T[], max: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < rows.length; ) {
    const left = rows.length - i;
    const size = dialect === "sqlite" ? largestPowerOfTwoAtMost(Math.min(left, max)) : Math.min(left, max);
    chunks.push(rows.slice(i, i + size));
    i += size;
  }
  return chunks;
}

/** The values of an `IN` list; on SQLite padded to a power-of-two length with its last value (the same set). */
export function inList<T>(dialect: Dialect, values: readonly T[]): T[] {
  const padded = [...values];
  if (dialect !== "sqlite" || values.length < 3) return padded;
  const length = 2 ** Math.ceil(Math.log2(values.length));
  const last = values[values.length - 1] as T;
  while (padded.length < length) padded.push(last);
  return padded;
}
