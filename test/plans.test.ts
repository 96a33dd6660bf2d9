import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.ts";
import { call, createOrg, expectError, signUp, startApp, type TestApp } from "./harness.ts";

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;
const TIB = 1024 * GIB;

describe("GET /api/plans", () => {
  let app: TestApp;
  beforeAll(async () => {
    // The built-in catalog, as an operator gets it.
    app = await startApp({ PLANS_FILE: "" });
  });
  afterAll(() => app?.close());

  it("answers anyone with the catalog of DESIGN §8: prices in US cents, limits in bytes", async () => {
    const res = await call(app, "GET", "/plans");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      plans: [
        {
          id: "free",
          name: "Free",
          prices: { monthly: 0, annual: 0 },
          limits: {
            projects: 2,
            requests: 500_000,
            d1: 500 * MIB,
            r2: GIB,
            neurons: 10_000,
            restoreWindowDays: 1,
            manualBackups: 2,
          },
        },
        {
          id: "pro",
          name: "Pro",
          prices: { monthly: 2_500, annual: 25_000 },
          limits: {
            projects: 10,
            requests: 5_000_000,
            d1: 8 * GIB,
            r2: 100 * GIB,
            neurons: 1_000_000,
            restoreWindowDays: 7,
            manualBackups: 10,
          },
        },
        {
          id: "scale",
          name: "Scale",
          prices: { monthly: 59_900, annual: 599_000 },
          limits: {
            projects: 50,
            requests: 50_000_000,
            d1: 50 * GIB,
            r2: TIB,
            neurons: 10_000_000,
            restoreWindowDays: 14,
            manualBackups: 50,
          },
        },
        {
          id: "max",
          name: "Max",
          prices: { monthly: 199_900, annual: 1_999_000 },
          limits: {
            projects: null,
            requests: 500_000_000,
            d1: 500 * GIB,
            r2: 10 * TIB,
            neurons: 100_000_000,
            restoreWindowDays: 30,
            manualBackups: 200,
          },
        },
      ],
    });
  });

  it("starts new orgs on the free plan", async () => {
    const owner = await signUp(app);
    expect((await createOrg(app, owner, "Plan Org")).planId).toBe("free");
  });

  it("caps an org's live projects at its plan's limit (free: 2), 409 PLAN_LIMIT with details", async () => {
    const owner = await signUp(app);
    const { slug } = await createOrg(app, owner, "Capped Org");
    const create = (name: string) =>
      call(app, "POST", `/org/${slug}/projects`, { cookie: owner.cookie, body: { name } });
    const first = await create("First");
    expect(first.status).toBe(201);
    expect((await create("Second")).status).toBe(201);
    const third = await create("Third");
    expectError(third, 409, "PLAN_LIMIT");
    expect(third.body.error.details).toEqual({ limit: 2, used: 2, planId: "free" });
    // A deleted project frees its place.
    expect(
      (await call(app, "DELETE", `/org/${slug}/projects/${first.body.project.slug}`, { cookie: owner.cookie })).status,
    ).toBe(200);
    expect((await create("Third")).status).toBe(201);
  });
});

describe("PLANS_FILE and DEFAULT_PLAN", () => {
  let dir: string;
  let app: TestApp | undefined;
  const catalog = {
    plans: [
      {
        id: "starter",
        name: "Starter",
        prices: { monthly: 900, annual: 9_000 },
        limits: {
          projects: 3,
          requests: 1_000,
          d1: MIB,
          r2: MIB,
          neurons: 0,
          restoreWindowDays: 2,
          manualBackups: 1,
        },
      },
      {
        id: "team",
        name: "Team",
        prices: { monthly: 4_900, annual: 49_000 },
        limits: {
          projects: null,
          requests: 10_000,
          d1: GIB,
          r2: GIB,
          neurons: 100,
          restoreWindowDays: 10,
          manualBackups: 5,
        },
      },
    ],
  };

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "plinth-plans-"));
  });
  afterAll(async () => {
    await app?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Writes `content` (JSON unless a string) to a file of its own; returns its path. */
  function file(name: string, content: unknown): string {
    const at = path.join(dir, name);
    writeFileSync(at, typeof content === "string" ? content : JSON.stringify(content));
    return at;
  }

  it("serves the operator's catalog and starts new orgs on DEFAULT_PLAN", async () => {
    app = await startApp({ PLANS_FILE: file("plans.json", catalog), DEFAULT_PLAN: "starter" });
    const res = await call(app, "GET", "/plans");
    expect(res.body).toEqual(catalog);
    const owner = await signUp(app);
    expect((await createOrg(app, owner, "Starter Org")).planId).toBe("starter");
  });

  /** The message loadConfig refuses `env` with. */
  function refusal(env: Record<string, string>): string {
    try {
      loadConfig(env);
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as Error).message;
    }
    throw new Error(`accepted ${JSON.stringify(env)}`);
  }

  it("refuses to start on a catalog that cannot be read, naming PLANS_FILE and what is wrong", () => {
    expect(refusal({ PLANS_FILE: path.join(dir, "missing.json") })).toMatch(/PLANS_FILE: cannot read/);
    expect(refusal({ PLANS_FILE: file("broken.json", "{not json") })).toMatch(/PLANS_FILE: .* is not JSON/);
    expect(refusal({ PLANS_FILE: file("empty.json", { plans: [] }) })).toMatch(/PLANS_FILE: .*plans/);
    const twice = { plans: [catalog.plans[0], catalog.plans[0]] };
    expect(refusal({ PLANS_FILE: file("twice.json", twice), DEFAULT_PLAN: "starter" })).toMatch(/unique/);
    const negative = { plans: [{ ...catalog.plans[0], prices: { monthly: -1, annual: 0 } }] };
    expect(refusal({ PLANS_FILE: file("negative.json", negative), DEFAULT_PLAN: "starter" })).toMatch(
      /PLANS_FILE: .*prices\.monthly/,
    );
    const unlimitedBackups = {
      plans: [{ ...catalog.plans[0], limits: { ...catalog.plans[0]?.limits, manualBackups: null } }],
    };
    expect(refusal({ PLANS_FILE: file("nulls.json", unlimitedBackups), DEFAULT_PLAN: "starter" })).toMatch(
      /PLANS_FILE: .*limits\.manualBackups/,
    );
  });

  it("refuses a DEFAULT_PLAN the catalog does not hold, naming it", () => {
    expect(refusal({ DEFAULT_PLAN: "gold" })).toMatch(
      /DEFAULT_PLAN: no plan "gold" in the catalog \(free, pro, scale, max\)/,
    );
    expect(refusal({ PLANS_FILE: file("plans2.json", catalog) })).toMatch(/DEFAULT_PLAN: no plan "free"/);
  });
});
