import { createHash, randomBytes } from "node:crypto";

export function sha256Hex(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/** A URL-safe random secret with a recognisable prefix, e.g. `inv_…`. */
export function randomToken(prefix: string, bytes = 32): string {
  return `${prefix}${randomBytes(bytes).toString("base64url")}`;
}

export function randomHex(bytes: number): string {
  return randomBytes(bytes).toString("hex");
}
