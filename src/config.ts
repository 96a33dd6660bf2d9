import { Resolver } from "node:dns/promises";
import { isIP } from "node:net";
import { z } from "zod";
import { type Plan, readCatalog } from "./domains/plans/catalog.ts";
import { MAX_FORWARDED_HOPS, type TrustProxy } from "./lib/client-address.ts";
import { parseAllowlistEntry } from "./lib/ip.ts";
import type { S3Location } from "./storage/s3.ts";

const booleanFlag = z
  .enum(["true", "false", "1", "0", "yes", "no"])
  .transform((value) => value === "true" || value === "1" || value === "yes");

/** A whole number written in decimal digits (not "0x1F", " " or "1e3"), at most `max`. */
const wholeNumber = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, "must be a whole number in decimal digits")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
/** Node's timers hold at most 2^31 − 1 ms (~24.8 days); a larger delay fires at once. */
const MAX_TIMER_MS = 2_147_483_647;
const positiveInt = wholeNumber(1, Number.MAX_SAFE_INTEGER);
const nonNegativeInt = wholeNumber(0, Number.MAX_SAFE_INTEGER);
const milliseconds = (min: number) => wholeNumber(min, MAX_TIMER_MS);
/** Up to ten years. */
const days = (min: number) => wholeNumber(min, 3650);

/**
 * `false` (no proxy), how many proxies stand in front, or their addresses and CIDR ranges.
 * `true` is refused: it used to take the leftmost X-Forwarded-For entry, which the client writes.
 */
const trustProxy = z.string().transform((text, ctx): TrustProxy => {
  const word = text.trim().toLowerCase();
  if (word === "false" || word === "no") return { hops: 0 };
  if (/^\d{1,3}$/.test(word) && Number(word) <= MAX_FORWARDED_HOPS) return { hops: Number(word) };
  const proxies = text.split(",").map((entry) => entry.trim());
  if (proxies.every((entry) => parseAllowlistEntry(entry) !== null)) return { proxies };
  ctx.addIssue({
    code: "custom",
    message:
      word === "true" || word === "yes"
        ? `"${text}" is no longer accepted (it let clients name their own address): set the number of proxies in front of Plinth (1 for one) or their addresses and CIDR ranges (10.0.0.0/8,2001:db8::/32)`
        : `must be false, the number of proxies in front of Plinth (0–${MAX_FORWARDED_HOPS}), or a comma-separated list of their addresses and CIDR ranges`,
  });
  return z.NEVER;
});

export const REGIONS = ["ist", "fra", "ams", "lhr", "sjc", "iad", "sin", "syd"] as const;
const HOSTNAME = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*$/;
const MAILBOX = /^([^<>]*<[^\s@<>]+@[^\s@<>]+>|[^\s@<>]+@[^\s@<>]+)$/;

/**
 * `s3://ACCESS:SECRET@host:port/bucket?region=…&tls=false`: an S3-compatible server addressed by
 * path. The access key and secret are URL-encoded (a `:` in the key is `%3A`); TLS is on unless
 * `tls=false`; the region defaults to us-east-1.
 */
const storageUrl = z.string().transform((text, ctx): S3Location => {
  const refuse = (message: string) => {
    ctx.addIssue({ code: "custom", message });
    return z.NEVER;
  };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return refuse("must be an s3://ACCESS:SECRET@host:port/bucket URL");
  }
  if (url.protocol !== "s3:") return refuse("must start with s3:// (s3://ACCESS:SECRET@host:port/bucket)");
  if (!url.hostname) return refuse("needs a host (s3://ACCESS:SECRET@host:port/bucket)");
  if (!url.username || !url.password)
    return refuse("needs an access key and a secret (s3://ACCESS:SECRET@host/bucket)");
  const bucket = url.pathname.replace(/^\/+|\/+$/g, "");
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    return refuse("needs a bucket name after the host: 3 to 63 lower-case letters, digits, dots and dashes");
  }
  const tls = url.searchParams.get("tls") ?? "true";
  if (tls !== "true" && tls !== "false") return refuse("tls must be true or false");
  for (const name of url.searchParams.keys()) {
    if (name !== "tls" && name !== "region") return refuse(`unknown parameter '${name}' (region, tls)`);
  }
  return {
    endpoint: `${tls === "true" ? "https" : "http"}://${url.host}`,
    bucket,
    region: url.searchParams.get("region") || "us-east-1",
    accessKeyId: decodeURIComponent(url.username),
    secretAccessKey: decodeURIComponent(url.password),
  };
});

