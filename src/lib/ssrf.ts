import { promises as dnsPromises } from "node:dns";
import { BlockList, isIP } from "node:net";
import { networkInterfaces } from "node:os";

const PRIVATE_IPV4_SUBNETS: ReadonlyArray<readonly [string, number]> = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  // IETF protocol assignments and benchmarking space: never public, sometimes routed internally.
  ["192.0.0.0", 24],
  // Documentation (TEST-NET-1, -2, -3) and the retired 6to4 relay anycast: not on the public
  // internet, so a host numbered from them is on the operator's own network.
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
];

const PRIVATE_IPV6_SUBNETS: ReadonlyArray<readonly [string, number]> = [
  // Unspecified (::), loopback (::1) and the deprecated IPv4-compatible form (::a.b.c.d).
  ["::", 96],
  // Local-use NAT64 prefix: translates to whatever IPv4 space the operator chose.
  ["64:ff9b:1::", 48],
  // Discard-only.
  ["100::", 64],
  // IETF protocol assignments, Teredo (2001::/32, a tunnel to any IPv4 address) among them.
  ["2001::", 23],
  // Documentation (RFC 3849, RFC 9637) and SRv6 segment identifiers.
  ["2001:db8::", 32],
  ["3fff::", 20],
  ["5f00::", 16],
  ["fc00::", 7],
  ["fe80::", 10],
  // Deprecated site-local: still routed privately by some networks.
  ["fec0::", 10],
  ["ff00::", 8],
];

/**
 * The IPv6 forms that reach an IPv4 address: `[prefix length, spelling of the v4 network]`.
 * IPv4-mapped (::ffff:0:0/96), SIIT's IPv4-translated (::ffff:0:0:0/96), well-known NAT64
 * (64:ff9b::/96) and 6to4 (2002::/16, the IPv4 address in bits 16–47).
 */
const IPV4_IN_IPV6: ReadonlyArray<readonly [number, (v4: string) => string]> = [
  [96, (v4) => `::ffff:${v4}`],
  [96, (v4) => `::ffff:0:${v4}`],
  [96, (v4) => `64:ff9b::${v4}`],
  [16, (v4) => `2002:${v4Groups(v4)}::`],
];

/** `a.b.c.d` as two IPv6 groups. */
function v4Groups(v4: string): string {
  const [a = 0, b = 0, c = 0, d = 0] = v4.split(".").map(Number);
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

/** Adds an IPv4 network, and the same network in every IPv6 form that reaches it. */
function addIpv4(list: BlockList, network: string, prefix: number): void {
  list.addSubnet(network, prefix, "ipv4");
  for (const [offset, spell] of IPV4_IN_IPV6) list.addSubnet(spell(network), offset + prefix, "ipv6");
}

const privateAddresses = (() => {
  const list = new BlockList();
  for (const [network, prefix] of PRIVATE_IPV4_SUBNETS) addIpv4(list, network, prefix);
  for (const [network, prefix] of PRIVATE_IPV6_SUBNETS) list.addSubnet(network, prefix, "ipv6");
  return list;
})();

/** How long the machine's own addresses are trusted before they are read again. */
const OWN_ADDRESSES_TTL_MS = 60_000;
let ownAddresses: { list: BlockList; readAt: number } | undefined;

/**
 * The addresses of this machine's own interfaces, public ones included: a webhook sent to any of
 * them reaches whatever listens on all interfaces here (Plinth itself, a database, an agent). An
 * address the machine is reached by but does not hold (a NAT's, a cloud's elastic IP) is not
 * among them.
 */
function isOwnAddress(address: string, version: "ipv4" | "ipv6"): boolean {
  const now = Date.now();
  if (!ownAddresses || now - ownAddresses.readAt > OWN_ADDRESSES_TTL_MS) {
    const list = new BlockList();
    try {
      for (const entries of Object.values(networkInterfaces())) {
        for (const entry of entries ?? []) {
          if (entry.family === "IPv4") addIpv4(list, entry.address, 32);
          else list.addAddress(entry.address.replace(/%.*$/, ""), "ipv6");
        }
      }
      ownAddresses = { list, readAt: now };
    } catch {
      // Some sandboxes refuse to list interfaces: keep what was read last (nothing, at first),
      // and try again at the next check rather than fail the check itself.
      ownAddresses = { list: ownAddresses?.list ?? list, readAt: now - OWN_ADDRESSES_TTL_MS };
    }
  }
  return ownAddresses.list.check(address, version);
}

/**
 * True for loopback, unspecified, private, CGNAT, link-local (cloud metadata included), unique-local,
 * multicast, documentation and reserved addresses, and this machine's own addresses, in any IPv4
 * or IPv6 spelling. Anything that is not an IP address counts as private, so a caller that passes
 * garbage fails closed.
 */
export function isPrivateAddress(ip: string): boolean {
  // A zone index (fe80::1%eth0) names an interface, not part of the address, and BlockList rejects it.
  const address = ip.replace(/%.*$/, "");
  const version = isIP(address);
  if (version === 0) return true;
  const family = version === 4 ? "ipv4" : "ipv6";
  return privateAddresses.check(address, family) || isOwnAddress(address, family);
}

/**
 * Why a URL's host is refused. The address a name resolved to is left out, in every message a
 * caller can read: it would let anyone who can save a URL map the operator's internal DNS. An IP
 * literal is named, as the caller wrote it.
 */
export function refusedHostReason(host: string): string {
  const verb = isIP(host) === 0 ? "resolves to" : "is";
  return `${host} ${verb} an address that is not allowed (private, loopback, link-local or metadata)`;
}

/** The URL's hostname without the brackets WHATWG keeps around an IPv6 literal. */
export function bareHostname(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, "$1");
}

async function lookupAll(hostname: string): Promise<string[]> {
  const addresses = await dnsPromises.lookup(hostname, { all: true });
  return addresses.map((entry) => entry.address);
}

/**
 * Validates an outbound URL when it is saved, so obvious mistakes are a 422 rather than a string of
 * failed deliveries. It cannot stop DNS from changing later: the outbound client checks the address
 * it actually connects to as well. Returns null when the URL is acceptable, otherwise the reason.
 */
export async function checkOutboundUrl(
  url: string,
  options: { allowPrivate: boolean; lookup?: (hostname: string) => Promise<string[]> },
): Promise<string | null> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "not a valid URL";
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    return `URL scheme must be http or https, not ${parsed.protocol.replace(/:$/, "")}`;
  }
  if (parsed.username !== "" || parsed.password !== "") return "URL must not contain credentials";

  const host = bareHostname(parsed);
  if (isIP(host) !== 0) {
    return !options.allowPrivate && isPrivateAddress(host) ? refusedHostReason(host) : null;
  }

  if (options.allowPrivate) return null;
  // A name that does not resolve now (or not quickly) is accepted: DNS can be briefly down and a
  // receiver may not exist yet. Deliveries fail at send if it still does not resolve, and the
  // connect-time guard still refuses it if it later resolves to a private address.
  let addresses: string[];
  try {
    addresses = await withTimeout((options.lookup ?? lookupAll)(host), LOOKUP_TIMEOUT_MS);
  } catch {
    return null;
  }
  return addresses.some(isPrivateAddress) ? refusedHostReason(host) : null;
}

const LOOKUP_TIMEOUT_MS = 2_000;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
