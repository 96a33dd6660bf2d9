import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Receiver-side verification of Plinth webhook deliveries, importable as `plinth/webhooks`.
 *
 * It prefers `X-Service-Signature-V2` (HMAC-SHA256 of `<timestamp>.<raw body>`) and refuses
 * timestamps further than `toleranceSeconds` from now (0 turns the freshness check off). A request
 * with a timestamp must carry V2, whose signature covers it: the legacy signature does not, so it
 * is no proof that the timestamp is fresh. Without a timestamp it checks the legacy
 * `X-Service-Signature` (HMAC-SHA256 of the raw body). It never throws: missing input, a stale
 * timestamp or a mismatch is `false`.
 */
export interface VerifyWebhookInput {
  /** The webhook's secret. */
  secret: string;
  /** The raw request body, exactly as received (string or bytes; not re-serialised JSON). */
  body: string | Uint8Array | ArrayBuffer;
  /** The request headers: a plain object (any key case; array values allowed) or a `Headers`. */
  headers: Record<string, string | string[] | undefined> | Headers;
  /** Seconds a timestamp may differ from now; default 300 (also for a negative or non-finite value), 0 disables the check. */
  toleranceSeconds?: number;
  /** Current Unix time in seconds (for tests); the clock when omitted or not a finite number. */
  nowSeconds?: number;
}

/** `value` when it is a finite number that passes `accept`; else undefined (the default applies). */
function finite(value: unknown, accept: (value: number) => boolean = () => true): number | undefined {
  return typeof value === "number" && Number.isFinite(value) && accept(value) ? value : undefined;
}

function header(headers: VerifyWebhookInput["headers"], name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() !== wanted) continue;
    const first = Array.isArray(value) ? value[0] : value;
    return first === undefined || first === null ? undefined : String(first);
  }
  return undefined;
}

function bodyBytes(body: VerifyWebhookInput["body"]): Buffer {
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

function hmacHex(secret: string, ...parts: Buffer[]): string {
  const mac = createHmac("sha256", secret);
  for (const part of parts) mac.update(part);
  return mac.digest("hex");
}

/** Compares hex signatures in constant time (for equal lengths). */
function sameSignature(expected: string, given: string): boolean {
  const a = Buffer.from(expected, "utf8");
  const b = Buffer.from(given.trim().toLowerCase(), "utf8");
  return a.length === b.length && timingSafeEqual(a, b);
}

export function verifyWebhook(input: VerifyWebhookInput): boolean {
  try {
    const { secret, body, headers } = input ?? ({} as VerifyWebhookInput);
    if (typeof secret !== "string" || secret === "" || body === undefined || body === null || !headers) return false;
    const bytes = bodyBytes(body);
    const timestamp = header(headers, "x-service-timestamp");
    if (timestamp !== undefined) {
      if (!/^\d{1,12}$/.test(timestamp.trim())) return false;
      const tolerance = finite(input.toleranceSeconds, (value) => value >= 0) ?? 300;
      const now = finite(input.nowSeconds) ?? Math.floor(Date.now() / 1000);
      if (tolerance > 0 && Math.abs(now - Number(timestamp)) > tolerance) return false;
      const v2 = header(headers, "x-service-signature-v2");
      if (v2 === undefined) return false;
      return sameSignature(hmacHex(secret, Buffer.from(`${timestamp.trim()}.`, "utf8"), bytes), v2);
    }
    const legacy = header(headers, "x-service-signature");
    if (legacy === undefined) return false;
    return sameSignature(hmacHex(secret, bytes), legacy);
  } catch {
    return false;
  }
}
