import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CallResult,
  call,
  createApiKey,
  createOrg,
  expectError,
  expectValidation,
  sessionCookieFrom,
  signUp,
  startApp,
  type TestApp,
  type TestUser,
  uniqueEmail,
  until,
} from "./harness.ts";

const PASSWORD = "correct-horse-battery";
const ACCOUNT_KEYS = ["email", "emailVerified", "id", "name", "preferences", "timezone", "title"];
const AUTH_USER_KEYS = ["createdAt", "email", "emailVerified", "id", "image", "name", "updatedAt"];

let app: TestApp;

beforeAll(async () => {
  // Many sign-ups and sign-ins from one address: lift the per-IP credential limit.
  app = await startApp({ AUTH_RATE_LIMIT_PER_MINUTE: "10000" });
});

afterAll(() => app?.close());

function expectAuthUser(user: any, email: string, name: string): void {
  expect(Object.keys(user).sort()).toEqual(AUTH_USER_KEYS);
  expect(user).toMatchObject({ email, name, emailVerified: false, image: null, id: expect.any(String) });
  expect(Number.isNaN(Date.parse(user.createdAt))).toBe(false);
  expect(Number.isNaN(Date.parse(user.updatedAt))).toBe(false);
}

function signUpRaw(body: unknown): Promise<CallResult> {
  return call(app, "POST", "/auth/sign-up/email", { body });
}

function signInRaw(body: unknown): Promise<CallResult> {
  return call(app, "POST", "/auth/sign-in/email", { body });
}

async function getAccount(cookie: string): Promise<any> {
  const res = await call(app, "GET", "/account", { cookie });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(Object.keys(res.body)).toEqual(["account"]);
  return res.body.account;
}

