import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.ts";

/** The message loadConfig refuses `env` with (it must name the variable). */
function refusal(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe("configuration", () => {
  it("takes the defaults, and counts empty values as unset", () => {
    const config = loadConfig({ PORT: "", WORKERS: "" });
    expect(config).toMatchObject({ port: 8080, workers: 8, host: "0.0.0.0", webhookTimeoutMs: 10_000 });
    expect(config.servedRegions).toEqual(["ist", "fra", "ams", "lhr", "sjc", "iad", "sin", "syd"]);
  });

  it.each([
    ["PORT", "abc"],
    ["PORT", " "],
    ["PORT", "0x1F98"],
    ["PORT", "70000"],
    ["WORKERS", " "],
    ["WEBHOOK_MAX_ATTEMPTS", "0"],
    ["RATE_LIMIT_PER_MINUTE", "-1"],
    ["LOG_LEVEL", "loud"],
    ["HOST", "not..a..host"],
    ["PUBLIC_URL", "ftp://example.com"],
    ["DATABASE_URL", "mysql://x"],
    ["SMTP_URL", "smtp://"],
    ["MAIL_FROM", "garbage"],
    ["SERVED_REGIONS", "xyz"],
    ["SERVED_REGIONS", "fra,,ams"],
    ["INVITATION_TTL_DAYS", "999999999"],
    ["WEBHOOK_TIMEOUT_MS", "3000000000"],
    ["SHUTDOWN_TIMEOUT_MS", "99999999999"],
    ["WORKER_THREAD", "maybe"],
    ["TRUST_PROXY", "33"],
    ["TRUST_PROXY", "-1"],
    ["TRUST_PROXY", "1.5"],
    ["TRUST_PROXY", "proxy.internal"],
    ["TRUST_PROXY", "10.0.0.1,,10.0.0.2"],
    ["TRUST_PROXY", "10.0.0.0/33"],
    ["TRUST_PROXY", "2001:db8::/129"],
    ["SIGN_IN_FAILURES_PER_ACCOUNT", "0"],
    ["STORAGE_URL", "http://key:secret@host/bucket"],
    ["STORAGE_URL", "s3://host/bucket"],
    ["STORAGE_URL", "s3://key:secret@host"],
    ["STORAGE_URL", "s3://key:secret@host/Bad_Bucket"],
    ["STORAGE_URL", "s3://key:secret@host/bucket?tls=maybe"],
    ["STORAGE_URL", "s3://key:secret@host/bucket?style=virtual"],
    ["METRICS_TOKEN", "short"],
    ["SIGNUP", "sometimes"],
  ])("refuses %s=%j, naming it", (name, value) => {
    expect(refusal({ [name]: value })).toContain(`${name}:`);
  });

  it.each([
    ["false", { hops: 0 }],
    ["no", { hops: 0 }],
    ["0", { hops: 0 }],
    ["1", { hops: 1 }],
    [" 2 ", { hops: 2 }],
    ["32", { hops: 32 }],
    ["10.0.0.1", { proxies: ["10.0.0.1"] }],
    ["10.0.0.0/8, 2001:db8::/32,::1", { proxies: ["10.0.0.0/8", "2001:db8::/32", "::1"] }],
  ])("reads TRUST_PROXY=%j", (value, trustProxy) => {
    expect(loadConfig({ TRUST_PROXY: value }).trustProxy).toEqual(trustProxy);
  });

  it("reads STORAGE_URL into an S3 location, the key and secret URL-decoded, TLS on unless tls=false", () => {
    expect(loadConfig({}).storage).toBeUndefined();
    expect(
      loadConfig({ STORAGE_URL: "s3://test%3Atester:tes%2Fting@127.0.0.1:9000/plinth?tls=false" }).storage,
    ).toEqual({
      endpoint: "http://127.0.0.1:9000",
      bucket: "plinth",
      region: "us-east-1",
      accessKeyId: "test:tester",
      secretAccessKey: "tes/ting",
    });
    expect(
      loadConfig({ STORAGE_URL: "s3://AKIA:secret@s3.eu-west-1.amazonaws.com/my.files?region=eu-west-1" }).storage,
    ).toMatchObject({ endpoint: "https://s3.eu-west-1.amazonaws.com", bucket: "my.files", region: "eu-west-1" });
  });

  it("never puts the storage secret in its refusal", () => {
    expect(refusal({ STORAGE_URL: "s3://key:very-secret@host/B" })).not.toContain("very-secret");
  });

  it("opens sign-up to anyone and has no metrics endpoint by default", () => {
    expect(loadConfig({})).toMatchObject({ signUp: "open", metricsToken: undefined });
    expect(loadConfig({ SIGNUP: "invite" }).signUp).toBe("invite");
  });

  it("trusts no proxy and counts 10 failed sign-ins per account by default", () => {
    expect(loadConfig({})).toMatchObject({ trustProxy: { hops: 0 }, signInFailuresPerAccount: 10 });
  });

  it.each(["true", "yes", "TRUE"])("refuses TRUST_PROXY=%s, saying what to set instead", (value) => {
    const message = refusal({ TRUST_PROXY: value });
    expect(message).toContain("TRUST_PROXY:");
    expect(message).toContain("number of proxies");
    expect(message).toContain("addresses");
  });

  it("takes good values of the same variables", () => {
    const config = loadConfig({
      PORT: "8088",
      HOST: "::1",
      PUBLIC_URL: "https://plinth.example.com/",
      SMTP_URL: "smtps://user:pass@mail.example.com:465",
      MAIL_FROM: "Ops <ops@example.com>",
      SERVED_REGIONS: "fra,ams",
      WEBHOOK_TIMEOUT_MS: "2147483647",
      INVITATION_TTL_DAYS: "30",
    });
    expect(config).toMatchObject({
      port: 8088,
      host: "::1",
      publicUrl: "https://plinth.example.com",
      mailFrom: "Ops <ops@example.com>",
      servedRegions: ["fra", "ams"],
      webhookTimeoutMs: 2_147_483_647,
      invitationTtlDays: 30,
    });
  });
});
