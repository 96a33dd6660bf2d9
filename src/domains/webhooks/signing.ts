import { createHmac } from "node:crypto";

function hmacSha256Hex(secret: string, message: string): string {
  return createHmac("sha256", secret).update(message).digest("hex");
}

/**
 * The signature headers of one delivery attempt. `X-Service-Signature` is the legacy HMAC of the
 * bare body, kept unchanged for existing receivers; `X-Service-Signature-V2` also covers the
 * timestamp, so a receiver that checks freshness cannot be fed an old body again.
 */
export function signatureHeaders(secret: string, body: string, timestampSeconds: number): Record<string, string> {
  return {
    "X-Service-Timestamp": String(timestampSeconds),
    "X-Service-Signature": hmacSha256Hex(secret, body),
    "X-Service-Signature-V2": hmacSha256Hex(secret, `${timestampSeconds}.${body}`),
  };
}
