import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  call,
  createActiveProject,
  createApiKey,
  createOrg,
  signUp,
  startApp,
  type TestApp,
  type TestUser,
  uniqueEmail,
} from "./harness.ts";

const MINUTE = 60_000;
const WINDOW = 15 * MINUTE;
const PASSWORD = "correct-horse-battery";
const GENEROUS = { RATE_LIMIT_PER_MINUTE: "100000", AUTH_RATE_LIMIT_PER_MINUTE: "100000" };

/** Moves the app's clock to just after the start of the next window of `ms`, so a test cannot straddle two. */
function toNextWindow(app: TestApp, ms: number): void {
  app.clock.advance(ms - (app.clock.now().getTime() % ms) + 10);
}

/** Renames the org through `forwardedFor` and answers the `ip` of the audit row it wrote. */
async function auditedIp(app: TestApp, owner: TestUser, slug: string, forwardedFor?: string): Promise<string | null> {
  const headers: Record<string, string> = forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor };
  const renamed = await call(app, "PATCH", `/org/${slug}`, {
    cookie: owner.cookie,
    headers,
    body: { name: `Renamed ${Math.random()}` },
  });
  expect(renamed.status, JSON.stringify(renamed.body)).toBe(200);
  const audit = await call(app, "GET", `/org/${slug}/audit?limit=1`, { cookie: owner.cookie });
  expect(audit.status).toBe(200);
  expect(audit.body.events[0].action).toBe("org.updated");
  return audit.body.events[0].ip;
}

describe("TRUST_PROXY=1: one proxy in front", () => {
  let app: TestApp;
  let owner: TestUser;
  let slug: string;
  let key: string;

  beforeAll(async () => {
    app = await startApp({ TRUST_PROXY: "1", ...GENEROUS });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Proxied")).slug;
    key = (await createApiKey(app, owner, slug, "read-only")).token;
  });
  afterAll(() => app.close());

  it("takes the address the proxy appended, whatever the client wrote before it", async () => {
    expect(await auditedIp(app, owner, slug, "203.0.113.9")).toBe("203.0.113.9");
    expect(await auditedIp(app, owner, slug, "6.6.6.6, 203.0.113.9")).toBe("203.0.113.9");
    expect(await auditedIp(app, owner, slug, "6.6.6.6,  , 10.0.0.1,203.0.113.9 ")).toBe("203.0.113.9");
    // Without the header, the proxy's own address (the socket's).
    expect(await auditedIp(app, owner, slug)).toBe("127.0.0.1");
  });

  it("reads addresses as proxies write them, and keeps an IPv6 address whole", async () => {
    expect(await auditedIp(app, owner, slug, "198.51.100.7:5678")).toBe("198.51.100.7");
    expect(await auditedIp(app, owner, slug, "[2001:db8::1]:4711")).toBe("2001:db8::1");
    expect(await auditedIp(app, owner, slug, "fe80::1%eth0")).toBe("fe80::1");
    expect(await auditedIp(app, owner, slug, "::ffff:198.51.100.8")).toBe("198.51.100.8");
    expect(await auditedIp(app, owner, slug, "2001:db8:1:2:3:4:5:6")).toBe("2001:db8:1:2:3:4:5:6");
  });

  it("never takes an entry that is not an address: the socket's address instead", async () => {
    for (const forwardedFor of [
      "203.0.113.9, not-an-ip",
      "203.0.113.9, unknown",
      "203.0.113.9,",
      "",
      "1.2.3.4%eth0",
      "[203.0.113.9]",
      "x".repeat(8000),
    ]) {
      expect(await auditedIp(app, owner, slug, forwardedFor), forwardedFor).toBe("127.0.0.1");
    }
  });

  it("reads a long header from its end only", async () => {
    const long = `${"1.1.1.1, ".repeat(1000)}203.0.113.10`;
    expect(await auditedIp(app, owner, slug, long)).toBe("203.0.113.10");
  });

  it("judges the org's IP allow-list by that address", async () => {
    const patch = await call(app, "PATCH", `/org/${slug}`, {
      cookie: owner.cookie,
      body: { ipAllowlist: ["203.0.113.0/24"] },
    });
    expect(patch.status).toBe(200);
    const read = (forwardedFor?: string) =>
      call(app, "GET", `/org/${slug}/overview`, {
        token: key,
        headers: forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor },
      });
    expect((await read("203.0.113.5")).status).toBe(200);
    expect((await read("6.6.6.6, 203.0.113.5")).status).toBe(200);
    // The client names an allowed address; the proxy saw another.
    expect((await read("203.0.113.5, 198.51.100.7")).status).toBe(403);
    expect((await read("203.0.113.5, garbage")).status).toBe(403);
    expect((await read()).status).toBe(403);
    await call(app, "PATCH", `/org/${slug}`, { cookie: owner.cookie, body: { ipAllowlist: [] } });
  });

  it("records it on the session signed in", async () => {
    const email = uniqueEmail();
    await signUp(app, email);
    const signedIn = await call(app, "POST", "/auth/sign-in/email", {
      headers: { "x-forwarded-for": "6.6.6.6, 203.0.113.44", "x-plinth-client-ip": "6.6.6.7" },
      body: { email, password: PASSWORD },
    });
    expect(signedIn.status).toBe(200);
    const cookie = (signedIn.headers.getSetCookie().find((c) => c.includes(".session_token=")) ?? "").split(";")[0];
    const session = await call(app, "GET", "/auth/get-session", { cookie: cookie as string });
    expect(session.body.session.ipAddress).toBe("203.0.113.44");
  });
});

