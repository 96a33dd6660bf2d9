import { Resolver } from "node:dns/promises";
import type { Config } from "../../config.ts";

/** What a look-up of a domain's challenge found: a match, or why not (for the domain's `error`). */
export type ChallengeResult = { ok: true } | { ok: false; error: string };

const LOOKUP_TIMEOUT_MS = 2_000;
const LOOKUP_TRIES = 2;

/**
 * Looks the TXT records at `name` up through DNS_SERVERS (else the system's resolvers) and says
 * whether one is `expected`. Never throws: a timeout, SERVFAIL or refusal is a result too, with
 * an error that says so.
 */
export async function checkChallenge(config: Config, name: string, expected: string): Promise<ChallengeResult> {
  const resolver = new Resolver({ timeout: LOOKUP_TIMEOUT_MS, tries: LOOKUP_TRIES });
  if (config.dnsServers) resolver.setServers(config.dnsServers);
  let records: string[];
  try {
    records = (await resolver.resolveTxt(name)).map((chunks) => chunks.join(""));
  } catch (error) {
    return { ok: false, error: lookupFailure(name, (error as NodeJS.ErrnoException).code) };
  }
  if (records.includes(expected)) return { ok: true };
  if (records.length === 0) return { ok: false, error: `no TXT record at ${name}` };
  const shown = records
    .slice(0, 3)
    .map((record) => JSON.stringify(record.length > 100 ? `${record.slice(0, 100)}…` : record))
    .join(", ");
  return {
    ok: false,
    error: `the TXT records at ${name} (${shown}${records.length > 3 ? ", …" : ""}) do not include "${expected}"`,
  };
}

function lookupFailure(name: string, code: string | undefined): string {
  switch (code) {
    case "ENODATA":
    case "ENOTFOUND":
      return `no TXT record at ${name}`;
    case "ETIMEOUT":
      return `the DNS look-up of ${name} timed out`;
    case "ESERVFAIL":
      return `the DNS server failed (SERVFAIL) looking ${name} up`;
    case "EREFUSED":
    case "ECONNREFUSED":
      return `the DNS server refused the look-up of ${name}`;
    default:
      return `the DNS look-up of ${name} failed (${code ?? "unknown error"})`;
  }
}