describe("the session cookie behind an https PUBLIC_URL", () => {
  it("is still named <prefix>.session_token, and marked Secure", async () => {
    const secure = await startApp({ PUBLIC_URL: "https://plinth.example.test", COOKIE_PREFIX: "acme" });
    try {
      const res = await call(secure, "POST", "/auth/sign-up/email", {
        body: { email: uniqueEmail("https"), password: PASSWORD, name: "H" },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const setCookie = res.headers.getSetCookie().find((c) => c.includes("session_token="));
      expect(setCookie).toMatch(/^acme\.session_token=/);
      expect(setCookie).toMatch(/;\s*Secure/i);
      const cookie = (setCookie as string).split(";")[0] as string;
      expect((await call(secure, "GET", "/account", { cookie })).status).toBe(200);
    } finally {
      await secure.close();
    }
  });
});

describe("POST /auth/sign-up/email", () => {
  it("creates the account, signs it in and sets the session cookie", async () => {
    const email = uniqueEmail("signup");
    const res = await signUpRaw({ email, password: PASSWORD, name: "Ada Lovelace" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.token).toEqual(expect.any(String));
    expectAuthUser(res.body.user, email, "Ada Lovelace");
    const setCookie = res.headers.getSetCookie().find((c) => c.startsWith("plinth.session_token="));
    expect(setCookie).toBeDefined();
    expect(setCookie).toMatch(/HttpOnly/i);

    const account = await getAccount(sessionCookieFrom(res.headers));
    expect(account).toEqual({
      id: res.body.user.id,
      email,
      name: "Ada Lovelace",
      emailVerified: false,
      title: null,
      timezone: null,
      preferences: null,
    });
  });

  it("accepts a sign-up without a name; the account's name is then null", async () => {
    const email = uniqueEmail("noname");
    const res = await signUpRaw({ email, password: PASSWORD });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const account = await getAccount(sessionCookieFrom(res.headers));
    expect(account.email).toBe(email);
    expect(account.name).toBeNull();
  });

  it("refuses a second account with the same e-mail (409 CONFLICT), in any letter case", async () => {
    const email = uniqueEmail("dup");
    expect((await signUpRaw({ email, password: PASSWORD, name: "First" })).status).toBe(200);
    const again = await signUpRaw({ email, password: "another-password", name: "Second" });
    expectError(again, 409, "CONFLICT");
    expect(again.headers.getSetCookie().some((c) => /session_token=[^;]+/.test(c))).toBe(false);
    expectError(await signUpRaw({ email: email.toUpperCase(), password: PASSWORD, name: "Shout" }), 409, "CONFLICT");
    // The first account keeps its password.
    expect((await signInRaw({ email, password: PASSWORD })).status).toBe(200);
    expectError(await signInRaw({ email, password: "another-password" }), 401, "UNAUTHORIZED");
  });

  it("gives simultaneous sign-ups of one e-mail one account: one 200, every other 409 CONFLICT", async () => {
    const email = uniqueEmail("race");
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        signUpRaw({ email: i % 2 ? email : email.toUpperCase(), password: PASSWORD, name: `R${i}` }),
      ),
    );
    expect(answers.filter((res) => res.status === 200)).toHaveLength(1);
    for (const res of answers.filter((r) => r.status !== 200)) expectError(res, 409, "CONFLICT");
    expect((await signInRaw({ email, password: PASSWORD })).status).toBe(200);
  });

  it("takes a password of 8 characters and refuses 7, naming the field", async () => {
    const short = await signUpRaw({ email: uniqueEmail("short"), password: "1234567", name: "Short" });
    expectValidation(short, "password");
    const ok = await signUpRaw({ email: uniqueEmail("eight"), password: "12345678", name: "Eight" });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expectValidation(await signUpRaw({ email: uniqueEmail("nopass"), name: "No Pass" }), "password");
  });

  it.each(["not-an-email", "a@", "@example.test", ""])("refuses the e-mail %j", async (email) => {
    expectValidation(await signUpRaw({ email, password: PASSWORD, name: "Bad Mail" }), "email");
  });

  it("refuses a missing e-mail and a malformed body", async () => {
    expectValidation(await signUpRaw({ password: PASSWORD, name: "No Mail" }), "email");
    const malformed = await call(app, "POST", "/auth/sign-up/email", {
      rawBody: "{oops",
      headers: { "content-type": "application/json" },
    });
    expectError(malformed, 400, "BAD_REQUEST");
  });
});

describe("POST /auth/sign-in/email, GET /auth/get-session, POST /auth/sign-out", () => {
  let user: TestUser;
  beforeAll(async () => {
    user = await signUp(app, uniqueEmail("session"), "Grace Hopper");
  });

  it("signs in with the right password and sets a working session cookie", async () => {
    const res = await signInRaw({ email: user.email, password: PASSWORD });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.token).toEqual(expect.any(String));
    expectAuthUser(res.body.user, user.email, "Grace Hopper");
    expect(res.body.user.id).toBe(user.accountId);
    const cookie = sessionCookieFrom(res.headers);
    expect(cookie).not.toBe(user.cookie);
    expect((await getAccount(cookie)).id).toBe(user.accountId);
  });

  it("matches the e-mail regardless of letter case", async () => {
    const res = await signInRaw({ email: user.email.toUpperCase(), password: PASSWORD });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.user.id).toBe(user.accountId);
  });

  it("refuses a wrong password and an unknown e-mail alike with 401 UNAUTHORIZED", async () => {
    const wrong = await signInRaw({ email: user.email, password: "wrong-password" });
    expectError(wrong, 401, "UNAUTHORIZED");
    expect(wrong.headers.getSetCookie().some((c) => /session_token=[^;]+/.test(c))).toBe(false);
    const unknown = await signInRaw({ email: uniqueEmail("ghost"), password: "wrong-password" });
    expectError(unknown, 401, "UNAUTHORIZED");
    // No account enumeration: both failures read the same.
    expect(unknown.body.error.message).toBe(wrong.body.error.message);
  });

  it("validates the sign-in body", async () => {
    expectValidation(await signInRaw({ email: user.email }), "password");
    expectValidation(await signInRaw({ email: user.email, password: "" }), "password");
    expectValidation(await signInRaw({ email: "nope", password: PASSWORD }), "email");
  });

  it("GET /auth/get-session returns the session and user, or null without a session", async () => {
    const res = await call(app, "GET", "/auth/get-session", { cookie: user.cookie });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(["session", "user"]);
    expect(res.body.session.userId).toBe(user.accountId);
    // The cookie's secret is never read back.
    expect(res.body.session).not.toHaveProperty("token");
    expect(JSON.stringify(res.body)).not.toContain(decodeURIComponent(user.cookie.split("=")[1] ?? "").split(".")[0]);
    expectAuthUser(res.body.user, user.email, "Grace Hopper");
    expect(res.body.user.id).toBe(user.accountId);

    const anonymous = await call(app, "GET", "/auth/get-session");
    expect(anonymous.status).toBe(200);
    expect(anonymous.body).toBeNull();
  });

  it("sign-out ends that session only: its cookie is then 401 while other sessions keep working", async () => {
    const signIn = await signInRaw({ email: user.email, password: PASSWORD });
    const cookie = sessionCookieFrom(signIn.headers);
    expect((await getAccount(cookie)).id).toBe(user.accountId);

    const out = await call(app, "POST", "/auth/sign-out", { cookie });
    expect(out.status, JSON.stringify(out.body)).toBe(200);
    expect(out.body).toEqual({ success: true });
    const cleared = out.headers.getSetCookie().find((c) => c.startsWith("plinth.session_token="));
    expect(cleared).toMatch(/^plinth\.session_token=;/);
    expect(cleared).toMatch(/Max-Age=0/i);

    expectError(await call(app, "GET", "/account", { cookie }), 401, "UNAUTHORIZED");
    expectError(await call(app, "PATCH", "/account", { cookie, body: { title: "Ghost" } }), 401, "UNAUTHORIZED");
    expectError(await call(app, "GET", "/orgs", { cookie }), 401, "UNAUTHORIZED");
    const session = await call(app, "GET", "/auth/get-session", { cookie });
    expect(session.status).toBe(200);
    expect(session.body).toBeNull();

    // The sign-up session is a different one and still works.
    expect((await getAccount(user.cookie)).id).toBe(user.accountId);
  });
});

