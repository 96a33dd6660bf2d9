import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RateLimiter } from "../src/http/rate-limit.ts";
import {
  call,
  createActiveProject,
  createApiKey,
  createOrg,
  signUp,
  startApp,
  type TestApp,
  uniqueEmail,
  until,
} from "./harness.ts";

const MINUTE = 60_000;

/** Windows are fixed minutes: moves to the start of the next, so a test's calls all fall in one. */
function toNextMinute(app: TestApp): void {
  app.clock.advance(MINUTE - (app.clock.now().getTime() % MINUTE) + 10);
}

describe("rate limiting per principal", () => {
  let app: TestApp;
  let token: string;
  let otherToken: string;

  beforeAll(async () => {
    app = await startApp({ RATE_LIMIT_PER_MINUTE: "5", AUTH_RATE_LIMIT_PER_MINUTE: "1000" });
    const owner = await signUp(app);
    const org = await createOrg(app, owner, "Limited");
    token = (await createApiKey(app, owner, org.slug, "read-only")).token;
    otherToken = (await createApiKey(app, owner, org.slug, "read-only")).token;
  });
  afterAll(() => app.close());

  it("counts down in RateLimit-* headers, then answers 429 with Retry-After", async () => {
    toNextMinute(app);
    for (let i = 1; i <= 5; i++) {
      const res = await call(app, "GET", "/orgs", { token });
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit-limit")).toBe("5");
      expect(res.headers.get("ratelimit-remaining")).toBe(String(5 - i));
      const reset = Number(res.headers.get("ratelimit-reset"));
      expect(reset).toBeGreaterThanOrEqual(1);
      expect(reset).toBeLessThanOrEqual(60);
    }
    const limited = await call(app, "GET", "/orgs", { token });
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe("RATE_LIMITED");
    expect(limited.headers.get("ratelimit-remaining")).toBe("0");
    const retryAfter = Number(limited.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
  });

  it("keeps each principal's budget separate", async () => {
    const res = await call(app, "GET", "/orgs", { token: otherToken });
    expect(res.status).toBe(200);
  });

  it("limits anonymous callers by address, on error responses too", async () => {
    toNextMinute(app);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await call(app, "GET", "/orgs");
      expect(res.headers.get("ratelimit-limit")).toBe("5");
      statuses.push(res.status);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
  });

  it("opens a new window after a minute", async () => {
    app.clock.advance(MINUTE);
    const res = await call(app, "GET", "/orgs", { token });
    expect(res.status).toBe(200);
    expect(res.headers.get("ratelimit-remaining")).toBe("4");
  });
});

describe("sign-in and sign-up limit", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp({ AUTH_RATE_LIMIT_PER_MINUTE: "3" });
  });
  afterAll(() => app.close());

  it("refuses the fourth credential attempt in a minute from one address", async () => {
    toNextMinute(app);
    const email = uniqueEmail();
    const attempt = () => call(app, "POST", "/auth/sign-in/email", { body: { email, password: "wrong-password-1" } });
    expect((await attempt()).status).toBe(401);
    expect((await attempt()).status).toBe(401);
    expect((await attempt()).status).toBe(401);
    const limited = await attempt();
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBeTruthy();
    const signUpAttempt = await call(app, "POST", "/auth/sign-up/email", {
      body: { email: uniqueEmail(), password: "long-enough-password", name: "X" },
    });
    expect(signUpAttempt.status).toBe(429);
  });
});