describe("TRUST_PROXY as the proxies' addresses", () => {
  let app: TestApp;
  let owner: TestUser;
  let slug: string;

  beforeAll(async () => {
    app = await startApp({ TRUST_PROXY: "127.0.0.1, 10.0.0.0/8,2001:db8:ffff::/48", ...GENEROUS });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Chained")).slug;
  });
  afterAll(() => app.close());

  it("walks back through every trusted proxy to the first address that is not one", async () => {
    expect(await auditedIp(app, owner, slug, "6.6.6.6, 198.51.100.7, 10.1.1.1, 2001:db8:ffff::5")).toBe("198.51.100.7");
    expect(await auditedIp(app, owner, slug, "198.51.100.7,[2001:db8:ffff::5]:443, 10.9.9.9:8080")).toBe(
      "198.51.100.7",
    );
    // A client inside a trusted range is still found when it is the farthest hop.
    expect(await auditedIp(app, owner, slug, "10.2.2.2")).toBe("10.2.2.2");
    // An address outside the ranges, though next to one of them.
    expect(await auditedIp(app, owner, slug, "10.0.0.1, 2001:db8:fffe::1, 10.0.0.2")).toBe("2001:db8:fffe::1");
  });

  it("stops at an entry that is not an address, at the proxy that handed it over", async () => {
    expect(await auditedIp(app, owner, slug, "6.6.6.6, garbage, 10.1.1.1")).toBe("10.1.1.1");
    expect(await auditedIp(app, owner, slug, "6.6.6.6, , 10.1.1.1")).toBe("10.1.1.1");
  });

  it("takes the socket's address when the peer is not a trusted proxy", async () => {
    const direct = await startApp({ TRUST_PROXY: "10.0.0.0/8", ...GENEROUS });
    try {
      const user = await signUp(direct);
      const org = await createOrg(direct, user, "Direct");
      expect(await auditedIp(direct, user, org.slug, "198.51.100.7")).toBe("127.0.0.1");
    } finally {
      await direct.close();
    }
  });
});