describe("session cookies", () => {
  /** The cookie's parts: `<name>=<url-encoded "token.signature">`. */
  function partsOf(cookie: string): { name: string; token: string; signature: string } {
    const [name = "", value = ""] = cookie.split("=", 2);
    const signed = decodeURIComponent(value);
    const dot = signed.lastIndexOf(".");
    return { name, token: signed.slice(0, dot), signature: signed.slice(dot + 1) };
  }

  function cookieOf(name: string, signed: string): string {
    return `${name}=${encodeURIComponent(signed)}`;
  }

  async function sessionRow(accountId: string) {
    return app.server.deps.db
      .selectFrom("sessions")
      .select(["token", "expires_at"])
      .where("user_id", "=", accountId)
      .executeTakeFirstOrThrow();
  }

  it("refuses a tampered cookie with 401, also while the genuine one has just been read", async () => {
    const user = await signUp(app);
    const other = await signUp(app);
    expect((await getAccount(user.cookie)).id).toBe(user.accountId);
    const { name, token, signature } = partsOf(user.cookie);
    const theirs = partsOf(other.cookie);
    const flip = (text: string, at: number) => {
      const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
      const index = alphabet.indexOf(text[at] ?? "A");
      // The lowest bit of the signature's last character is padding: the same bytes, spelt
      // otherwise, which better-auth never issues.
      return text.slice(0, at) + alphabet[index ^ 1] + text.slice(at + 1);
    };
    const tampered = [
      `${flip(token, 0)}.${signature}`,
      `${token}.${flip(signature, 0)}`,
      `${token}.${flip(signature, 42)}`,
      `${token}.${theirs.signature}`,
      `${theirs.token}.${signature}`,
      token,
      `${token}.`,
    ];
    for (const signed of tampered) {
      expectError(await call(app, "GET", "/account", { cookie: cookieOf(name, signed) }), 401, "UNAUTHORIZED");
    }
    expect((await getAccount(user.cookie)).id).toBe(user.accountId);
    expect((await getAccount(cookieOf(name, `${token}.${signature}`))).id).toBe(user.accountId);
  });

  it("refuses an expired session, and the session of a deleted account", async () => {
    const expiring = await signUp(app);
    await app.server.deps.db
      .updateTable("sessions")
      .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
      .where("user_id", "=", expiring.accountId)
      .execute();
    expectError(await call(app, "GET", "/account", { cookie: expiring.cookie }), 401, "UNAUTHORIZED");

    const deleted = await signUp(app);
    await app.server.deps.db.deleteFrom("users").where("id", "=", deleted.accountId).execute();
    expectError(await call(app, "GET", "/account", { cookie: deleted.cookie }), 401, "UNAUTHORIZED");
  });

  it("renews a session a day after it was last renewed, as better-auth does", async () => {
    const user = await signUp(app);
    const DAY_MS = 86_400_000;
    // Issued for 7 days and renewed after 1: a minute past due.
    const due = new Date(Date.now() + 6 * DAY_MS - 60_000);
    await app.server.deps.db
      .updateTable("sessions")
      .set({ expires_at: due.toISOString() })
      .where("user_id", "=", user.accountId)
      .execute();
    expect((await getAccount(user.cookie)).id).toBe(user.accountId);
    const renewed = new Date((await sessionRow(user.accountId)).expires_at).getTime();
    expect(renewed).toBeGreaterThan(Date.now() + 7 * DAY_MS - 60_000);
  });

  describe("on two processes sharing one database", () => {
    let second: TestApp;
    beforeAll(async () => {
      second = await startApp({ AUTH_RATE_LIMIT_PER_MINUTE: "10000" }, { shareDatabaseWith: app });
    });
    afterAll(() => second?.close());

    it("a sign-out is effective at once on the process that served it, and within 5 s on the other", async () => {
      const user = await signUp(app);
      const account = (on: TestApp) => call(on, "GET", "/account", { cookie: user.cookie });
      expect((await account(app)).status).toBe(200);
      expect((await account(second)).status).toBe(200);

      expect((await call(app, "POST", "/auth/sign-out", { cookie: user.cookie })).status).toBe(200);
      const signedOut = Date.now();
      expectError(await account(app), 401, "UNAUTHORIZED");
      // The other process may trust what it read a moment ago, for a moment.
      await until("the other process to refuse the session", async () => (await account(second)).status === 401, 5_000);
      expect(Date.now() - signedOut).toBeLessThan(5_000);
      expectError(await account(second), 401, "UNAUTHORIZED");
    });

    it("a session signed in on one process works on the other at once", async () => {
      const user = await signUp(second);
      expect((await getAccount(user.cookie)).id).toBe(user.accountId);
    });
  });
});

