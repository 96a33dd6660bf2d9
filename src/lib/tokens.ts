import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

export function sha256Hex(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/**
 * Whether two hashes are the same, in time that does not depend on where they differ, so that
 * response times cannot tell a caller how much of a stored hash its guess matched. A length
 * mismatch is simply unequal (`timingSafeEqual` would throw).
 */
export function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** A URL-safe random secret with a recognisable prefix, e.g. `inv_…`. */
export function randomToken(prefix: string, bytes = 32): string {
  return `${prefix}${randomBytes(bytes).toString("base64url")}`;
}

export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString("hex");
}