describe("budgets of IPv6 clients", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp({ TRUST_PROXY: "1", RATE_LIMIT_PER_MINUTE: "5", AUTH_RATE_LIMIT_PER_MINUTE: "2" });
  });
  afterAll(() => app.close());

  const anonymous = (forwardedFor: string) =>
    call(app, "GET", "/orgs", { headers: { "x-forwarded-for": forwardedFor } });

  it("are kept per /64: addresses of one /64 share one, another /64 and IPv4 addresses have their own", async () => {
    toNextWindow(app, MINUTE);
    const statuses: number[] = [];
    for (const address of [
      "2001:db8:1:2::1",
      "2001:db8:1:2::2",
      "2001:db8:1:2:ffff:1:2:3",
      "[2001:db8:1:2::4]:80",
      "2001:db8:1:2:abcd::5",
      "2001:DB8:1:2::6",
    ]) {
      statuses.push((await anonymous(address)).status);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    expect((await anonymous("2001:db8:1:2:0:0:0:7")).status).toBe(429);
    expect((await anonymous("2001:db8:1:3::1")).status).toBe(401);
    expect((await anonymous("2001:db8::1")).status).toBe(401);
    for (let i = 0; i < 5; i++) expect((await anonymous("198.51.100.1")).status).toBe(401);
    expect((await anonymous("198.51.100.1")).status).toBe(429);
    expect((await anonymous("198.51.100.2")).status).toBe(401);
  });

  it("on sign-in too", async () => {
    toNextWindow(app, MINUTE);
    const signIn = (forwardedFor: string) =>
      call(app, "POST", "/auth/sign-in/email", {
        headers: { "x-forwarded-for": forwardedFor },
        body: { email: uniqueEmail(), password: "wrong-password" },
      });
    expect((await signIn("2001:db8:5:6::1")).status).toBe(401);
    expect((await signIn("2001:db8:5:6::2")).status).toBe(401);
    expect((await signIn("2001:db8:5:6:7::3")).status).toBe(429);
    expect((await signIn("2001:db8:5:7::1")).status).toBe(401);
  });
});

describe("failed console sign-ins per account", () => {
  let app: TestApp;
  let email: string;
  let address = 0;
  /** A new client address for each attempt, so that no address's own budget runs out. */
  const nextAddress = () => `198.51.${Math.floor(++address / 250)}.${(address % 250) + 1}`;

  beforeAll(async () => {
    app = await startApp({ TRUST_PROXY: "1", AUTH_RATE_LIMIT_PER_MINUTE: "3", SIGN_IN_FAILURES_PER_ACCOUNT: "4" });
    email = (await signUp(app)).email;
  });
  afterAll(() => app.close());

  const signIn = (who: string, password: string) =>
    call(app, "POST", "/auth/sign-in/email", {
      headers: { "x-forwarded-for": nextAddress() },
      body: { email: who, password },
    });

  it("refuses the account, even the right password, once failures from many addresses used up its window", async () => {
    toNextWindow(app, WINDOW);
    for (let i = 0; i < 4; i++) expect((await signIn(email, "wrong-password")).status).toBe(401);
    const refused = await signIn(email.toUpperCase(), PASSWORD);
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe("RATE_LIMITED");
    // The account's budget refused it, and its headers say so: the 15-minute window's end.
    expect(refused.headers.get("ratelimit-limit")).toBe("4");
    expect(refused.headers.get("ratelimit-remaining")).toBe("0");
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(14 * 60);
    expect(retryAfter).toBeLessThanOrEqual(15 * 60);
    expect(refused.headers.get("ratelimit-reset")).toBe(String(retryAfter));
    // Other accounts are not held up; their responses show the address's budget.
    const other = await signUp(app);
    const fine = await signIn(other.email, PASSWORD);
    expect(fine.status).toBe(200);
    expect(fine.headers.get("ratelimit-limit")).toBe("3");

    app.clock.advance(retryAfter * 1000);
    expect((await signIn(email, PASSWORD)).status).toBe(200);
  });

  it("counts failures only: successes neither count nor clear them", async () => {
    toNextWindow(app, WINDOW);
    for (let i = 0; i < 5; i++) expect((await signIn(email, PASSWORD)).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await signIn(email, "wrong-password")).status).toBe(401);
    expect((await signIn(email, PASSWORD)).status).toBe(200);
    expect((await signIn(email, "wrong-password")).status).toBe(401);
    expect((await signIn(email, PASSWORD)).status).toBe(429);
  });

  it("counts e-mails with no account alike", async () => {
    toNextWindow(app, WINDOW);
    const nobody = uniqueEmail("nobody");
    for (let i = 0; i < 4; i++) expect((await signIn(nobody, "wrong-password")).status).toBe(401);
    expect((await signIn(nobody, "wrong-password")).status).toBe(429);
  });

  it("lets no more failures through than the limit when they come at once", async () => {
    toNextWindow(app, WINDOW);
    const burst = await Promise.all(Array.from({ length: 12 }, () => signIn(email, "wrong-password")));
    const statuses = burst.map((res) => res.status).sort();
    expect(statuses).toEqual([...Array(4).fill(401), ...Array(8).fill(429)]);
  });
});