describe("GET and PATCH /account", () => {
  let user: TestUser;
  beforeAll(async () => {
    user = await signUp(app, uniqueEmail("profile"), "Initial Name");
  });

  async function patch(body: unknown, cookie = user.cookie): Promise<CallResult> {
    return call(app, "PATCH", "/account", { cookie, body });
  }

  it("returns the account with exactly the SPEC fields", async () => {
    const account = await getAccount(user.cookie);
    expect(Object.keys(account).sort()).toEqual(ACCOUNT_KEYS);
    expect(account).toEqual({
      id: user.accountId,
      email: user.email,
      name: "Initial Name",
      emailVerified: false,
      title: null,
      timezone: null,
      preferences: null,
    });
  });

  it("updates name, title and timezone and answers {ok: true}", async () => {
    const res = await patch({ name: "Ada King", title: "Countess of Lovelace", timezone: "Europe/London" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ ok: true });
    expect(await getAccount(user.cookie)).toMatchObject({
      id: user.accountId,
      email: user.email,
      name: "Ada King",
      title: "Countess of Lovelace",
      timezone: "Europe/London",
    });
  });

  it("accepts name and title of 120 characters and timezone of 60", async () => {
    const name = "n".repeat(120);
    const title = "t".repeat(120);
    const timezone = "z".repeat(60);
    const res = await patch({ name, title, timezone });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await getAccount(user.cookie)).toMatchObject({ name, title, timezone });
  });

  it("clears name, title and timezone with null (they read as null)", async () => {
    expect((await patch({ name: "Set", title: "Set", timezone: "UTC" })).status).toBe(200);
    const res = await patch({ name: null, title: null, timezone: null });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await getAccount(user.cookie)).toMatchObject({ name: null, title: null, timezone: null });
  });

  it("refuses name or title of 121 characters and timezone of 61, changing nothing", async () => {
    const before = await getAccount(user.cookie);
    expectValidation(await patch({ name: "n".repeat(121) }), "name");
    expectValidation(await patch({ title: "t".repeat(121) }), "title");
    expectValidation(await patch({ timezone: "z".repeat(61) }), "timezone");
    expectValidation(await patch({ name: "Fine", timezone: "z".repeat(61) }), "timezone");
    expectValidation(await patch({ name: 12 }), "name");
    expect(await getAccount(user.cookie)).toEqual(before);
  });

  it("keeps preferences exactly as given, nested and null values included, and replaces them whole", async () => {
    const preferences = {
      theme: "dark",
      sidebar: null,
      density: 2,
      beta: false,
      layout: { panels: ["logs", null, { id: "metrics", pinned: true }], widths: { left: 240, right: null } },
      emptyObject: {},
      emptyList: [],
      unicode: "çğış ✓",
    };
    const res = await patch({ preferences });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ ok: true });
    expect((await getAccount(user.cookie)).preferences).toStrictEqual(preferences);

    // Other fields leave preferences alone.
    expect((await patch({ title: "Engineer" })).status).toBe(200);
    expect((await getAccount(user.cookie)).preferences).toStrictEqual(preferences);

    // A new object replaces the old one; keys absent from it are gone.
    const replacement = { theme: null, notifications: { email: true } };
    expect((await patch({ preferences: replacement })).status).toBe(200);
    expect((await getAccount(user.cookie)).preferences).toStrictEqual(replacement);

    expect((await patch({ preferences: {} })).status).toBe(200);
    expect((await getAccount(user.cookie)).preferences).toStrictEqual({});

    // A `__proto__` key is a key like any other (JSON.parse makes it an own property).
    const odd = JSON.parse('{"__proto__":{"x":1},"constructor":{"prototype":{"y":2}}}');
    expect((await patch({ preferences: odd })).status).toBe(200);
    const stored = (await getAccount(user.cookie)).preferences;
    expect(Object.getOwnPropertyDescriptor(stored, "__proto__")?.value).toEqual({ x: 1 });
    expect(stored.constructor).toEqual({ prototype: { y: 2 } });
  });

  it("refuses preferences that are not an object", async () => {
    expectValidation(await patch({ preferences: ["dark"] }), "preferences");
    expectValidation(await patch({ preferences: "dark" }), "preferences");
    expectValidation(await patch({ preferences: 1 }), "preferences");
  });

  it("accepts an empty body", async () => {
    const before = await getAccount(user.cookie);
    const res = await patch({});
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true });
    expect(await getAccount(user.cookie)).toEqual(before);
  });

  it("accepts a PATCH with no body and no content type, and changes nothing", async () => {
    const before = await getAccount(user.cookie);
    const res = await call(app, "PATCH", "/account", { cookie: user.cookie });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await getAccount(user.cookie)).toEqual(before);
  });

  it("changes only the caller's own account", async () => {
    const other = await signUp(app, uniqueEmail("other"), "Other Person");
    expect((await patch({ name: "Changed By Other", preferences: { x: 1 } }, other.cookie)).status).toBe(200);
    expect(await getAccount(other.cookie)).toMatchObject({ name: "Changed By Other", preferences: { x: 1 } });
    const mine = await getAccount(user.cookie);
    expect(mine.id).toBe(user.accountId);
    expect(mine.name).not.toBe("Changed By Other");
  });

  it("answers 401 without credentials", async () => {
    expectError(await call(app, "GET", "/account"), 401, "UNAUTHORIZED");
    expectError(await call(app, "PATCH", "/account", { body: { name: "Nobody" } }), 401, "UNAUTHORIZED");
    const bogus = "plinth.session_token=not-a-session.sig";
    expectError(await call(app, "GET", "/account", { cookie: bogus }), 401, "UNAUTHORIZED");
  });

  it.each(["full", "deploy", "read-only"] as const)("answers 403 to a %s API key", async (scope) => {
    const owner = await signUp(app);
    const org = await createOrg(app, owner, `Account Keys ${scope}`);
    const { token } = await createApiKey(app, owner, org.slug, scope);
    expectError(await call(app, "GET", "/account", { token }), 403, "FORBIDDEN");
    expectError(await call(app, "PATCH", "/account", { token, body: { name: "Robot" } }), 403, "FORBIDDEN");
    expect((await getAccount(owner.cookie)).name).toBe("Test User");
  });
});

