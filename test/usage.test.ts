/**
 * Usage metering and alarms (DESIGN §10), through the real HTTP API on SQLite and PostgreSQL:
 * requests counted by two processes sum exactly, d1 and r2 measured, a history that outlives a
 * deleted and purged project, and alarms that fire once per billing period.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAY_MS } from "../src/clock.ts";
import { evaluateAlarms } from "../src/domains/alarms/service.ts";
import { projectJobs } from "../src/domains/projects/jobs.ts";
import { measureBytes, measureUsage } from "../src/domains/usage/meter.ts";
import { forgetOrgUsage } from "../src/domains/usage/quotas.ts";
import type { SingleJobHandler } from "../src/jobs/handlers.ts";
import { filesPrefix } from "../src/storage/keys.ts";
import {
  addMember,
  call,
  callWorkspace,
  createActiveProject,
  createApiKey,
  createOrg,
  expectError,
  expectNoContent,
  expectValidation,
  type Mailbox,
  type Receiver,
  readResult,
  signUp,
  sleep,
  startApp,
  startMailbox,
  startReceiver,
  storedKeys,
  type TestApp,
  type TestUser,
  until,
} from "./harness.ts";

/** A catalog with one small plan: 1% of its requests is one request. */
const TINY = {
  plans: [
    {
      id: "tiny",
      name: "Tiny",
      prices: { monthly: 0, annual: 0 },
      limits: {
        projects: 100,
        requests: 100,
        d1: 1024 * 1024 * 1024,
        r2: 1024 * 1024 * 1024,
        neurons: 10,
        restoreWindowDays: 1,
        manualBackups: 2,
      },
    },
    {
      id: "cramped-files",
      name: "Cramped files",
      prices: { monthly: 0, annual: 0 },
      limits: {
        projects: 100,
        requests: 100,
        d1: 1024 * 1024 * 1024,
        r2: 10_000,
        neurons: 10,
        restoreWindowDays: 1,
        manualBackups: 2,
      },
    },
    {
      id: "cramped-db",
      name: "Cramped database",
      prices: { monthly: 0, annual: 0 },
      limits: {
        projects: 100,
        requests: 100,
        d1: 1,
        r2: 1024 * 1024 * 1024,
        neurons: 10,
        restoreWindowDays: 1,
        manualBackups: 2,
      },
    },
  ],
};

