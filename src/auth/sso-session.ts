import { createHmac, randomBytes } from "node:crypto";
import type { Deps } from "../deps.ts";
import { newId } from "../lib/ids.ts";
import type { Auth } from "./better-auth.ts";

/**
 * Signs an account in after single sign-on: a session row as better-auth writes one, and the
 * `Set-Cookie` of its usual session cookie (`<token>.<HMAC-SHA256 of the token under better-auth's
 * secret, base64>`, URL-encoded), which better-auth and ConsoleSessions then read like any other.
 */
export async function startSsoSession(
  deps: Deps,
  auth: Auth,
  accountId: string,
  client: { ip: string | null; userAgent: string | undefined },
): Promise<string> {
  const context = await auth.$context;
  const token = randomBytes(24).toString("base64url");
  const now = new Date();
  const expiresInSeconds = context.sessionConfig.expiresIn;
  const expiresAt = new Date(now.getTime() + expiresInSeconds * 1000);
  const at = (date: Date) => (deps.dialect === "postgres" ? date : date.toISOString());
  await deps.db
    .insertInto("sessions")
    .values({
      id: newId("sess", now),
      user_id: accountId,
      token,
      expires_at: at(expiresAt),
      ip_address: client.ip ?? "",
      user_agent: (client.userAgent ?? "").slice(0, 512),
      created_at: at(now),
      updated_at: at(now),
    })
    .execute();
  const signature = createHmac("sha256", context.secret).update(token).digest("base64");
  const value = encodeURIComponent(`${token}.${signature}`);
  const secure = deps.config.publicUrl.startsWith("https://") ? "; Secure" : "";
  return `${deps.config.cookiePrefix}.session_token=${value}; Max-Age=${expiresInSeconds}; Path=/; HttpOnly; SameSite=Lax${secure}`;
}
