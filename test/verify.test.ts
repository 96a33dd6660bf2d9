import { execFileSync } from "node:child_process";
import { createHmac } from "node:crypto";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { verifyWebhook } from "../src/verify/webhooks.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const secret = "whsec_test_secret";
const body = JSON.stringify({ channel: "items:posts", event: "created", data: { id: "1" }, deliveredAt: "now" });
const now = 1_800_000_000;

function sign(raw: string, timestamp: number, key = secret) {
  return {
    "X-Service-Timestamp": String(timestamp),
    "X-Service-Signature": createHmac("sha256", key).update(raw).digest("hex"),
    "X-Service-Signature-V2": createHmac("sha256", key).update(`${timestamp}.${raw}`).digest("hex"),
  };
}

describe("verifyWebhook", () => {
  it("accepts a correctly signed delivery (V2), as a string, bytes or Headers", () => {
    const headers = sign(body, now);
    expect(verifyWebhook({ secret, body, headers, nowSeconds: now })).toBe(true);
    expect(verifyWebhook({ secret, body: new TextEncoder().encode(body), headers, nowSeconds: now })).toBe(true);
    expect(verifyWebhook({ secret, body, headers: new Headers(headers), nowSeconds: now })).toBe(true);
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    expect(verifyWebhook({ secret, body, headers: lower, nowSeconds: now })).toBe(true);
  });

  it("refuses a tampered body, a wrong secret and a wrong V2 even when the legacy signature matches", () => {
    const headers = sign(body, now);
    expect(verifyWebhook({ secret, body: `${body} `, headers, nowSeconds: now })).toBe(false);
    expect(verifyWebhook({ secret: "whsec_other", body, headers, nowSeconds: now })).toBe(false);
    expect(
      verifyWebhook({
        secret,
        body,
        headers: { ...headers, "X-Service-Signature-V2": "00".repeat(32) },
        nowSeconds: now,
      }),
    ).toBe(false);
  });

  it("refuses stale and future timestamps beyond the tolerance, and skips the check at 0", () => {
    const headers = sign(body, now - 301);
    expect(verifyWebhook({ secret, body, headers, nowSeconds: now })).toBe(false);
    expect(verifyWebhook({ secret, body, headers: sign(body, now + 301), nowSeconds: now })).toBe(false);
    expect(verifyWebhook({ secret, body, headers: sign(body, now - 299), nowSeconds: now })).toBe(true);
    expect(verifyWebhook({ secret, body, headers, nowSeconds: now, toleranceSeconds: 0 })).toBe(true);
    expect(verifyWebhook({ secret, body, headers, nowSeconds: now, toleranceSeconds: 600 })).toBe(true);
  });

  it("checks the legacy signature over the bare body when there is no timestamp", () => {
    const legacy = { "X-Service-Signature": sign(body, now)["X-Service-Signature"] };
    expect(verifyWebhook({ secret, body, headers: legacy })).toBe(true);
    expect(verifyWebhook({ secret, body: "{}", headers: legacy })).toBe(false);
  });

  it("refuses a timestamp without V2: the legacy signature does not cover it, so it proves nothing fresh", () => {
    const { "X-Service-Signature-V2": _v2, ...withoutV2 } = sign(body, now);
    expect(verifyWebhook({ secret, body, headers: withoutV2, nowSeconds: now })).toBe(false);
  });

  it("keeps the defaults for a negative or non-finite toleranceSeconds and a non-finite nowSeconds; a numeric timestamp header is read", () => {
    const stale = sign(body, now - 10_000);
    for (const toleranceSeconds of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(verifyWebhook({ secret, body, headers: stale, nowSeconds: now, toleranceSeconds })).toBe(false);
      expect(verifyWebhook({ secret, body, headers: sign(body, now), nowSeconds: now, toleranceSeconds })).toBe(true);
    }
    // A nowSeconds that is not a finite number is the clock, never "no freshness check".
    const realNow = Math.floor(Date.now() / 1000);
    for (const nowSeconds of [Number.NaN, Number.POSITIVE_INFINITY, "abc" as unknown as number]) {
      expect(verifyWebhook({ secret, body, headers: sign(body, 1_000_000_000), nowSeconds })).toBe(false);
      expect(verifyWebhook({ secret, body, headers: sign(body, realNow), nowSeconds })).toBe(true);
    }
    const numeric = { ...sign(body, now), "X-Service-Timestamp": now as unknown as string };
    expect(verifyWebhook({ secret, body, headers: numeric, nowSeconds: now })).toBe(true);
  });

  it("returns false, never throws, on missing or malformed input", () => {
    const headers = sign(body, now);
    expect(verifyWebhook({ secret, body, headers: {}, nowSeconds: now })).toBe(false);
    expect(verifyWebhook({ secret: "", body, headers, nowSeconds: now })).toBe(false);
    expect(verifyWebhook({ secret, body: undefined as never, headers, nowSeconds: now })).toBe(false);
    expect(verifyWebhook({ secret, body, headers: undefined as never })).toBe(false);
    expect(verifyWebhook(undefined as never)).toBe(false);
    expect(verifyWebhook({ secret, body, headers: { ...headers, "X-Service-Timestamp": "soon" } })).toBe(false);
    expect(verifyWebhook({ secret, body, headers: { "X-Service-Signature": "zz" } })).toBe(false);
  });

  it("is importable by plain node as plinth/webhooks (compiled JavaScript)", () => {
    const script = `
      import { verifyWebhook } from "plinth/webhooks";
      import { createHmac } from "node:crypto";
      const body = "{}"; const ts = Math.floor(Date.now() / 1000);
      const v2 = createHmac("sha256", "k").update(ts + "." + body).digest("hex");
      console.log(verifyWebhook({ secret: "k", body, headers: { "x-service-timestamp": String(ts), "x-service-signature-v2": v2 } }));
    `;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: ROOT, encoding: "utf8" });
    expect(out.trim()).toBe("true");
  });
});
