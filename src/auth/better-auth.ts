import { betterAuth } from "better-auth";
import type { Kysely } from "kysely";
import type { Config } from "../config.ts";
import type { Dialect } from "../db/database.ts";
import type { Database } from "../db/schema.ts";
import { newId } from "../lib/ids.ts";
import type { Logger } from "../logger.ts";
import { withAuthCalls } from "./async-context.ts";

export interface AuthOptions {
  db: Kysely<Database>;
  dialect: Dialect;
  config: Config;
  secret: string;
  log: Logger;
}

/** How `forward` (auth/routes.ts) hands better-auth the client's address, which sessions record. */
export const CLIENT_IP_HEADER = "x-plinth-client-ip";

const timestamps = { createdAt: "created_at", updatedAt: "updated_at" } as const;

/**
 * better-auth serves sign-up, sign-in, sign-out and sessions under /api/auth, on the same
 * database. Its tables are named and cased like ours; its own in-memory rate limiter is off
 * because Plinth's rate limit (kept in the database) covers these routes.
 */
export function createAuth({ db, dialect, config, secret, log }: AuthOptions) {
  const auth = betterAuth({
    appName: "Plinth",
    baseURL: config.publicUrl,
    basePath: "/api/auth",
    secret,
    database: { db, type: dialect },
    trustedOrigins: [config.publicUrl],
    emailAndPassword: { enabled: true, minPasswordLength: 8, maxPasswordLength: 128 },
    rateLimit: { enabled: false },
    telemetry: { enabled: false },
    advanced: {
      cookiePrefix: config.cookiePrefix,
      // The session cookie is `<prefix>.session_token` on every deployment (SPEC); better-auth
      // would name it `__Secure-<prefix>.session_token` behind an https PUBLIC_URL. It is still
      // marked Secure there.
      useSecureCookies: false,
      defaultCookieAttributes: { secure: config.publicUrl.startsWith("https://") },
      // Plinth checks Origin itself on every cookie-authenticated write (http/same-origin.ts), the
      // same way for its own routes and these; better-auth's check would also refuse API clients
      // that send no Origin at all, such as curl and CI scripts holding a session cookie.
      disableCSRFCheck: true,
      // The address Plinth found (TRUST_PROXY), in full: better-auth would read X-Forwarded-For,
      // which the client writes, and keep only an IPv6 client's /64.
      ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER], ipv6Subnet: 128 },
      database: { generateId: ({ model }) => newId(model === "user" ? "acct" : model.slice(0, 4)) },
    },
    logger: {
      level: "warn",
      log: (level, message) => log[level]({ component: "auth" }, message),
    },
    user: {
      modelName: "users",
      fields: { emailVerified: "email_verified", ...timestamps },
    },
    session: {
      modelName: "sessions",
      fields: {
        userId: "user_id",
        expiresAt: "expires_at",
        ipAddress: "ip_address",
        userAgent: "user_agent",
        ...timestamps,
      },
    },
    account: {
      modelName: "auth_accounts",
      fields: {
        accountId: "account_id",
        providerId: "provider_id",
        userId: "user_id",
        accessToken: "access_token",
        refreshToken: "refresh_token",
        idToken: "id_token",
        accessTokenExpiresAt: "access_token_expires_at",
        refreshTokenExpiresAt: "refresh_token_expires_at",
        ...timestamps,
      },
    },
    verification: {
      modelName: "verifications",
      fields: { expiresAt: "expires_at", ...timestamps },
    },
  });
  return withAuthCalls(auth);
}

export type Auth = ReturnType<typeof createAuth>;
