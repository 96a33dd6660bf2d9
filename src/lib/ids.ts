import { randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"; // Crockford base32, lower-case

function encodeTime(ms: number): string {
  let out = "";
  let rest = ms;
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[rest % 32] + out;
    rest = Math.floor(rest / 32);
  }
  return out;
}

/**
 * `prefix_` + 10 chars of millisecond time + 16 random chars. Ids sort by creation time,
 * which keeps "newest first" listings stable, and the prefix says what the id names.
 */
export function newId(prefix: string, now: Date = new Date()): string {
  const random = randomBytes(16);
  let tail = "";
  for (const byte of random) tail += ALPHABET[byte & 31];
  return `${prefix}_${encodeTime(now.getTime())}${tail}`;
}