const EnvSchema = z.object({
  PORT: wholeNumber(0, 65535).default(8080),
  HOST: z
    .string()
    .refine((host) => isIP(host) !== 0 || HOSTNAME.test(host), "must be an IP address or a host name")
    .default("0.0.0.0"),
  PUBLIC_URL: z.url({ protocol: /^https?$/, message: "must be an http(s) URL" }).optional(),
  DATA_DIR: z.string().min(1).default("./data"),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, "must be a postgres:// connection string")
    .optional(),
  DATABASE_SCHEMA: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, "must be a lower-case SQL identifier")
    .optional(),
  AUTH_SECRET: z.string().min(32, "must be at least 32 characters").optional(),
  ENCRYPTION_KEY: z.string().min(32, "must be at least 32 characters").optional(),
  ENCRYPTION_KEY_PREVIOUS: z
    .string()
    .refine(
      (list) => list.split(",").every((key) => key.trim().length >= 32),
      "must be a comma-separated list of keys of at least 32 characters",
    )
    .optional(),
  COOKIE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,32}$/)
    .default("plinth"),
  SMTP_URL: z
    .url({ protocol: /^smtps?$/, hostname: /./, message: "must be an smtp:// or smtps:// URL with a host" })
    .optional(),
  MAIL_FROM: z
    .string()
    .regex(MAILBOX, "must be an address, or a name and <address>")
    .default("Plinth <no-reply@plinth.local>"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  RATE_LIMIT_PER_MINUTE: positiveInt.default(600),
  AUTH_RATE_LIMIT_PER_MINUTE: positiveInt.default(20),
  TRUST_PROXY: trustProxy.default({ hops: 0 }),
  SIGN_IN_FAILURES_PER_ACCOUNT: positiveInt.default(10),
  INVITATION_TTL_DAYS: days(1).default(7),
  SHUTDOWN_TIMEOUT_MS: milliseconds(0).default(10_000),
  SHUTDOWN_DELAY_MS: milliseconds(0).default(0),
  WORKERS: nonNegativeInt.default(8),
  WORKER_POLL_MS: milliseconds(1).default(1_000),
  WORKER_THREAD: booleanFlag.default(true),
  SERVED_REGIONS: z
    .string()
    .refine(
      (list) => list.split(",").every((region) => (REGIONS as readonly string[]).includes(region)),
      `must be a comma-separated list of region codes (${REGIONS.join(", ")})`,
    )
    .default(REGIONS.join(",")),
  PROJECT_PURGE_DAYS: days(0).default(7),
  EXPORT_RETENTION_DAYS: days(0).default(7),
  WEBHOOK_TIMEOUT_MS: milliseconds(1).default(10_000),
  WEBHOOK_MAX_ATTEMPTS: wholeNumber(1, 1000).default(10),
  WEBHOOK_BACKOFF_BASE_MS: milliseconds(1).default(5_000),
  WEBHOOK_DELIVERIES_RETENTION_DAYS: days(0).default(30),
  WEBHOOK_CONCURRENCY: positiveInt.default(256),
  WORKSPACE_MAX_OPEN: positiveInt.optional(),
  PLANS_FILE: z.string().optional(),
  DEFAULT_PLAN: z.string().default("free"),
  ALLOW_PRIVATE_WEBHOOK_URLS: booleanFlag.default(false),
  MAX_FILE_BYTES: positiveInt.default(25 * 1024 * 1024),
  DNS_SERVERS: z.string().optional(),
  DOMAIN_VERIFY_DAYS: days(1).default(7),
  STORAGE_URL: storageUrl.optional(),
  METRICS_TOKEN: z.string().min(16, "must be at least 16 characters").optional(),
  SIGNUP: z.enum(["open", "invite", "closed"]).default("open"),
  BILLING_PROVIDER: z.enum(["none", "test", "stripe"]).default("none"),
  STRIPE_SECRET_KEY: z.string().optional(),
  STRIPE_WEBHOOK_SECRET: z.string().optional(),
  STRIPE_API_BASE: z.url({ protocol: /^https?$/, message: "must be an http(s) URL" }).optional(),
});

