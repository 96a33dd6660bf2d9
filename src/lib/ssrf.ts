import { promises as dnsPromises } from "node:dns";
import { BlockList, isIP } from "node:net";

const PRIVATE_IPV4_SUBNETS: ReadonlyArray<readonly [string, number]> = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  // IETF protocol assignments and benchmarking space: never public, sometimes routed internally.
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
];

const PRIVATE_IPV6_SUBNETS: ReadonlyArray<readonly [string, number]> = [
  // Unspecified (::), loopback (::1) and the deprecated IPv4-compatible form (::a.b.c.d).
  ["::", 96],
  // Local-use NAT64 prefix: translates to whatever IPv4 space the operator chose.
  ["64:ff9b:1::", 48],
  ["fc00::", 7],
  ["fe80::", 10],
  // Deprecated site-local: still routed privately by some networks.
  ["fec0::", 10],
  ["ff00::", 8],
];

/**
 * IPv4 ranges are also blocked inside the IPv4-mapped (::ffff:0:0/96) and well-known NAT64
 * (64:ff9b::/96) prefixes: a socket connected to either form reaches the embedded IPv4 address.
 */
const privateAddresses = (() => {
  const list = new BlockList();
  for (const [network, prefix] of PRIVATE_IPV4_SUBNETS) {
    list.addSubnet(network, prefix, "ipv4");
    list.addSubnet(`::ffff:${network}`, 96 + prefix, "ipv6");
    list.addSubnet(`64:ff9b::${network}`, 96 + prefix, "ipv6");
  }
  for (const [network, prefix] of PRIVATE_IPV6_SUBNETS) list.addSubnet(network, prefix, "ipv6");
  return list;
})();

/**
 * True for loopback, unspecified, private, CGNAT, link-local (cloud metadata included), unique-local,
 * multicast and reserved addresses, in any IPv4 or IPv6 spelling. Anything that is not an IP address
 * counts as private, so a caller that passes garbage fails closed.
 */
export function isPrivateAddress(ip: string): boolean {
  // A zone index (fe80::1%eth0) names an interface, not part of the address, and BlockList rejects it.
  const address = ip.replace(/%.*$/, "");
  const version = isIP(address);
  if (version === 0) return true;
  return privateAddresses.check(address, version === 4 ? "ipv4" : "ipv6");
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
    return !options.allowPrivate && isPrivateAddress(host) ? `${host} is a private address` : null;
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
  const blocked = addresses.find(isPrivateAddress);
  return blocked === undefined ? null : `${host} resolves to private address ${blocked}`;
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