describe("workspace sign-in and sign-up limit", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp({ AUTH_RATE_LIMIT_PER_MINUTE: "3" });
  });
  afterAll(() => app.close());

  it("refuses the fourth workspace credential attempt in a minute from one address", async () => {
    const owner = await signUp(app);
    const { slug } = await createOrg(app, owner, "Guarded Org");
    const { id } = await createActiveProject(app, owner, slug, "Guarded");
    toNextMinute(app);
    const post = (path: string, body: unknown) =>
      fetch(`${app.url}/w/${id}/api${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const signIn = () => post("/auth/sign-in", { email: "guess@example.test", password: "wrong-password-1" });
    for (const _ of [1, 2, 3]) expect((await signIn()).status).toBe(401);
    const limited = await signIn();
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBeTruthy();
    expect((await post("/auth/sign-up", { email: uniqueEmail(), password: "long-enough-pw" })).status).toBe(429);
  });
});

describe("workspace sign-in and sign-up for projects that do not exist", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp({ AUTH_RATE_LIMIT_PER_MINUTE: "3", RATE_LIMIT_PER_MINUTE: "1000" });
  });
  afterAll(() => app.close());

  it("keep no budget, row or read for each made-up id: only the address's budget pays", async () => {
    toNextMinute(app);
    // Shaped like project ids, and not: neither opens a budget of its own.
    const ids = [
      ...Array.from({ length: 10 }, (_, n) => `prj_01m8made${String(n).padStart(2, "0")}${"x".repeat(16)}`),
      ...Array.from({ length: 10 }, (_, n) => `anything-${n}`),
    ];
    for (const id of ids) {
      const res = await fetch(`${app.url}/w/${id}/api/auth/sign-in`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: "guess@example.test", password: "wrong-password-1" }),
      });
      // Not the stricter sign-in budget (3 a minute): each answer is the unknown project's 404.
      expect(res.status).toBe(404);
      expect(Number(res.headers.get("ratelimit-limit"))).toBe(1000);
    }
    await until("the counters to be flushed", async () => {
      const rows = await app.server.deps.db.selectFrom("rate_limits").select("bucket").execute();
      return rows.some((row) => row.bucket.startsWith("ip:"));
    });
    const buckets = (await app.server.deps.db.selectFrom("rate_limits").select("bucket").execute()).map(
      (r) => r.bucket,
    );
    expect(buckets.filter((bucket) => ids.some((id) => bucket.includes(id)))).toEqual([]);
  });
});

describe("workspace API budget", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp({ RATE_LIMIT_PER_MINUTE: "30" });
  });
  afterAll(() => app.close());

  it("is per principal: made-up tokens share their address's budget instead of one each", async () => {
    const owner = await signUp(app);
    const { slug } = await createOrg(app, owner, "Budget Org");
    const { id } = await createActiveProject(app, owner, slug, "Budget");
    // Windows are fixed minutes: start at the beginning of one, so all 31 calls fall in it.
    app.clock.advance(60_000 - (app.clock.now().getTime() % 60_000) + 10);
    const statuses: number[] = [];
    for (let n = 0; n < 31; n++) {
      const res = await fetch(`${app.url}/w/${id}/api/collections`, {
        headers: { authorization: `Bearer wsu_made_up_${n}` },
      });
      statuses.push(res.status);
    }
    expect(statuses.slice(0, 30)).toEqual(Array.from({ length: 30 }, () => 401));
    expect(statuses[30]).toBe(429);
  });
});

describe("counters shared through the database", () => {
  let first: TestApp;
  let second: TestApp;
  let token: string;

  beforeAll(async () => {
    first = await startApp({ RATE_LIMIT_PER_MINUTE: "10" });
    second = await startApp({ RATE_LIMIT_PER_MINUTE: "10" }, { shareDatabaseWith: first });
    const owner = await signUp(first);
    const org = await createOrg(first, owner, "Shared");
    token = (await createApiKey(first, owner, org.slug, "read-only")).token;
  });
  afterAll(async () => {
    await second.close();
    await first.close();
  });

  it("lets two processes of one deployment share one budget, either way round", async () => {
    // Both start at a window's beginning, so that the test cannot straddle two windows.
    const toNextWindow = 60_000 - (first.clock.now().getTime() % 60_000) + 10;
    first.clock.advance(toNextWindow);
    second.clock.advance(toNextWindow);
    for (let i = 0; i < 6; i++) expect((await call(first, "GET", "/orgs", { token })).status).toBe(200);
    // The first process writes its counts every 200 ms; give it time to do so.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await call(second, "GET", "/orgs", { token })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429]);
    // Back on the first process, whose own count (6) is stale: it reads the shared one first.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await call(first, "GET", "/orgs", { token })).status).toBe(429);
  });
});

describe("the last part of a shared budget", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp();
  });
  afterAll(() => app.close());

  /**
   * Two limiters of one database, as two processes would have, on a clock that stands still: in
   * the app's current minute, whose counters the app's own limiters do not prune as ended.
   */
  function twoProcesses() {
    const at = new Date(Math.floor(app.clock.now().getTime() / MINUTE) * MINUTE + 30_000);
    const frozen = { now: () => at };
    const { db, log } = app.server.deps;
    return [new RateLimiter(db, frozen, log), new RateLimiter(db, frozen, log)] as const;
  }

  async function allowed(limiter: RateLimiter, bucket: string, hits: number): Promise<boolean[]> {
    const decisions: boolean[] = [];
    for (let i = 0; i < hits; i++) decisions.push((await limiter.hit(bucket, 20)).allowed);
    return decisions;
  }

  it("is counted in the database hit by hit, so two processes together stay within it", async () => {
    const [a, b] = twoProcesses();
    const bucket = `key:last-part-${Math.random()}`;
    expect(await allowed(a, bucket, 15)).toEqual(Array(15).fill(true));
    await a.flush();
    // The second process reads 15 and takes 4 more; the last three are in the last fifth of the
    // budget, so they are written as they come.
    expect(await allowed(b, bucket, 4)).toEqual([true, true, true, true]);
    // The first still believes 15 (its clock has not moved, so it does not read again): one
    // more is within what it counts alone, and the next is in the last part, decided by the
    // shared total (20 taken): refused. Counted alone, it would have allowed five.
    expect(await allowed(a, bucket, 3)).toEqual([true, false, false]);
    expect(await allowed(b, bucket, 1)).toEqual([false]);
    await Promise.all([a.stop(), b.stop()]);
  });

  it("allows exactly the budget to concurrent hits in one process", async () => {
    const [a] = twoProcesses();
    const bucket = `key:concurrent-${Math.random()}`;
    const decisions = await Promise.all(Array.from({ length: 30 }, () => a.hit(bucket, 20)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(20);
    expect(decisions.map((d) => d.remaining).filter((r) => r > 0)).toHaveLength(19);
    await a.stop();
  });
});