/** Environment variables naming a Stripe price: `STRIPE_PRICE_PRO_MONTHLY`, `STRIPE_PRICE_PACK_R2`, … */
const STRIPE_PRICE = /^STRIPE_PRICE_([A-Z0-9_]+)$/;

export type Config = {
  port: number;
  host: string;
  publicUrl: string;
  dataDir: string;
  databaseUrl: string | undefined;
  databaseSchema: string | undefined;
  authSecret: string | undefined;
  /** Seals secrets at rest (SecretBox); unset: derived from the auth secret. */
  encryptionKey: string | undefined;
  /** Keys values may still be sealed with (a rotation under way). */
  previousEncryptionKeys: string[];
  cookiePrefix: string;
  smtpUrl: string | undefined;
  mailFrom: string;
  logLevel: z.infer<typeof EnvSchema>["LOG_LEVEL"];
  rateLimitPerMinute: number;
  authRateLimitPerMinute: number;
  trustProxy: TrustProxy;
  /** Failed sign-ins per account (per project and e-mail in a workspace) in a 15-minute window. */
  signInFailuresPerAccount: number;
  invitationTtlDays: number;
  shutdownTimeoutMs: number;
  /**
   * How long `SIGTERM` keeps accepting before it stops: health answers 503 and every response
   * ends its connection meanwhile, so a load balancer takes the instance out first.
   */
  shutdownDelayMs: number;
  /** Jobs this process runs at once; 0 runs no jobs here. */
  workers: number;
  workerPollMs: number;
  /** Run a server's job slots on a worker thread (a second core) rather than the API's event loop. */
  workerThread: boolean;
  /** Regions this deployment provisions projects in; a project elsewhere fails to provision. */
  servedRegions: string[];
  projectPurgeDays: number;
  /** Days an org export's dumps are kept; 0 keeps them. */
  exportRetentionDays: number;
  webhookTimeoutMs: number;
  webhookMaxAttempts: number;
  webhookBackoffBaseMs: number;
  /** Webhook deliveries in flight at once per worker process (on top of the `workers` job slots). */
  webhookConcurrency: number;
  /** Workspaces open at once per process; unset: derived from the file limit (see WorkspacePool). */
  workspaceMaxOpen: number | undefined;
  /** 0 keeps every delivery. */
  webhookDeliveriesRetentionDays: number;
  allowPrivateWebhookUrls: boolean;
  /** Largest workspace file upload. */
  maxFileBytes: number;
  /** The plan catalog: PLANS_FILE's, or the built-in one (DESIGN §8). */
  plans: Plan[];
  /** The plan new orgs start on. */
  defaultPlan: string;
  /** DNS servers custom domains are verified through (`host[:port]`); unset: the system's. */
  dnsServers: string[] | undefined;
  /** Days a custom domain may stay unverified before it is `failed`. */
  domainVerifyDays: number;
  /** Where files, backups' file bytes and export dumps are kept: an S3 bucket, or (unset) DATA_DIR. */
  storage: S3Location | undefined;
  /** The bearer token `GET /metrics` asks for; unset: no metrics endpoint (404). */
  metricsToken: string | undefined;
  /** Who may create an account: anyone, only an invited e-mail, or nobody (DESIGN §16). */
  signUp: "open" | "invite" | "closed";
  billing: {
    provider: "none" | "test" | "stripe";
    stripe?: {
      secretKey: string;
      webhookSecret: string;
      /** Where the Stripe API is reached (tests: a local stand-in); unset: Stripe's. */
      apiBase: string | undefined;
      /** Price ids by `<plan>:<interval>` (`pro:monthly`) and `pack:<type>` (`pack:r2`). */
      prices: Record<string, string>;
    };
  };
};

export class ConfigError extends Error {}

