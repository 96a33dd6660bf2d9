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

/** True when the allowlist is empty (no restriction) or contains the address. */
export function isIpAllowed(entries: readonly string[], address: string | null): boolean {
  if (entries.length === 0) return true;
  if (!address) return false;
  const ip = normalizeIp(address);
  const version = isIP(ip);
  if (version === 0) return false;
  return compile(entries).check(ip, version === 4 ? "ipv4" : "ipv6");
}