describe("better-auth's AsyncLocalStorage", () => {
  /** better-auth's instances, where `@better-auth/core` keeps them. */
  function authStorages(): Array<{ enabled?: boolean }> {
    const global = (globalThis as Record<symbol, { context?: Record<string, { enabled?: boolean }> }>)[
      Symbol.for("better-auth:global")
    ];
    return Object.values(global?.context ?? {});
  }
  const hooksPromises = Number(process.versions.node.split(".")[0]) < 24;

  it("is switched off once no auth call is under way, and concurrent auth calls keep working", async () => {
    const users = await Promise.all(Array.from({ length: 6 }, () => signUp(app)));
    // Sessions read by better-auth (get-session) and sign-ins, all at once.
    const results = await Promise.all([
      ...users.map((user) => call(app, "GET", "/auth/get-session", { cookie: user.cookie })),
      ...users.map((user) =>
        call(app, "POST", "/auth/sign-in/email", { body: { email: user.email, password: PASSWORD } }),
      ),
    ]);
    for (const res of results) expect(res.status, JSON.stringify(res.body)).toBe(200);
    for (const [i, user] of users.entries()) expect(results[i]?.body.user.email).toBe(user.email);
    expect(authStorages().length).toBeGreaterThan(0);
    // Before Node 24 an enabled AsyncLocalStorage hooks every promise in the process.
    if (hooksPromises) for (const storage of authStorages()) expect(storage.enabled).toBe(false);
  });
});
