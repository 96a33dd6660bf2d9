import type { CommandUnknownOpts } from "@commander-js/extra-typings";
import { Cli, type GlobalOptions } from "../context.ts";
import { UsageError } from "../errors.ts";

export type Program = CommandUnknownOpts;

/** The run's Cli, from the command an action was given (its options with the program's). */
export function cliOf(command: { optsWithGlobals(): unknown }): Cli {
  return new Cli(command.optsWithGlobals() as GlobalOptions);
}

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * An instant as Unix milliseconds: ISO-8601 (`2026-11-28T10:00:00Z`), Unix ms, or relative to
 * now (`-10m`, `-2h`, `-1d`, `-30s`).
 */
export function parseInstant(text: string, option: string, now = Date.now()): number {
  const relative = /^-(\d+)([smhd])$/.exec(text.trim());
  if (relative) return now - Number(relative[1]) * (UNITS[relative[2] as string] as number);
  if (/^\d{10,}$/.test(text.trim())) return Number(text.trim());
  const parsed = Date.parse(text);
  if (Number.isNaN(parsed)) {
    throw new UsageError(`${option} must be an ISO-8601 time, Unix milliseconds, or relative (-10m, -2h, -1d)`);
  }
  return parsed;
}

/** A whole number option, or a usage error naming it. */
export function parseCount(text: string, option: string): number {
  if (!/^\d+$/.test(text)) throw new UsageError(`${option} must be a whole number`);
  return Number(text);
}

/** Polls `read` every `everyMs` until `done` says so, for at most `timeoutMs`. */
export async function waitFor<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  { timeoutMs = 300_000, everyMs = 500 }: { timeoutMs?: number; everyMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new UsageError(`gave up waiting after ${Math.round(timeoutMs / 1000)} s`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