describe("failed sign-ins counted by several processes", () => {
  let first: TestApp;
  let second: TestApp;
  const env = { TRUST_PROXY: "1", SIGN_IN_FAILURES_PER_ACCOUNT: "4", ...GENEROUS };

  beforeAll(async () => {
    first = await startApp(env);
    second = await startApp(env, { shareDatabaseWith: first });
  });
  afterAll(async () => {
    await second.close();
    await first.close();
  });

  it("refuse the account in every process, after the one-minute counters were pruned", async () => {
    const { email } = await signUp(first);
    const advanceBoth = (ms: number) => {
      first.clock.advance(ms);
      second.clock.advance(ms);
    };
    advanceBoth(WINDOW - (first.clock.now().getTime() % WINDOW) + 10);
    const signIn = (app: TestApp, password: string) =>
      call(app, "POST", "/auth/sign-in/email", { body: { email, password } });
    for (let i = 0; i < 4; i++) expect((await signIn(first, "wrong-password")).status).toBe(401);
    // Minutes later, once the counters have been written and every process has pruned the
    // one-minute windows that ended.
    advanceBoth(3 * MINUTE);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await signIn(second, PASSWORD)).status).toBe(429);
  });
});

describe("failed workspace sign-ins per project and e-mail", () => {
  let app: TestApp;
  let projects: string[];
  let address = 0;
  const email = "ada@example.test";

  beforeAll(async () => {
    app = await startApp({ TRUST_PROXY: "1", AUTH_RATE_LIMIT_PER_MINUTE: "3", SIGN_IN_FAILURES_PER_ACCOUNT: "3" });
    const owner = await signUp(app);
    const { slug } = await createOrg(app, owner, "Workspace Org");
    projects = [
      (await createActiveProject(app, owner, slug, "First")).id,
      (await createActiveProject(app, owner, slug, "Second")).id,
    ];
    for (const id of projects) {
      for (const who of [email, "bob@example.test"]) {
        expect((await post(id, "/auth/sign-up", { email: who, password: PASSWORD })).status).toBe(201);
      }
    }
  });
  afterAll(() => app.close());

  function post(projectId: string, path: string, body: unknown): Promise<Response> {
    address++;
    return fetch(`${app.url}/w/${projectId}/api${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": `203.0.113.${address}` },
      body: JSON.stringify(body),
    });
  }

  it("refuses the e-mail on that project once its failures used up the window, until it ends", async () => {
    const [first, second] = projects as [string, string];
    toNextWindow(app, WINDOW);
    const signIn = (projectId: string, who: string, password: string) =>
      post(projectId, "/auth/sign-in", { email: who, password });
    for (let i = 0; i < 3; i++) expect((await signIn(first, email, "wrong-password")).status).toBe(401);
    const refused = await signIn(first, "ADA@Example.test", PASSWORD);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("RATE_LIMITED");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(14 * 60);
    // Another user of the project, and the same e-mail on another project, are not held up.
    expect((await signIn(first, "bob@example.test", PASSWORD)).status).toBe(200);
    expect((await signIn(second, email, PASSWORD)).status).toBe(200);

    app.clock.advance(WINDOW);
    expect((await signIn(first, email, PASSWORD)).status).toBe(200);
  });
});