describe("usage and alarms", () => {
  let app: TestApp;
  let second: TestApp;
  let mailbox: Mailbox;
  let receiver: Receiver;
  let owner: TestUser;
  let slug: string;
  let project: { id: string; slug: string; adminToken: string };
  const dir = mkdtempSync(path.join(tmpdir(), "plinth-usage-"));

  const usage = async () => {
    const res = await call(app, "GET", `/org/${slug}/usage`, { cookie: owner.cookie });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };
  const flush = async () => {
    await app.server.usage.flush();
    await second.server.usage.flush();
  };

  beforeAll(async () => {
    const plans = path.join(dir, "plans.json");
    writeFileSync(plans, JSON.stringify(TINY));
    mailbox = await startMailbox();
    receiver = await startReceiver();
    const env = {
      SMTP_URL: mailbox.url,
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      RATE_LIMIT_PER_MINUTE: "100000",
      PLANS_FILE: plans,
      DEFAULT_PLAN: "tiny",
    };
    app = await startApp(env);
    // A second process of the same deployment.
    second = await startApp(env, { shareDatabaseWith: app });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Usage Org")).slug;
    project = await createActiveProject(app, owner, slug, "Metered");
  }, 60_000);
  afterAll(async () => {
    await second?.close();
    await app?.close();
    await receiver?.close();
    await mailbox?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("sums the requests both processes served, and measures d1 and r2", async () => {
    await flush();
    const before = (await usage()).metrics.requests.used as number;
    const admin = { token: project.adminToken };
    for (let i = 0; i < 7; i++)
      expect((await callWorkspace(app, project.id, "GET", "/collections", admin)).status).toBe(200);
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${second.url}/w/${project.id}/api/collections`, {
        headers: { authorization: `Bearer ${project.adminToken}` },
      });
      expect(res.status).toBe(200);
    }
    // A made-up project's requests are nobody's.
    await callWorkspace(app, "prj_00000000000000000000000000", "GET", "/collections", admin);
    await flush();
    const after = await usage();
    expect(after.metrics.requests.used - before).toBe(12);
    expect(after).toMatchObject({
      planId: "tiny",
      periodStart: expect.stringMatching(/-01T00:00:00.000Z$/),
      periodEnd: expect.stringMatching(/-01T00:00:00.000Z$/),
      metrics: { requests: { limit: 100 }, neurons: { used: 0, limit: 10, pct: 0 } },
    });
    expect(after.metrics.requests.pct).toBe(Math.round(after.metrics.requests.used * 10) / 10);
    expect(after.projects.find((p: { id: string }) => p.id === project.id).requests).toBe(after.metrics.requests.used);

    const upload = await fetch(`${app.url}/w/${project.id}/api/files?name=a.txt`, {
      method: "POST",
      headers: { authorization: `Bearer ${project.adminToken}`, "content-type": "text/plain" },
      body: "x".repeat(5_000),
    });
    expect(upload.status).toBe(201);
    await measureUsage(app.server.deps);
    const measured = await usage();
    expect(measured.metrics.r2.used).toBeGreaterThanOrEqual(5_000);
    expect(measured.metrics.d1.used).toBeGreaterThan(0);
    expect(measured.projects[0]).toMatchObject({
      id: project.id,
      r2: measured.metrics.r2.used,
      d1: measured.metrics.d1.used,
    });
  });

  it("keeps a deleted and purged project's days in the history", async () => {
    const doomed = await createActiveProject(app, owner, slug, "Doomed");
    expect((await callWorkspace(app, doomed.id, "GET", "/collections", { token: doomed.adminToken })).status).toBe(200);
    await flush();
    expect((await call(app, "DELETE", `/org/${slug}/projects/${doomed.slug}`, { cookie: owner.cookie })).status).toBe(
      200,
    );
    const { deps } = app.server;
    await deps.db
      .updateTable("projects")
      .set({ purge_after: new Date(0).toISOString() })
      .where("id", "=", doomed.id)
      .execute();
    await (projectJobs(deps)["projects.purge"] as SingleJobHandler).handle(
      {},
      { job: {} as never, signal: new AbortController().signal },
    );
    expect(
      (await deps.db.selectFrom("projects").select("purged_at").where("id", "=", doomed.id).executeTakeFirst())
        ?.purged_at,
    ).toBeTruthy();
    const history = await call(app, "GET", `/org/${slug}/usage/history`, { cookie: owner.cookie });
    expect(history.status).toBe(200);
    const today = new Date().toISOString().slice(0, 10);
    expect(history.body.to).toBe(today);
    expect(history.body.days).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          date: today,
          projectId: doomed.id,
          projectSlug: doomed.slug,
          projectDeleted: true,
          requests: 1,
        }),
        expect.objectContaining({ date: today, projectId: project.id, projectDeleted: false }),
      ]),
    );
    // Gone from the current figures, which count live projects' bytes.
    expect((await usage()).projects.some((p: { id: string }) => p.id === doomed.id)).toBe(false);
  });

  it("refuses a history range that is backwards, malformed or over 366 days", async () => {
    const history = (query: string) => call(app, "GET", `/org/${slug}/usage/history${query}`, { cookie: owner.cookie });
    expectValidation(await history("?from=2026-02-01&to=2026-01-01"), "from");
    expectValidation(await history("?from=2026-02-30"), "from");
    expectValidation(await history("?to=yesterday"), "to");
    expectValidation(await history("?from=2025-01-01&to=2026-01-03"), "from");
    const year = await history("?from=2025-01-02&to=2026-01-02");
    expect(year.status).toBe(200);
    expect(year.body).toMatchObject({ from: "2025-01-02", to: "2026-01-02", days: [] });
  });

  it("fires an alarm once per billing period, through webhooks, notifications and the audit log", async () => {
    expect(
      (
        await call(app, "POST", `/org/${slug}/webhooks`, {
          cookie: owner.cookie,
          body: { url: `${receiver.url}/alarms`, events: ["alarm.fired"] },
        })
      ).status,
    ).toBe(201);
    const created = await call(app, "POST", `/org/${slug}/alarms`, {
      cookie: owner.cookie,
      body: { metric: "requests", thresholdPct: 1 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.alarm).toMatchObject({ metric: "requests", thresholdPct: 1, lastFiredAt: null });
    const { deps } = app.server;
    await evaluateAlarms(deps);
    await evaluateAlarms(deps);
    const fired = await receiver.waitFor("alarm.fired", (r) => r.path === "/alarms");
    expect(JSON.parse(fired.body)).toMatchObject({
      event: "alarm.fired",
      payload: {
        alarmId: created.body.alarm.id,
        metric: "requests",
        thresholdPct: 1,
        limit: 100,
        periodStart: (await usage()).periodStart,
      },
    });
    await sleep(300);
    expect(receiver.at("/alarms")).toHaveLength(1);
    const notes = await call(app, "GET", `/org/${slug}/notifications`, { cookie: owner.cookie });
    expect(notes.body.notifications.filter((n: { kind: string }) => n.kind === "alarm.fired")).toHaveLength(1);
    const audit = await call(app, "GET", `/org/${slug}/audit?action=alarm.*`, { cookie: owner.cookie });
    expect(audit.body.events.map((e: { action: string }) => e.action)).toEqual(["alarm.fired", "alarm.created"]);
    const listed = await call(app, "GET", `/org/${slug}/alarms`, { cookie: owner.cookie });
    expect(listed.body.alarms[0].lastFiredAt).toBeTruthy();

    // The next period: nothing used yet, so nothing fires; once a request is served, it fires again.
    const now = new Date();
    const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 2) - now.getTime();
    app.clock.advance(nextMonth);
    try {
      await evaluateAlarms(deps);
      await sleep(200);
      expect(receiver.at("/alarms")).toHaveLength(1);
      expect((await callWorkspace(app, project.id, "GET", "/collections", { token: project.adminToken })).status).toBe(
        200,
      );
      await app.server.usage.flush();
      await evaluateAlarms(deps);
      await receiver.waitFor(
        "the second alarm.fired",
        (r) => r.path === "/alarms" && receiver.at("/alarms").length >= 2,
      );
      expect(receiver.at("/alarms")).toHaveLength(2);
    } finally {
      app.clock.advance(-nextMonth);
    }
  });

  it("validates alarms, refuses duplicates and the 21st, deletes them", async () => {
    const create = (body: unknown) => call(app, "POST", `/org/${slug}/alarms`, { cookie: owner.cookie, body });
    for (const thresholdPct of [0, 101, 50.5, "80", null]) {
      expectValidation(await create({ metric: "d1", thresholdPct }), "thresholdPct");
    }
    expectValidation(await create({ metric: "neurons", thresholdPct: 50 }), "metric");
    expectValidation(await create({ thresholdPct: 50 }), "metric");
    expect((await create({ metric: "d1", thresholdPct: 80 })).status).toBe(201);
    expectError(await create({ metric: "d1", thresholdPct: 80 }), 409, "CONFLICT");
    const existing = (await call(app, "GET", `/org/${slug}/alarms`, { cookie: owner.cookie })).body.alarms
      .length as number;
    for (let pct = 1; existing + pct <= 20; pct++)
      expect((await create({ metric: "r2", thresholdPct: pct })).status).toBe(201);
    const over = await create({ metric: "r2", thresholdPct: 99 });
    expectError(over, 409, "PLAN_LIMIT");
    expect(over.body.error.details).toMatchObject({ limit: 20, used: 20 });
    const alarm = (await call(app, "GET", `/org/${slug}/alarms`, { cookie: owner.cookie })).body.alarms.at(-1);
    expectNoContent(await call(app, "DELETE", `/org/${slug}/alarms/${alarm.id}`, { cookie: owner.cookie }));
    expectError(
      await call(app, "DELETE", `/org/${slug}/alarms/${alarm.id}`, { cookie: owner.cookie }),
      404,
      "NOT_FOUND",
    );
    expectError(await call(app, "DELETE", `/org/${slug}/alarms/nope`, { cookie: owner.cookie }), 404, "NOT_FOUND");
  });

  it("refuses uploads past the r2 allowance and writes past the d1 allowance (409 PLAN_LIMIT), storing nothing", async () => {
    const { deps } = app.server;
    const org = await createOrg(app, owner, "Cramped Org");
    const p = await createActiveProject(app, owner, org.slug, "Cramped");
    await deps.db.updateTable("orgs").set({ plan_id: "cramped-files" }).where("id", "=", org.id).execute();
    forgetOrgUsage(org.id);
    const upload = (name: string, body: string | ReadableStream) =>
      fetch(`${app.url}/w/${p.id}/api/files?name=${name}`, {
        method: "POST",
        headers: { authorization: `Bearer ${p.adminToken}`, "content-type": "text/plain" },
        body,
        ...(typeof body === "string" ? {} : { duplex: "half" }),
      } as RequestInit);
    expect((await upload("first.txt", "a".repeat(6_000))).status).toBe(201);
    const refused = await upload("second.txt", "b".repeat(6_000));
    expect(refused.status).toBe(409);
    const body = (await refused.json()) as {
      error: { code: string; details: { limit: number; used: number; planId: string } };
    };
    expect(body.error).toMatchObject({ code: "PLAN_LIMIT", details: { limit: 10_000, planId: "cramped-files" } });
    expect(body.error.details.used).toBeGreaterThanOrEqual(6_000);
    // Sent without a length (chunked): refused once its bytes are counted, and not kept.
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("c".repeat(6_000)));
        controller.close();
      },
    });
    expect((await upload("third.txt", chunked)).status).toBe(409);
    const files = await callWorkspace(app, p.id, "GET", "/files", { token: p.adminToken });
    expect(files.body.files.map((f: { name: string }) => f.name)).toEqual(["first.txt"]);
    expect(await storedKeys(deps, filesPrefix(p.id))).toHaveLength(1);

    // d1: once reached, writes that add data are refused; deletes still go.
    await deps.db.updateTable("orgs").set({ plan_id: "cramped-db" }).where("id", "=", org.id).execute();
    await measureUsage(deps);
    const write = await callWorkspace(app, p.id, "POST", "/collections", {
      token: p.adminToken,
      body: { slug: "more" },
    });
    expectError(write, 409, "PLAN_LIMIT");
    expect(write.body.error.details).toMatchObject({ limit: 1, planId: "cramped-db" });
    expect(
      (await callWorkspace(app, p.id, "DELETE", `/files/${files.body.files[0].id}`, { token: p.adminToken })).status,
    ).toBe(204);
    // Reads go on.
    expect((await callWorkspace(app, p.id, "GET", "/collections", { token: p.adminToken })).status).toBe(200);
  });

  it("counts a branch's files and database as its project's, in usage and in the r2 quota (#8)", async () => {
    const { deps } = app.server;
    const org = await createOrg(app, owner, "Branching Org");
    const p = await createActiveProject(app, owner, org.slug, "Branched");
    const projectUsage = async () => {
      const res = await call(app, "GET", `/org/${org.slug}/usage`, { cookie: owner.cookie });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const row = res.body.projects.find((project: { id: string }) => project.id === p.id);
      return { metrics: res.body.metrics, row: row as { r2: number; d1: number } };
    };
    const upload = async (workspaceId: string, token: string, name: string, bytes: number) =>
      readResult(
        await fetch(`${app.url}/w/${workspaceId}/api/files?name=${name}`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "text/plain" },
          body: "x".repeat(bytes),
        }),
      );
    expect((await upload(p.id, p.adminToken, "parent.txt", 1_000)).status).toBe(201);
    const created = await call(app, "POST", `/org/${org.slug}/projects/${p.slug}/branches`, {
      cookie: owner.cookie,
      body: { name: "feature" },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const branch = { id: created.body.branch.id as string, token: created.body.adminToken as string };

    // The branch's database counts; its copy of the parent's file shares the parent's bytes and
    // counts once. (Workspaces only grow here, so the parts measured first are a lower bound.)
    const parentOnly = await measureBytes(deps, [p.id]);
    const branchOnly = await measureBytes(deps, [branch.id]);
    expect(branchOnly.d1).toBeGreaterThan(0);
    await measureUsage(deps);
    const branched = await projectUsage();
    expect(branched.row.r2).toBe(1_000);
    expect(branched.row.d1).toBeGreaterThanOrEqual(parentOnly.d1 + branchOnly.d1);
    expect(branched.metrics.d1.used).toBe(branched.row.d1);

    // Files uploaded into the branch are the project's r2, and so the org's.
    expect((await upload(branch.id, branch.token, "in-branch.txt", 3_000)).status).toBe(201);
    const measured = await until("the branch's upload in its project's usage", async () => {
      const now = await projectUsage();
      return now.row.r2 === 4_000 ? now : undefined;
    });
    expect(measured.metrics.r2.used).toBe(4_000);

    // The org's r2 quota holds for the branch as for the project: 10,000 bytes.
    await deps.db.updateTable("orgs").set({ plan_id: "cramped-files" }).where("id", "=", org.id).execute();
    forgetOrgUsage(org.id);
    expect((await upload(branch.id, branch.token, "fits.txt", 5_000)).status).toBe(201);
    const refused = await upload(branch.id, branch.token, "over.txt", 2_000);
    expectError(refused, 409, "PLAN_LIMIT");
    expect(refused.body.error.details).toEqual({ limit: 10_000, used: 9_000, planId: "cramped-files" });
    expectError(await upload(p.id, p.adminToken, "over.txt", 2_000), 409, "PLAN_LIMIT");
    expect((await upload(branch.id, branch.token, "last.txt", 1_000)).status).toBe(201);
    const files = await callWorkspace(app, branch.id, "GET", "/files", { token: branch.token });
    expect(files.body.files.map((f: { name: string }) => f.name).sort()).toEqual([
      "fits.txt",
      "in-branch.txt",
      "last.txt",
      "parent.txt",
    ]);
  });

  it("lets every member read usage and alarms, developers and full keys change alarms; other orgs get 404", async () => {
    const viewer = await addMember(app, mailbox, owner, slug, "viewer");
    const developer = await addMember(app, mailbox, owner, slug, "developer");
    const deployKey = await createApiKey(app, owner, slug, "deploy");
    const readOnly = await createApiKey(app, owner, slug, "read-only");
    for (const who of [{ cookie: viewer.user.cookie }, { token: readOnly.token }, { token: deployKey.token }]) {
      expect((await call(app, "GET", `/org/${slug}/usage`, who)).status).toBe(200);
      expect((await call(app, "GET", `/org/${slug}/usage/history`, who)).status).toBe(200);
      expect((await call(app, "GET", `/org/${slug}/alarms`, who)).status).toBe(200);
    }
    const body = { metric: "requests", thresholdPct: 42 };
    for (const who of [{ cookie: viewer.user.cookie }, { token: readOnly.token }, { token: deployKey.token }]) {
      expectError(await call(app, "POST", `/org/${slug}/alarms`, { ...who, body }), 403, "FORBIDDEN");
    }
    const alarms = (await call(app, "GET", `/org/${slug}/alarms`, { cookie: owner.cookie })).body.alarms;
    expectNoContent(
      await call(app, "DELETE", `/org/${slug}/alarms/${alarms[0].id}`, { cookie: developer.user.cookie }),
    );
    expect((await call(app, "POST", `/org/${slug}/alarms`, { cookie: developer.user.cookie, body })).status).toBe(201);
    const outsider = await signUp(app);
    await createOrg(app, outsider, "Elsewhere");
    for (const route of ["/usage", "/usage/history", "/alarms"]) {
      expectError(await call(app, "GET", `/org/${slug}${route}`, { cookie: outsider.cookie }), 404, "NOT_FOUND");
      expectError(await call(app, "GET", `/org/${slug}${route}`, {}), 401, "UNAUTHORIZED");
    }
    expect(DAY_MS).toBeGreaterThan(0);
  });
});