/**
 * Reads the environment into a typed config. Empty strings count as unset so that
 * `FOO= npm start` behaves like not setting FOO at all.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ""));
  const parsed = EnvSchema.safeParse(present);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ");
    throw new ConfigError(`invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  const dnsServers = e.DNS_SERVERS?.split(",").map((entry) => entry.trim());
  if (dnsServers) {
    try {
      new Resolver().setServers(dnsServers);
    } catch {
      throw new ConfigError(
        "invalid configuration: DNS_SERVERS: must be a comma-separated list of IP[:port] (IPv6 as [address]:port)",
      );
    }
  }
  let plans: Plan[];
  try {
    plans = readCatalog(e.PLANS_FILE);
  } catch (error) {
    throw new ConfigError(`invalid configuration: PLANS_FILE: ${(error as Error).message}`);
  }
  if (!plans.some((plan) => plan.id === e.DEFAULT_PLAN)) {
    throw new ConfigError(
      `invalid configuration: DEFAULT_PLAN: no plan "${e.DEFAULT_PLAN}" in the catalog (${plans.map((p) => p.id).join(", ")})`,
    );
  }
  let stripe: Config["billing"]["stripe"];
  if (e.BILLING_PROVIDER === "stripe") {
    if (!e.STRIPE_SECRET_KEY || !e.STRIPE_WEBHOOK_SECRET) {
      throw new ConfigError(
        "invalid configuration: BILLING_PROVIDER=stripe needs STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET",
      );
    }
    const prices: Record<string, string> = {};
    for (const [name, value] of Object.entries(present)) {
      const key = STRIPE_PRICE.exec(name)?.[1];
      if (!key || value === undefined) continue;
      const pack = /^PACK_(.+)$/.exec(key)?.[1];
      const plan = /^(.+)_(MONTHLY|ANNUAL)$/.exec(key);
      if (pack) prices[`pack:${pack.toLowerCase()}`] = value;
      else if (plan) prices[`${plan[1]?.toLowerCase()}:${plan[2]?.toLowerCase()}`] = value;
    }
    stripe = {
      secretKey: e.STRIPE_SECRET_KEY,
      webhookSecret: e.STRIPE_WEBHOOK_SECRET,
      apiBase: e.STRIPE_API_BASE,
      prices,
    };
  }
  return {
    billing: { provider: e.BILLING_PROVIDER, ...(stripe ? { stripe } : {}) },
    port: e.PORT,
    host: e.HOST,
    publicUrl: (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ""),
    dataDir: e.DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    databaseSchema: e.DATABASE_SCHEMA,
    authSecret: e.AUTH_SECRET,
    encryptionKey: e.ENCRYPTION_KEY,
    previousEncryptionKeys: e.ENCRYPTION_KEY_PREVIOUS?.split(",").map((key) => key.trim()) ?? [],
    cookiePrefix: e.COOKIE_PREFIX,
    smtpUrl: e.SMTP_URL,
    mailFrom: e.MAIL_FROM,
    logLevel: e.LOG_LEVEL,
    rateLimitPerMinute: e.RATE_LIMIT_PER_MINUTE,
    authRateLimitPerMinute: e.AUTH_RATE_LIMIT_PER_MINUTE,
    trustProxy: e.TRUST_PROXY,
    signInFailuresPerAccount: e.SIGN_IN_FAILURES_PER_ACCOUNT,
    invitationTtlDays: e.INVITATION_TTL_DAYS,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    shutdownDelayMs: e.SHUTDOWN_DELAY_MS,
    workers: e.WORKERS,
    workerPollMs: e.WORKER_POLL_MS,
    workerThread: e.WORKER_THREAD,
    servedRegions: e.SERVED_REGIONS.split(","),
    projectPurgeDays: e.PROJECT_PURGE_DAYS,
    exportRetentionDays: e.EXPORT_RETENTION_DAYS,
    dnsServers,
    domainVerifyDays: e.DOMAIN_VERIFY_DAYS,
    webhookTimeoutMs: e.WEBHOOK_TIMEOUT_MS,
    webhookMaxAttempts: e.WEBHOOK_MAX_ATTEMPTS,
    webhookBackoffBaseMs: e.WEBHOOK_BACKOFF_BASE_MS,
    webhookConcurrency: e.WEBHOOK_CONCURRENCY,
    workspaceMaxOpen: e.WORKSPACE_MAX_OPEN,
    webhookDeliveriesRetentionDays: e.WEBHOOK_DELIVERIES_RETENTION_DAYS,
    allowPrivateWebhookUrls: e.ALLOW_PRIVATE_WEBHOOK_URLS,
    maxFileBytes: e.MAX_FILE_BYTES,
    storage: e.STORAGE_URL,
    metricsToken: e.METRICS_TOKEN,
    signUp: e.SIGNUP,
    plans,
    defaultPlan: e.DEFAULT_PLAN,
  };
}
