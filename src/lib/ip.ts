import { BlockList, isIP } from "node:net";

/** `::ffff:10.0.0.1` → `10.0.0.1`, so IPv4 rules match IPv4 clients reached over a dual-stack socket. */
export function normalizeIp(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped?.[1] ?? address;
}

type ParsedEntry =
  | { kind: "address"; ip: string; family: "ipv4" | "ipv6" }
  | {
      kind: "subnet";
      ip: string;
      prefix: number;
      family: "ipv4" | "ipv6";
    };

/** Parses `1.2.3.4`, `2001:db8::1`, `10.0.0.0/8` or `2001:db8::/32`; null when it is none of these. */
export function parseAllowlistEntry(entry: string): ParsedEntry | null {
  const [address = "", prefixText, ...rest] = entry.trim().split("/");
  if (rest.length > 0) return null;
  const version = isIP(address);
  if (version === 0) return null;
  const family = version === 4 ? "ipv4" : "ipv6";
  if (prefixText === undefined) return { kind: "address", ip: address, family };
  if (!/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = Number(prefixText);
  if (prefix > (version === 4 ? 32 : 128)) return null;
  return { kind: "subnet", ip: address, prefix, family };
}

/** Compiled allowlists, keyed by their stored text, so the hot path does not re-parse them. */
const compiled = new Map<string, BlockList>();
const MAX_COMPILED = 1000;

function compile(entries: readonly string[]): BlockList {
  const key = entries.join(",");
  const cached = compiled.get(key);
  if (cached) return cached;
  const list = new BlockList();
  for (const entry of entries) {
    const parsed = parseAllowlistEntry(entry);
    if (!parsed) continue;
    if (parsed.kind === "address") list.addAddress(parsed.ip, parsed.family);
    else list.addSubnet(parsed.ip, parsed.prefix, parsed.family);
  }
  if (compiled.size >= MAX_COMPILED) compiled.clear();
  compiled.set(key, list);
  return list;
}

/** Whether an address is one of `entries` (addresses and CIDR ranges); false for what is no address. */
export function addressMatcher(entries: readonly string[]): (address: string) => boolean {
  const list = compile(entries);
  return (address) => {
    const ip = normalizeIp(address);
    const version = isIP(ip);
    return version !== 0 && list.check(ip, version === 4 ? "ipv4" : "ipv6");
  };
}

/** True when the allowlist is empty (no restriction) or contains the address. */
export function isIpAllowed(entries: readonly string[], address: string | null): boolean {
  if (entries.length === 0) return true;
  if (!address) return false;
  return addressMatcher(entries)(address);
}

/**
 * The address a rate-limit budget is kept for: an IPv6 client's /64 (`2001:db8:1:2::/64`), the
 * network one host is commonly given whole and could otherwise rotate through for fresh budgets;
 * an IPv4 client's own address.
 */
export function rateKeyOf(address: string | null): string {
  if (address === null) return "unknown";
  const [ip = ""] = address.split("%");
  if (isIP(ip) !== 6) return address;
  // An IPv4 tail (`::1.2.3.4`) stands for two groups, past the first four whatever they hold.
  const groupsOf = (part: string) =>
    part === "" ? [] : part.split(":").flatMap((g) => (g.includes(".") ? [g, g] : [g]));
  const [head = "", tail] = ip.split("::");
  const left = groupsOf(head);
  const right = tail === undefined ? [] : groupsOf(tail);
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right];
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(":")}::/64`;
}
