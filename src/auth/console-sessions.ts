import { createHmac, timingSafeEqual } from "node:crypto";
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { preparedRead } from "../db/compiled.ts";
import type { Deps } from "../deps.ts";
import type { AccountPrincipal } from "../http/principal.ts";
import type { Auth } from "./better-auth.ts";

/**
 * How long this process trusts a session it has read before reading it again: a sign-out served
 * by another process of the deployment takes effect here within this time.
 */
const REMEMBER_MS = 2_000;
/** Sessions remembered at once; past that the oldest are read again. */
const MAX_REMEMBERED = 10_000;

/** A live session as a request needs it: who is signed in, and until when. */
interface LiveSession {
  principal: AccountPrincipal;
  /** Epoch ms. */
  expiresAt: number;
}

interface Remembered {
  /** Epoch ms after which the session is read again. */
  until: number;
  /** The session as read (null: none, expired, or its account deleted), or the read under way. */
  session: LiveSession | null | Promise<LiveSession | null>;
}

/** What this reads of better-auth's resolved configuration. */
interface Settings {
  secret: string;
  expiresInMs: number;
  updateAgeMs: number;
  /** The cookie better-auth sets on a sign-in without "remember me". */
  dontRemember: string;
}

interface SessionRow {
  account_id: string;
  email: string;
  name: string;
  expires_at: Date | string;
}

/** A session with its account, by token: one indexed read, and only one whose account exists. */
const findSession = preparedRead<SessionRow>("plinth_session_by_token", (db) =>
  db
    .selectFrom("sessions")
    .innerJoin("users", "users.id", "sessions.user_id")
    .select(["users.id as account_id", "users.email", "users.name", "sessions.expires_at"])
    .where("sessions.token", "=", "?"),
);

/**
 * The accounts behind console session cookies. better-auth's `getSession` costs several times a
 * whole API-key request (bench/RESULTS.md); this reads the same session row and holds it for a
 * moment, by the cookie's signed value. Roles are never held: they are read per request.
 *
 * The cookie is `<token>.<signature>`, the signature HMAC-SHA256 of the token under better-auth's
 * secret, in base64, URL-encoded as a whole; it is checked here the same way, and only the one
 * encoding better-auth issues is accepted, so a token has one cache entry that a sign-out clears.
 * better-auth still owns a session's life: a session due for its sliding renewal is read through
 * `getSession`, which renews it.
 */
export class ConsoleSessions {
  private readonly cookieName: string;
  private readonly remembered = new Map<string, Remembered>();
  private settings: Settings | undefined;
  private readonly settled: Promise<void>;

  constructor(
    private readonly deps: Pick<Deps, "db" | "reader" | "config">,
    private readonly auth: Auth,
  ) {
    this.cookieName = `${deps.config.cookiePrefix}.session_token`;
    this.settled = auth.$context.then((context) => {
      this.settings = {
        secret: context.secret,
        expiresInMs: context.sessionConfig.expiresIn * 1000,
        updateAgeMs: context.sessionConfig.updateAge * 1000,
        dontRemember: context.authCookies.dontRememberToken.name,
      };
    });
  }

  /**
   * The account signed in by the request's session cookie: undefined without one, and for one
   * that is forged, expired, signed out, or whose account is gone. Answers at once (no await) for
   * a session read in the last moments.
   */
  accountOf(c: Context): AccountPrincipal | undefined | Promise<AccountPrincipal | undefined> {
    const signed = getCookie(c, this.cookieName);
    if (!signed) return undefined;
    const now = Date.now();
    const known = this.remembered.get(signed);
    if (known && known.until > now) {
      const { session } = known;
      return session instanceof Promise ? session.then((s) => liveAt(s, Date.now())) : liveAt(session, now);
    }
    const { settings } = this;
    if (!settings) return this.settled.then(() => this.accountOf(c));
    const token = verifiedToken(signed, settings.secret);
    if (token === undefined) return undefined;
    return this.read(c, settings, signed, token).then((s) => liveAt(s, Date.now()));
  }

  /** Forgets the request's session once better-auth has ended it, so that this process refuses it at once. */
  forget(c: Context): void {
    const signed = getCookie(c, this.cookieName);
    if (signed) this.remembered.delete(signed);
  }

  /** Reads the session, once for all the requests that ask meanwhile. */
  private read(c: Context, settings: Settings, signed: string, token: string): Promise<LiveSession | null> {
    const now = Date.now();
    const entry: Remembered = { until: now + REMEMBER_MS, session: null };
    const reading = this.lookUp(c, settings, token).then(
      (session) => {
        // Not when a sign-out forgot the entry meanwhile: the read may predate it.
        if (this.remembered.get(signed) === entry) entry.session = session;
        return session;
      },
      (error: unknown) => {
        if (this.remembered.get(signed) === entry) this.remembered.delete(signed);
        throw error;
      },
    );
    entry.session = reading;
    this.remember(signed, entry, now);
    return reading;
  }

  private async lookUp(c: Context, settings: Settings, token: string): Promise<LiveSession | null> {
    const row = await findSession(this.deps, token);
    if (!row) return null;
    // better-auth writes and checks expiry by the system clock, not Plinth's.
    const now = Date.now();
    const expiresAt = new Date(row.expires_at).getTime();
    if (expiresAt <= now) return null;
    // better-auth renews a session a day (`updateAge`) after it last did, unless it was signed in
    // without "remember me" (a cookie of its own says so; a forged one only spares its bearer's
    // session from renewal).
    const dueForRenewal = expiresAt - settings.expiresInMs + settings.updateAgeMs <= now;
    if (dueForRenewal && !getCookie(c, settings.dontRemember)) return this.renewed(c);
    return {
      principal: { type: "account", accountId: row.account_id, email: row.email, name: row.name || null },
      expiresAt,
    };
  }

  private async renewed(c: Context): Promise<LiveSession | null> {
    const read = await this.auth.api.getSession({ headers: c.req.raw.headers });
    if (!read) return null;
    return {
      principal: { type: "account", accountId: read.user.id, email: read.user.email, name: read.user.name || null },
      expiresAt: read.session.expiresAt.getTime(),
    };
  }

  private remember(signed: string, entry: Remembered, now: number): void {
    // Entries go in in the order they lapse: the stale ones are at the front.
    for (const [key, oldest] of this.remembered) {
      if (oldest.until > now && this.remembered.size < MAX_REMEMBERED) break;
      this.remembered.delete(key);
    }
    this.remembered.delete(signed);
    this.remembered.set(signed, entry);
  }
}

function liveAt(session: LiveSession | null, now: number): AccountPrincipal | undefined {
  return session && session.expiresAt > now ? session.principal : undefined;
}

const SIGNATURE = /^[A-Za-z0-9+/]{43}=$/;

/** The token of a signed cookie value whose signature is the one better-auth makes for it. */
function verifiedToken(signed: string, secret: string): string | undefined {
  const dot = signed.lastIndexOf(".");
  if (dot < 1) return undefined;
  const token = signed.slice(0, dot);
  const signature = signed.slice(dot + 1);
  if (!SIGNATURE.test(signature)) return undefined;
  const expected = createHmac("sha256", secret).update(token).digest("base64");
  return timingSafeEqual(Buffer.from(signature), Buffer.from(expected)) ? token : undefined;
}
