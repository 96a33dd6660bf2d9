import { createHmac, randomBytes } from "node:crypto";

const STANDARD_SECRET_PREFIX = "whsec_";

function hmacSha256Hex(secret: string, message: string): string {
  return createHmac("sha256", secret).update(message).digest("hex");
}

/**
 * The HMAC key of `webhook-signature` (DESIGN §14): the decoded bytes when what follows `whsec_` is
 * standard base64, else the secret's UTF-8 bytes. Only the canonical form counts (padded, no stray
 * characters, zero pad bits: it re-encodes to itself), since decoders disagree on the rest (Node
 * skips what is not base64, `standardwebhooks` ignores a dangling character) and a lenient reading
 * would give `whsec_QQ==` and `whsec_QR==` one key.
 */
function standardWebhooksKey(secret: string): Buffer {
  if (secret.startsWith(STANDARD_SECRET_PREFIX)) {
    const encoded = secret.slice(STANDARD_SECRET_PREFIX.length);
    const decoded = Buffer.from(encoded, "base64");
    if (decoded.length > 0 && decoded.toString("base64") === encoded) return decoded;
  }
  return Buffer.from(secret, "utf8");
}

/**
 * The signature headers of one delivery attempt, all over the same timestamp. `X-Service-Signature`
 * is the legacy HMAC of the bare body, kept unchanged for existing receivers; `X-Service-Signature-V2`
 * also covers the timestamp, so a receiver that checks freshness cannot be fed an old body again;
 * the `webhook-*` headers say the same in Standard Webhooks' terms, for receivers using its libraries.
 */
export function signatureHeaders(
  secret: string,
  deliveryId: string,
  body: string,
  timestampSeconds: number,
): Record<string, string> {
  const timestamp = String(timestampSeconds);
  const standard = createHmac("sha256", standardWebhooksKey(secret))
    .update(`${deliveryId}.${timestamp}.${body}`)
    .digest("base64");
  return {
    "X-Service-Timestamp": timestamp,
    "X-Service-Signature": hmacSha256Hex(secret, body),
    "X-Service-Signature-V2": hmacSha256Hex(secret, `${timestamp}.${body}`),
    "webhook-id": deliveryId,
    "webhook-timestamp": timestamp,
    "webhook-signature": `v1,${standard}`,
  };
}

/** A new signing secret: `whsec_` and 32 random bytes in standard base64, as Standard Webhooks' libraries read it. */
export function newSigningSecret(): string {
  return `${STANDARD_SECRET_PREFIX}${randomBytes(32).toString("base64")}`;
}
