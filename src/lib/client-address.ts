import { isIP } from "node:net";
import { addressMatcher, normalizeIp } from "./ip.ts";

/**
 * Whose word is taken for the client's address: that of `hops` proxies in front of the service
 * (0: none; the socket's peer is the client), or of the proxies at `proxies` (addresses and CIDR
 * ranges), wherever they are in the chain.
 */
export type TrustProxy = { hops: number } | { proxies: string[] };

/** X-Forwarded-For entries read at most, from the right: a long header costs no more than this. */
export const MAX_FORWARDED_HOPS = 32;

/** Longer than any address as a proxy may write it (`[IPv6%zone]:port`). */
const MAX_ENTRY_LENGTH = 100;

/**
 * Finds the client's address from the socket's peer and the `X-Forwarded-For` header. Each proxy
 * appends the address it was connected from, so the header is read from the right: while the
 * current hop is a trusted proxy, the entry it appended is the next hop; the first hop that is
 * not trusted is the client. Entries left of it were written by the client (or its own proxies)
 * and are never read. An entry that is not an address ends the walk: the client is then the
 * proxy that handed it over, never the text.
 */
export function clientAddressFinder(
  trust: TrustProxy,
): (peer: string | null, forwardedFor: string | undefined) => string | null {
  if ("hops" in trust && trust.hops === 0) return (peer) => peer;
  const trusted: (address: string, hop: number) => boolean =
    "hops" in trust ? (_, hop) => hop < trust.hops : addressMatcher(trust.proxies);
  return (peer, forwardedFor) => {
    let client = peer;
    if (client === null || forwardedFor === undefined) return client;
    let end = forwardedFor.length;
    for (let hop = 0; hop < MAX_FORWARDED_HOPS && end >= 0 && trusted(client, hop); hop++) {
      const start = forwardedFor.lastIndexOf(",", end - 1);
      const entry = forwardedAddress(forwardedFor.slice(start + 1, end));
      if (entry === null) break;
      client = entry;
      end = start;
    }
    return client;
  };
}

/**
 * The address in one X-Forwarded-For entry: `1.2.3.4` or `2001:db8::1`, or as some proxies write
 * them `1.2.3.4:5678`, `[2001:db8::1]:4711` or `fe80::1%eth0`; null when it is none of these.
 */
function forwardedAddress(entry: string): string | null {
  const text = entry.trim();
  if (text.length > MAX_ENTRY_LENGTH) return null;
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text)?.[1];
  const host = bracketed ?? /^([\d.]+):\d{1,5}$/.exec(text)?.[1] ?? text;
  const [address = "", zone] = host.split("%");
  const version = isIP(address);
  // Brackets and zones belong to IPv6 addresses only.
  if (version === 0 || ((bracketed !== undefined || zone !== undefined) && version !== 6)) return null;
  return normalizeIp(address);
}
