import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Deps } from "../src/deps.ts";
import { onWorkspace, workspaceVersion } from "../src/domains/projects/workspace-db.ts";
import {
  addMember,
  type CallResult,
  call,
  createApiKey,
  createOrg,
  expectError,
  expectStatus,
  expectValidation,
  type Mailbox,
  sha256Hex,
  signUp,
  startApp,
  startMailbox,
  type TestApp,
  type TestUser,
  uniqueEmail,
} from "./harness.ts";
import {
  ALL_REGIONS,
  api,
  as,
  dropAllWorkspaces,
  LOOSE_LIMITS,
  type Principal,
  storedProject,
  userRow,
  workspaceExists,
} from "./project-calls.ts";

/** The main app serves every region but `syd`, so a project there fails to provision. */
const UNSERVED = "syd";
const SERVED = ALL_REGIONS.filter((r) => r !== UNSERVED);
const DAY_MS = 86_400_000;

type Role = "owner" | "admin" | "developer" | "viewer";
type Who = Role | "full" | "deploy" | "read-only" | "none";
const EVERYONE: Who[] = ["owner", "admin", "developer", "viewer", "full", "deploy", "read-only", "none"];

const PROJECT_KEYS = [
  "createdAt",
  "dbType",
  "environment",
  "failureReason",
  "id",
  "name",
  "primaryRegion",
  "region",
  "signUp",
  "slug",
  "status",
  "template",
  "templateVersion",
  "updatedAt",
  "workspaceUrl",
];

// ---------------------------------------------------------------------------------------------
// The main app: real HTTP, its own in-process workers, every region but `syd` served.
// ---------------------------------------------------------------------------------------------

describe("projects", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let deps: Deps;
  const p = api(() => app);
  /** Every admin token handed out; none may ever appear in an audit row or a read. */
  const tokensSeen: string[] = [];

  beforeAll(async () => {
    mailbox = await startMailbox();
    app = await startApp({
      SMTP_URL: mailbox.url,
      WORKER_POLL_MS: "50",
      SERVED_REGIONS: SERVED.join(","),
      ...LOOSE_LIMITS,
    });
    deps = app.server.deps;
  });
  afterAll(async () => {
    if (deps) await dropAllWorkspaces(deps);
    await app?.close();
    await mailbox?.close();
  });

  async function newOrg(name = "Projects Org", extra: Record<string, unknown> = {}) {
    const owner = await signUp(app, uniqueEmail("owner"), "Olive Owner");
    let org: any;
    if (Object.keys(extra).length === 0) org = await createOrg(app, owner, name);
    else {
      const res = await call(app, "POST", "/org", { cookie: owner.cookie, body: { name, ...extra } });
      expectStatus(res, 201);
      org = res.body.org;
    }
    return { owner, slug: org.slug as string, org };
  }

  async function created(slug: string, who: Principal, body: Record<string, unknown>) {
    const project = await p.created(slug, who, body);
    tokensSeen.push(project.adminToken);
    return project;
  }

  async function provisioned(slug: string, who: Principal, body: Record<string, unknown>) {
    const project = await p.provisioned(slug, who, body);
    tokensSeen.push(project.adminToken);
    return project;
  }

  async function deploysOf(slug: string, projectSlug: string, who: Principal): Promise<any[]> {
    const res = await p.deploys(slug, projectSlug, who);
    expectStatus(res, 200);
    return res.body.deploys;
  }

  // ---- templates ----

  describe("GET /api/templates", () => {
    it("lists the built-in default template with at least two versions and its latest", async () => {
      const { owner } = await newOrg();
      const res = await call(app, "GET", "/templates", { cookie: owner.cookie });
      expectStatus(res, 200);
      const def = res.body.templates.find((t: any) => t.name === "default");
      expect(def).toBeDefined();
      expect(def.versions).toEqual(expect.arrayContaining(["1.0.0", "1.1.0"]));
      expect(def.versions.length).toBeGreaterThanOrEqual(2);
      expect(def.latest).toBe("1.1.0");
      expect(def.versions.at(-1)).toBe(def.latest);
      for (const t of res.body.templates) {
        expect(typeof t.name).toBe("string");
        expect(Array.isArray(t.versions)).toBe(true);
        expect(t.versions).toContain(t.latest);
      }
    });
  });

  // ---- create and provisioning ----

  describe("create and provision", () => {
    it("answers 201 at once with status provisioning and a one-time adminToken; the job makes it active", async () => {
      const { owner, slug, org } = await newOrg();
      const res = await p.create(slug, owner, { name: "My First App" });
      expectStatus(res, 201);
      const project = res.body.project;
      const token: string = project.adminToken;
      tokensSeen.push(token);
      // Also beside the project, where reprovision-admin answers it.
      expect(Object.keys(res.body).sort()).toEqual(["adminToken", "project"]);
      expect(res.body.adminToken).toBe(token);
      expect(project).toMatchObject({
        slug: "my-first-app",
        name: "My First App",
        status: "provisioning",
        environment: "production",
        region: org.defaultRegion,
        primaryRegion: org.defaultRegion,
        dbType: "d1",
        template: "default",
        templateVersion: "1.1.0",
        failureReason: null,
      });
      expect(Object.keys(project).sort()).toEqual([...PROJECT_KEYS, "adminToken"].sort());
      expect(typeof project.id).toBe("string");
      expect(typeof project.workspaceUrl).toBe("string");
      expect(project.workspaceUrl.length).toBeGreaterThan(0);
      expect(Number.isNaN(Date.parse(project.createdAt))).toBe(false);
      expect(Number.isNaN(Date.parse(project.updatedAt))).toBe(false);
      expect(typeof token).toBe("string");
      expect(token.length).toBeGreaterThanOrEqual(32);
      expect(token).not.toBe(project.id);

      // The token is shown once: never in a read.
      const early = await p.get(slug, project.slug, owner);
      expectStatus(early, 200);
      expect(early.body.project).not.toHaveProperty("adminToken");
      expect(["provisioning", "active"]).toContain(early.body.project.status);

      const settled = await p.settle(slug, project.slug, owner);
      expect(settled).toMatchObject({
        id: project.id,
        status: "active",
        failureReason: null,
        templateVersion: "1.1.0",
      });

      const detail = await p.get(slug, project.slug, owner);
      expect(Object.keys(detail.body).sort()).toEqual(["latestTemplateVersion", "project"]);
      expect(detail.body.latestTemplateVersion).toBe("1.1.0");
      expect(Object.keys(detail.body.project).sort()).toEqual([...PROJECT_KEYS].sort());
      const listed = await p.list(slug, owner);
      expectStatus(listed, 200);
      expect(listed.body.projects.map((x: any) => x.id)).toEqual([project.id]);
      expect(listed.body.projects[0]).not.toHaveProperty("adminToken");
      const overview = await p.overview(slug, owner);
      for (const body of [detail.body, listed.body, overview.body]) expect(JSON.stringify(body)).not.toContain(token);

      // The workspace database really exists, at the template's version, with its tables.
      expect(await workspaceExists(deps, project.id)).toBe(true);
      expect(await workspaceVersion(deps, project.id)).toBe("1.1.0");
      expect(await onWorkspace(deps, project.id, (db) => db.selectFrom("users").selectAll().execute())).toEqual([]);
      // Only the hash of the token is stored.
      const stored = await storedProject(deps, project.id);
      expect(stored.admin_token_hash).toBe(sha256Hex(token));
      expect(JSON.stringify(stored)).not.toContain(token);

      // One provision deploy, settled.
      const deploys = await deploysOf(slug, project.slug, owner);
      expect(deploys).toHaveLength(1);
      expect(deploys[0]).toMatchObject({ kind: "provision", status: "succeeded", toVersion: "1.1.0", error: null });
      expect(deploys[0].finishedAt).not.toBeNull();
      expect(JSON.stringify(deploys)).not.toContain(token);

      // Audit: created by the owner, provisioned by the system.
      const events = await p.audit(slug, owner);
      const createdEvent = events.find((e) => e.action === "project.created" && e.target.id === project.id);
      expect(createdEvent).toBeDefined();
      expect(createdEvent.actor).toMatchObject({ type: "account", id: owner.accountId });
      expect(createdEvent.target).toEqual({ type: "project", id: project.id });
      expect(createdEvent.data).toMatchObject({ slug: "my-first-app", name: "My First App" });
      const provisionedEvent = events.find((e) => e.action === "project.provisioned" && e.target.id === project.id);
      expect(provisionedEvent).toBeDefined();
      expect(JSON.stringify(events)).not.toContain(token);
    });

    it("each creation gets its own admin token", async () => {
      const { owner, slug } = await newOrg();
      const a = await created(slug, owner, { name: "Token A" });
      const b = await created(slug, owner, { name: "Token B" });
      expect(a.adminToken).not.toBe(b.adminToken);
    });

    it("region defaults to the org's defaultRegion (as it is now); an explicit region wins", async () => {
      const { owner, slug, org } = await newOrg("Region Org", { defaultRegion: "sin" });
      expect(org.defaultRegion).toBe("sin");
      const defaulted = await created(slug, owner, { name: "Defaulted" });
      expect(defaulted.region).toBe("sin");
      expect(defaulted.primaryRegion).toBe("sin");
      const explicit = await created(slug, owner, { name: "Explicit", region: "ams" });
      expect(explicit.region).toBe("ams");
      const patched = await call(app, "PATCH", `/org/${slug}`, {
        cookie: owner.cookie,
        body: { defaultRegion: "lhr" },
      });
      expectStatus(patched, 200);
      expect((await created(slug, owner, { name: "After Change" })).region).toBe("lhr");
      // An org with the default residency has its documented default region.
      const plain = await newOrg("Plain Org");
      expect((await created(plain.slug, plain.owner, { name: "Plain" })).region).toBe(plain.org.defaultRegion);
    });

    it("validates name: 1 and 61 characters are 422 naming name; 2 and 60 are accepted", async () => {
      const { owner, slug } = await newOrg();
      expectValidation(await p.create(slug, owner, { name: "a" }), "name");
      expectValidation(await p.create(slug, owner, { name: "x".repeat(61) }), "name");
      expectValidation(await p.create(slug, owner, {}), "name");
      expectValidation(await p.create(slug, owner, { name: 42 }), "name");
      expectValidation(await p.create(slug, owner, { name: "   " }), "name");
      expectValidation(await p.create(slug, owner, { name: "\u0001\u0002" }), "name");
      expectValidation(await p.create(slug, owner, { name: "line\nbreak" }), "name");
      expect((await p.list(slug, owner)).body.projects).toEqual([]);

      const two = await created(slug, owner, { name: "ab" });
      expect(two.name).toBe("ab");
      const sixty = "n".repeat(60);
      const long = await created(slug, owner, { name: sixty });
      expect(long.name).toBe(sixty);
      expect(long.slug).toMatch(/^[a-z0-9-]+$/);
      expect((await p.list(slug, owner)).body.projects).toHaveLength(2);
    });

    it("validates template: over 40 characters, unknown name or unknown version are 422 naming template", async () => {
      const { owner, slug } = await newOrg();
      expectValidation(await p.create(slug, owner, { name: "Tpl", template: "d".repeat(41) }), "template");
      expectValidation(await p.create(slug, owner, { name: "Tpl", template: "no-such-template" }), "template");
      expectValidation(await p.create(slug, owner, { name: "Tpl", template: "default@9.9.9" }), "template");
      expectValidation(await p.create(slug, owner, { name: "Tpl", template: "default@1.0.0@x" }), "template");
      expectValidation(await p.create(slug, owner, { name: "Tpl", template: 7 }), "template");
      // Names of properties every JavaScript object has are not templates either.
      for (const template of ["constructor", "__proto__", "toString", "hasOwnProperty@1.0.0", "valueOf@x"]) {
        expectValidation(await p.create(slug, owner, { name: "Tpl", template }), "template");
      }
      expect((await p.list(slug, owner)).body.projects).toEqual([]);

      const pinned = await created(slug, owner, { name: "Pinned", template: "default@1.0.0" });
      expect(pinned).toMatchObject({ template: "default", templateVersion: "1.0.0" });
      const latest = await created(slug, owner, { name: "Latest", template: "default" });
      expect(latest).toMatchObject({ template: "default", templateVersion: "1.1.0" });
      const settled = await p.settle(slug, pinned.slug, owner);
      expect(settled).toMatchObject({ status: "active", templateVersion: "1.0.0" });
      expect(await workspaceVersion(deps, pinned.id)).toBe("1.0.0");
      expect((await p.get(slug, pinned.slug, owner)).body.latestTemplateVersion).toBe("1.1.0");
    });

    it("validates dbType and region against their enums", async () => {
      const { owner, slug } = await newOrg();
      expectValidation(await p.create(slug, owner, { name: "Db", dbType: "postgres" }), "dbType");
      expectValidation(await p.create(slug, owner, { name: "Db", region: "mars" }), "region");
      expectValidation(await p.create(slug, owner, { name: "Db", region: "FRA" }), "region");
      expect((await p.list(slug, owner)).body.projects).toEqual([]);
      const d1 = await created(slug, owner, { name: "Db", dbType: "d1", region: "fra" });
      expect(d1).toMatchObject({ dbType: "d1", region: "fra" });
      for (const region of ALL_REGIONS) {
        const res = await p.create(slug, owner, { name: `Region ${region}`, region });
        expectStatus(res, 201);
        tokensSeen.push(res.body.project.adminToken);
        expect(res.body.project.region).toBe(region);
      }
    });

    it("refuses a malformed JSON body with 400", async () => {
      const { owner, slug } = await newOrg();
      const res = await call(app, "POST", `/org/${slug}/projects`, {
        cookie: owner.cookie,
        rawBody: "{not json",
        headers: { "content-type": "application/json" },
      });
      expectError(res, 400, "BAD_REQUEST");
    });
  });

  // ---- slugs ----

  describe("slugs", () => {
    it("derives slugs from names and suffixes -2, -3 for duplicates among live projects", async () => {
      const { owner, slug } = await newOrg();
      const a = await created(slug, owner, { name: "Shop API" });
      const b = await created(slug, owner, { name: "Shop API" });
      const c = await created(slug, owner, { name: "shop   api!!" });
      expect([a.slug, b.slug, c.slug]).toEqual(["shop-api", "shop-api-2", "shop-api-3"]);
      expect((await created(slug, owner, { name: "Ünïcode Nâme" })).slug).toBe("unicode-name");
      expect((await created(slug, owner, { name: "Shop API 2" })).slug).toBe("shop-api-2-2");
      for (const s of [a.slug, b.slug, c.slug]) expect(s).toMatch(/^[a-z0-9-]+$/);

      // A freed suffix is reused, and a deleted project's slug is free again.
      expectStatus(await p.remove(slug, "shop-api-2", owner), 200);
      expect((await created(slug, owner, { name: "Shop API" })).slug).toBe("shop-api-2");
      expectStatus(await p.remove(slug, "shop-api", owner), 200);
      const again = await created(slug, owner, { name: "Shop API" });
      expect(again.slug).toBe("shop-api");
      expect(again.id).not.toBe(a.id);
      expect((await p.get(slug, "shop-api", owner)).body.project.id).toBe(again.id);

      // Slugs are unique per org, not globally.
      const other = await newOrg();
      expect((await created(other.slug, other.owner, { name: "Shop API" })).slug).toBe("shop-api");
    });

    it("gives concurrent creations of one name distinct slugs", async () => {
      const { owner, slug } = await newOrg();
      const results = await Promise.all(Array.from({ length: 5 }, () => p.create(slug, owner, { name: "Race Car" })));
      for (const res of results) {
        expectStatus(res, 201);
        tokensSeen.push(res.body.project.adminToken);
      }
      const slugs = results.map((r) => r.body.project.slug).sort();
      expect(slugs).toEqual(["race-car", "race-car-2", "race-car-3", "race-car-4", "race-car-5"]);
    });
  });

  // ---- lifecycle ----

  describe("lifecycle", () => {
    let owner: TestUser;
    let slug: string;
    beforeAll(async () => {
      ({ owner, slug } = await newOrg("Lifecycle Org"));
    });

    it("pause: active → paused; resume: paused → active; each 409 from any other status", async () => {
      const project = await provisioned(slug, owner, { name: "Pausable" });
      expect(project.status).toBe("active");

      const resumeActive = await p.action(slug, project.slug, owner, "resume");
      expectError(resumeActive, 409, "CONFLICT");

      const paused = await p.action(slug, project.slug, owner, "pause");
      expectStatus(paused, 200);
      expect(Object.keys(paused.body)).toEqual(["project"]);
      expect(paused.body.project).toMatchObject({ id: project.id, status: "paused" });
      expect((await p.get(slug, project.slug, owner)).body.project.status).toBe("paused");

      expectError(await p.action(slug, project.slug, owner, "pause"), 409, "CONFLICT");
      expectError(await p.action(slug, project.slug, owner, "upgrade"), 409, "CONFLICT");
      expectError(await p.action(slug, project.slug, owner, "provision-retry"), 409, "CONFLICT");
      expect((await p.get(slug, project.slug, owner)).body.project.status).toBe("paused");

      const resumed = await p.action(slug, project.slug, owner, "resume");
      expectStatus(resumed, 200);
      expect(resumed.body.project).toMatchObject({ id: project.id, status: "active" });
      expectError(await p.action(slug, project.slug, owner, "resume"), 409, "CONFLICT");
      expectError(await p.action(slug, project.slug, owner, "provision-retry"), 409, "CONFLICT");
      expect((await p.get(slug, project.slug, owner)).body.project.status).toBe("active");

      // A resume is a deploy.
      const deploys = await deploysOf(slug, project.slug, owner);
      expect(deploys.map((d) => d.kind)).toEqual(["resume", "provision"]);
      expect(deploys[0]).toMatchObject({ status: "succeeded" });
      // Deploys are paged, newest first.
      const deploysPath = `/org/${slug}/projects/${project.slug}/deploys`;
      const page = await call(app, "GET", `${deploysPath}?limit=1&offset=1`, { cookie: owner.cookie });
      expect(page.body.deploys.map((d: { kind: string }) => d.kind)).toEqual(["provision"]);
      expect((await call(app, "GET", `${deploysPath}?limit=0`, { cookie: owner.cookie })).status).toBe(422);

      const events = await p.audit(slug, owner);
      const mine = events.filter((e) => e.target.id === project.id);
      const pausedEvent = mine.find((e) => e.action === "project.paused");
      expect(pausedEvent?.actor).toMatchObject({ type: "account", id: owner.accountId });
      expect(pausedEvent?.data).toMatchObject({ from: "active", to: "paused" });
      expect(mine.find((e) => e.action === "project.resumed")?.data).toMatchObject({ from: "paused", to: "active" });
      // Refused transitions change nothing and write nothing.
      expect(mine.filter((e) => e.action === "project.paused")).toHaveLength(1);
      expect(mine.filter((e) => e.action === "project.resumed")).toHaveLength(1);
    });

    it("a region the deployment does not serve fails provisioning, naming the region; retry provisions again", async () => {
      const project = await created(slug, owner, { name: "Far Away", region: UNSERVED });
      expect(project.status).toBe("provisioning");
      const failed = await p.settle(slug, project.slug, owner);
      expect(failed.status).toBe("failed");
      expect(failed.failureReason).toEqual(expect.stringContaining(UNSERVED));

      let deploys = await deploysOf(slug, project.slug, owner);
      expect(deploys).toHaveLength(1);
      expect(deploys[0]).toMatchObject({ kind: "provision", status: "failed" });
      expect(deploys[0].error).toEqual(expect.stringContaining(UNSERVED));
      expect(deploys[0].finishedAt).not.toBeNull();

      // Only provision-retry (and delete) apply to a failed project.
      for (const action of ["pause", "resume", "upgrade", "reprovision-admin"]) {
        expectError(await p.action(slug, project.slug, owner, action), 409, "CONFLICT");
      }
      expect((await p.get(slug, project.slug, owner)).body.project.status).toBe("failed");

      const retried = await p.action(slug, project.slug, owner, "provision-retry");
      expectStatus(retried, 200);
      expect(retried.body.project).toMatchObject({ id: project.id, status: "provisioning", failureReason: null });
      expect(retried.body.project).not.toHaveProperty("adminToken");

      // The region is still not served here, so it fails again; both attempts are recorded.
      const again = await p.settle(slug, project.slug, owner);
      expect(again.status).toBe("failed");
      expect(again.failureReason).toEqual(expect.stringContaining(UNSERVED));
      deploys = await deploysOf(slug, project.slug, owner);
      expect(deploys.map((d) => [d.kind, d.status])).toEqual([
        ["provision", "failed"],
        ["provision", "failed"],
      ]);
      expect(await workspaceExists(deps, project.id)).toBe(false);

      const events = (await p.audit(slug, owner)).filter((e) => e.target.id === project.id);
      const failures = events.filter((e) => e.action === "project.failed");
      expect(failures).toHaveLength(2);
      expect(failures[0].actor.type).toBe("system");
      expect(JSON.stringify(failures[0].data)).toContain(UNSERVED);
      const retry = events.find((e) => e.action === "project.provision_retried");
      expect(retry?.actor).toMatchObject({ type: "account", id: owner.accountId });
      expect(retry?.data).toMatchObject({ from: "failed", to: "provisioning" });
    });

    it("reprovision-admin on active and paused returns a new token that replaces the old one", async () => {
      const project = await provisioned(slug, owner, { name: "Rotator" });
      const first = await p.action(slug, project.slug, owner, "reprovision-admin");
      expectStatus(first, 200);
      expect(Object.keys(first.body).sort()).toEqual(["adminToken", "project"]);
      expect(first.body.project).toMatchObject({ id: project.id, status: "active" });
      expect(first.body.project).not.toHaveProperty("adminToken");
      const rotated: string = first.body.adminToken;
      tokensSeen.push(rotated);
      expect(typeof rotated).toBe("string");
      expect(rotated.length).toBeGreaterThanOrEqual(32);
      expect(rotated).not.toBe(project.adminToken);
      // Only the new token's hash is kept: the old token no longer matches anything.
      let stored = await storedProject(deps, project.id);
      expect(stored.admin_token_hash).toBe(sha256Hex(rotated));
      expect(stored.admin_token_hash).not.toBe(sha256Hex(project.adminToken));

      expectStatus(await p.action(slug, project.slug, owner, "pause"), 200);
      const second = await p.action(slug, project.slug, owner, "reprovision-admin");
      expectStatus(second, 200);
      expect(second.body.project.status).toBe("paused");
      tokensSeen.push(second.body.adminToken);
      expect(second.body.adminToken).not.toBe(rotated);
      stored = await storedProject(deps, project.id);
      expect(stored.admin_token_hash).toBe(sha256Hex(second.body.adminToken));

      // Never shown again.
      const read = await p.get(slug, project.slug, owner);
      expect(JSON.stringify(read.body)).not.toContain(second.body.adminToken);
      const deploys = await deploysOf(slug, project.slug, owner);
      expect(deploys.filter((d) => d.kind === "reprovision")).toHaveLength(2);
      const events = (await p.audit(slug, owner)).filter((e) => e.target.id === project.id);
      const rotations = events.filter((e) => e.action === "project.admin_token_rotated");
      expect(rotations).toHaveLength(2);
      const text = JSON.stringify(events);
      for (const token of [project.adminToken, rotated, second.body.adminToken]) expect(text).not.toContain(token);
    });

    it("deploys list provision, upgrade, resume and reprovision, newest first", async () => {
      const project = await provisioned(slug, owner, { name: "Deployed", template: "default@1.0.0" });
      const up = await p.action(slug, project.slug, owner, "upgrade");
      expectStatus(up, 200);
      expect(up.body.status).toBe("upgraded");
      expectStatus(await p.action(slug, project.slug, owner, "pause"), 200);
      expectStatus(await p.action(slug, project.slug, owner, "resume"), 200);
      const rotated = await p.action(slug, project.slug, owner, "reprovision-admin");
      expectStatus(rotated, 200);
      tokensSeen.push(rotated.body.adminToken);

      const deploys = await deploysOf(slug, project.slug, owner);
      expect(deploys.map((d) => d.kind)).toEqual(["reprovision", "resume", "upgrade", "provision"]);
      expect(deploys.every((d) => d.status === "succeeded")).toBe(true);
      expect(deploys[2]).toMatchObject({ fromVersion: "1.0.0", toVersion: "1.1.0", error: null });
      expect(deploys[3]).toMatchObject({ toVersion: "1.0.0" });
      expect(new Set(deploys.map((d) => d.id)).size).toBe(4);
      for (let i = 1; i < deploys.length; i++) {
        expect(Date.parse(deploys[i - 1].createdAt)).toBeGreaterThanOrEqual(Date.parse(deploys[i].createdAt));
      }
      // A pause is not a deploy.
      expect(deploys.some((d) => d.kind === "pause")).toBe(false);
    });

    it("racing transitions: one pause, one retry and one delete win; the others are 409 / 404", async () => {
      const active = await provisioned(slug, owner, { name: "Race Pause" });
      const pauses = await Promise.all([1, 2, 3, 4].map(() => p.action(slug, active.slug, owner, "pause")));
      expect(pauses.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of pauses.filter((x) => x.status !== 200)) expectError(r, 409, "CONFLICT");
      const resumes = await Promise.all([1, 2, 3].map(() => p.action(slug, active.slug, owner, "resume")));
      expect(resumes.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of resumes.filter((x) => x.status !== 200)) expectError(r, 409, "CONFLICT");
      expect((await deploysOf(slug, active.slug, owner)).filter((d) => d.kind === "resume")).toHaveLength(1);
      const pausedEvents = (await p.audit(slug, owner)).filter(
        (e) => e.target.id === active.id && e.action === "project.paused",
      );
      expect(pausedEvents).toHaveLength(1);

      const failing = await created(slug, owner, { name: "Race Retry", region: UNSERVED });
      expect((await p.settle(slug, failing.slug, owner)).status).toBe("failed");
      const retries = await Promise.all([1, 2, 3].map(() => p.action(slug, failing.slug, owner, "provision-retry")));
      // The provisioning job can fail the project again between two requests, so a later request
      // may legitimately retry once more; what must hold is one provision deploy per accepted retry.
      const accepted = retries.filter((r) => r.status === 200).length;
      expect(accepted).toBeGreaterThanOrEqual(1);
      for (const r of retries.filter((x) => x.status !== 200)) expectError(r, 409, "CONFLICT");
      expect((await p.settle(slug, failing.slug, owner)).status).toBe("failed");
      expect(await deploysOf(slug, failing.slug, owner)).toHaveLength(1 + accepted);

      const doomed = await created(slug, owner, { name: "Race Delete" });
      const deletes = await Promise.all([1, 2, 3].map(() => p.remove(slug, doomed.slug, owner)));
      expect(deletes.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of deletes.filter((x) => x.status !== 200)) expectError(r, 404, "NOT_FOUND");
    });

    it("PATCH renames and changes environment; validates name and the environment enum", async () => {
      const project = await provisioned(slug, owner, { name: "Patchable" });
      const renamed = await p.patch(slug, project.slug, owner, { name: "Patched Name" });
      expectStatus(renamed, 200);
      expect(Object.keys(renamed.body)).toEqual(["project"]);
      expect(renamed.body.project).toMatchObject({ id: project.id, name: "Patched Name", slug: project.slug });
      expect(Date.parse(renamed.body.project.updatedAt)).toBeGreaterThanOrEqual(Date.parse(project.updatedAt));

      for (const environment of ["staging", "development", "production"]) {
        const res = await p.patch(slug, project.slug, owner, { environment });
        expectStatus(res, 200);
        expect(res.body.project.environment).toBe(environment);
      }
      const both = await p.patch(slug, project.slug, owner, { name: "Both", environment: "staging" });
      expect(both.body.project).toMatchObject({ name: "Both", environment: "staging" });

      expectValidation(await p.patch(slug, project.slug, owner, { environment: "qa" }), "environment");
      expectValidation(await p.patch(slug, project.slug, owner, { name: "a" }), "name");
      expectValidation(await p.patch(slug, project.slug, owner, { name: "y".repeat(61) }), "name");
      expectStatus(await p.patch(slug, project.slug, owner, { name: "z".repeat(60) }), 200);
      expectStatus(await p.patch(slug, project.slug, owner, { name: "zz" }), 200);
      const unchanged = await p.patch(slug, project.slug, owner, {});
      expectStatus(unchanged, 200);
      expect(unchanged.body.project).toMatchObject({ name: "zz", environment: "staging", status: "active" });

      const read = (await p.get(slug, project.slug, owner)).body.project;
      expect(read).toMatchObject({ name: "zz", environment: "staging" });
      const events = (await p.audit(slug, owner)).filter(
        (e) => e.target.id === project.id && e.action === "project.updated",
      );
      expect(events.length).toBeGreaterThanOrEqual(2);
      expect(events.some((e) => e.data.name === "Patched Name")).toBe(true);
    });

    it("DELETE (admin) soft-deletes: 200 {ok:true}, then 404 everywhere, gone from list and overview", async () => {
      const keep = await provisioned(slug, owner, { name: "Keeper" });
      const victim = await provisioned(slug, owner, { name: "Doomed" });
      const before = (await p.overview(slug, owner)).body;

      const res = await p.remove(slug, victim.slug, owner);
      expectStatus(res, 200);
      expect(res.body).toEqual({ ok: true });

      expectError(await p.get(slug, victim.slug, owner), 404, "NOT_FOUND");
      expectError(await p.patch(slug, victim.slug, owner, { name: "Revived" }), 404, "NOT_FOUND");
      expectError(await p.remove(slug, victim.slug, owner), 404, "NOT_FOUND");
      expectError(await p.deploys(slug, victim.slug, owner), 404, "NOT_FOUND");
      for (const action of ["pause", "resume", "provision-retry", "reprovision-admin", "upgrade"]) {
        expectError(await p.action(slug, victim.slug, owner, action), 404, "NOT_FOUND");
      }
      const list = (await p.list(slug, owner)).body.projects;
      expect(list.some((x: any) => x.id === victim.id)).toBe(false);
      expect(list.some((x: any) => x.id === keep.id)).toBe(true);
      const after = (await p.overview(slug, owner)).body;
      expect(after.projectCount).toBe(before.projectCount - 1);
      expect(after.projects.some((x: any) => x.id === victim.id)).toBe(false);
      expect((await p.get(slug, keep.slug, owner)).body.project.status).toBe("active");

      // Soft: the row stays, marked deleted, with its purge date PROJECT_PURGE_DAYS (7) ahead.
      const stored = await storedProject(deps, victim.id);
      expect(stored.status).toBe("deleted");
      expect(stored.deleted_at).not.toBeNull();
      expect(Date.parse(stored.purge_after as string) - Date.parse(stored.deleted_at as string)).toBe(7 * DAY_MS);
      expect(stored.purged_at).toBeNull();

      // The slug is free again.
      const reborn = await created(slug, owner, { name: "Doomed" });
      expect(reborn.slug).toBe(victim.slug);
      expect(reborn.id).not.toBe(victim.id);

      const deleted = (await p.audit(slug, owner)).find(
        (e) => e.action === "project.deleted" && e.target.id === victim.id,
      );
      expect(deleted?.actor).toMatchObject({ type: "account", id: owner.accountId });
    });

    it("a project can be deleted whatever its status (failed, paused)", async () => {
      const failing = await created(slug, owner, { name: "Failing Delete", region: UNSERVED });
      expect((await p.settle(slug, failing.slug, owner)).status).toBe("failed");
      expectStatus(await p.remove(slug, failing.slug, owner), 200);
      expectError(await p.get(slug, failing.slug, owner), 404, "NOT_FOUND");

      const pausing = await provisioned(slug, owner, { name: "Paused Delete" });
      expectStatus(await p.action(slug, pausing.slug, owner, "pause"), 200);
      expectStatus(await p.remove(slug, pausing.slug, owner), 200);
      expectError(await p.get(slug, pausing.slug, owner), 404, "NOT_FOUND");
    });
  });

  // ---- upgrade ----

  describe("upgrade", () => {
    let owner: TestUser;
    let slug: string;
    beforeAll(async () => {
      ({ owner, slug } = await newOrg("Upgrade Org"));
    });

    function upgrade(projectSlug: string, query = "") {
      return call(app, "POST", `/org/${slug}/projects/${projectSlug}/upgrade${query}`, { cookie: owner.cookie });
    }

    it("upgrades 1.0.0 → 1.1.0, then skips with a reason; an older ?version is skipped; unknown is 422", async () => {
      const project = await provisioned(slug, owner, { name: "Upgrade Me", template: "default@1.0.0" });
      expect(project).toMatchObject({ status: "active", templateVersion: "1.0.0" });
      expect((await p.get(slug, project.slug, owner)).body.latestTemplateVersion).toBe("1.1.0");

      const up = await upgrade(project.slug);
      expectStatus(up, 200);
      expect(up.body).toEqual({ status: "upgraded", from: "1.0.0", to: "1.1.0" });
      expect((await p.get(slug, project.slug, owner)).body.project.templateVersion).toBe("1.1.0");
      expect(await workspaceVersion(deps, project.id)).toBe("1.1.0");
      // The 1.1.0 step really ran: e-mails are now unique regardless of case.
      await onWorkspace(deps, project.id, (db) => db.insertInto("users").values(userRow("u1", "Bob@x.test")).execute());
      await expect(
        onWorkspace(deps, project.id, (db) => db.insertInto("users").values(userRow("u2", "bob@X.TEST")).execute()),
      ).rejects.toThrow();

      const again = await upgrade(project.slug);
      expectStatus(again, 200);
      expect(again.body).toMatchObject({ status: "skipped", from: "1.1.0", to: "1.1.0" });
      expect(typeof again.body.reason).toBe("string");
      expect(again.body.reason.length).toBeGreaterThan(0);

      // An empty version is none: the latest.
      const empty = await upgrade(project.slug, "?version=");
      expect(empty.body).toMatchObject({ status: "skipped", from: "1.1.0", to: "1.1.0" });

      const same = await upgrade(project.slug, "?version=1.1.0");
      expect(same.body).toMatchObject({ status: "skipped", from: "1.1.0", to: "1.1.0" });
      expect(typeof same.body.reason).toBe("string");

      const older = await upgrade(project.slug, "?version=1.0.0");
      expectStatus(older, 200);
      expect(older.body).toMatchObject({ status: "skipped", from: "1.1.0" });
      expect(typeof older.body.reason).toBe("string");
      expect(older.body.reason.length).toBeGreaterThan(0);
      expect((await p.get(slug, project.slug, owner)).body.project.templateVersion).toBe("1.1.0");
      expect(await workspaceVersion(deps, project.id)).toBe("1.1.0");

      expectValidation(await upgrade(project.slug, "?version=9.9.9"), "version");
      expectValidation(await upgrade(project.slug, "?version=banana"), "version");
      expectValidation(await upgrade(project.slug, `?version=${"1".repeat(41)}`), "version");
      expect((await p.get(slug, project.slug, owner)).body.project.templateVersion).toBe("1.1.0");

      const deploys = await deploysOf(slug, project.slug, owner);
      const upgrades = deploys.filter((d) => d.kind === "upgrade" && d.status === "succeeded");
      expect(upgrades).toHaveLength(1);
      expect(upgrades[0]).toMatchObject({ fromVersion: "1.0.0", toVersion: "1.1.0" });

      const events = (await p.audit(slug, owner)).filter((e) => e.target.id === project.id);
      const upgradeEvents = events.filter((e) => e.action.startsWith("project.upgrade"));
      expect(upgradeEvents.length).toBeGreaterThanOrEqual(1);
      expect(upgradeEvents.some((e) => e.data.from === "1.0.0" && e.data.to === "1.1.0")).toBe(true);
    });

    it("an explicit ?version newer than the current upgrades to it", async () => {
      const project = await provisioned(slug, owner, { name: "Explicit Up", template: "default@1.0.0" });
      const up = await upgrade(project.slug, "?version=1.1.0");
      expectStatus(up, 200);
      expect(up.body).toEqual({ status: "upgraded", from: "1.0.0", to: "1.1.0" });
    });

    it("a failing migration reports failed and changes nothing; after the data is fixed it upgrades", async () => {
      const project = await provisioned(slug, owner, { name: "Clashing Emails", template: "default@1.0.0" });
      expect(project).toMatchObject({ status: "active", templateVersion: "1.0.0" });
      // Two users whose addresses differ only in case: 1.1.0's unique index on lower(email) cannot be built.
      await onWorkspace(deps, project.id, (db) =>
        db
          .insertInto("users")
          .values([userRow("usr_a", "Ann@example.test"), userRow("usr_b", "ann@example.test")])
          .execute(),
      );

      const res = await upgrade(project.slug);
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ status: "failed", from: "1.0.0", to: "1.1.0" });
      expect(typeof res.body.error).toBe("string");
      expect(res.body.error.length).toBeGreaterThan(0);

      // Nothing changed: the project, the workspace's own version, the data, and no index was left behind.
      const read = (await p.get(slug, project.slug, owner)).body.project;
      expect(read).toMatchObject({ status: "active", templateVersion: "1.0.0" });
      expect(await workspaceVersion(deps, project.id)).toBe("1.0.0");
      const users = await onWorkspace(deps, project.id, (db) =>
        db.selectFrom("users").select(["id", "email"]).orderBy("id").execute(),
      );
      expect(users).toEqual([
        { id: "usr_a", email: "Ann@example.test" },
        { id: "usr_b", email: "ann@example.test" },
      ]);
      await onWorkspace(deps, project.id, async (db) => {
        await db.insertInto("users").values(userRow("usr_c", "ANN@example.test")).execute();
        await db.deleteFrom("users").where("id", "=", "usr_c").execute();
      });

      const deploys = await deploysOf(slug, project.slug, owner);
      expect(deploys[0]).toMatchObject({ kind: "upgrade", status: "failed", fromVersion: "1.0.0", toVersion: "1.1.0" });
      expect(typeof deploys[0].error).toBe("string");
      expect(deploys[0].error.length).toBeGreaterThan(0);
      const failedEvent = (await p.audit(slug, owner)).find(
        (e) => e.target.id === project.id && e.action === "project.upgrade_failed",
      );
      expect(failedEvent?.data).toMatchObject({ from: "1.0.0", to: "1.1.0" });

      // Merge the duplicates; now the same upgrade goes through.
      await onWorkspace(deps, project.id, (db) => db.deleteFrom("users").where("id", "=", "usr_b").execute());
      const retried = await upgrade(project.slug);
      expect(retried.body).toEqual({ status: "upgraded", from: "1.0.0", to: "1.1.0" });
      expect((await p.get(slug, project.slug, owner)).body.project.templateVersion).toBe("1.1.0");
    });

    it("concurrent upgrades of one project: exactly one upgrades, the rest are skipped (or 409), none fail", async () => {
      const project = await provisioned(slug, owner, { name: "Racing Upgrade", template: "default@1.0.0" });
      // More at once than the PostgreSQL pool has connections (by an API key, which needs no
      // session read first): none may hold one connection while waiting for another.
      const key = await createApiKey(app, owner, slug, "full");
      const results = await Promise.all(
        Array.from({ length: 40 }, () =>
          call(app, "POST", `/org/${slug}/projects/${project.slug}/upgrade`, { token: key.token }),
        ),
      );
      const outcomes = results.map((r) => (r.status === 200 ? r.body.status : r.status));
      const detail = JSON.stringify(results.map((r) => r.body));
      // Nothing is wrong with this workspace: no request may report a failure, and only one did the work.
      expect(
        outcomes.filter((o) => o === "upgraded"),
        detail,
      ).toHaveLength(1);
      for (const res of results) {
        if (res.status === 200) expect(["upgraded", "skipped"], detail).toContain(res.body.status);
        else expectError(res, 409, "CONFLICT");
      }
      expect((await p.get(slug, project.slug, owner)).body.project.templateVersion).toBe("1.1.0");
      expect(await workspaceVersion(deps, project.id)).toBe("1.1.0");
      const deploys = await deploysOf(slug, project.slug, owner);
      expect(deploys.filter((d) => d.kind === "upgrade" && d.status === "succeeded")).toHaveLength(1);
      expect(deploys.filter((d) => d.kind === "upgrade" && d.status === "failed")).toHaveLength(0);
    });

    it("upgrade is 409 unless the project is active", async () => {
      const project = await provisioned(slug, owner, { name: "Paused Upgrade", template: "default@1.0.0" });
      expectStatus(await p.action(slug, project.slug, owner, "pause"), 200);
      expectError(await upgrade(project.slug), 409, "CONFLICT");
      expect((await p.get(slug, project.slug, owner)).body.project.templateVersion).toBe("1.0.0");
      expect(await workspaceVersion(deps, project.id)).toBe("1.0.0");
      expect((await deploysOf(slug, project.slug, owner)).some((d) => d.kind === "upgrade")).toBe(false);
    });
  });

  // ---- overview ----

  describe("overview", () => {
    it("returns projectCount and ProjectSummary entries for live projects", async () => {
      const { owner, slug } = await newOrg();
      const empty = await p.overview(slug, owner);
      expectStatus(empty, 200);
      expect(empty.body).toMatchObject({ projectCount: 0, projects: [] });

      const a = await provisioned(slug, owner, { name: "Alpha", region: "fra" });
      const b = await created(slug, owner, { name: "Beta", region: "sjc" });
      expectStatus(await p.patch(slug, a.slug, owner, { environment: "staging" }), 200);
      const res = await p.overview(slug, owner);
      expectStatus(res, 200);
      expect(res.body.projectCount).toBe(2);
      expect(res.body.role).toBe("owner");
      const byId = new Map(res.body.projects.map((x: any) => [x.id, x]));
      expect(byId.get(a.id)).toEqual({
        id: a.id,
        slug: "alpha",
        name: "Alpha",
        status: "active",
        environment: "staging",
        primaryRegion: "fra",
      });
      const beta: any = byId.get(b.id);
      expect(Object.keys(beta).sort()).toEqual(["environment", "id", "name", "primaryRegion", "slug", "status"]);
      expect(beta).toMatchObject({ slug: "beta", name: "Beta", environment: "production", primaryRegion: "sjc" });
      expect(JSON.stringify(res.body)).not.toContain(a.adminToken);
      expect(JSON.stringify(res.body)).not.toContain(b.adminToken);
    });
  });

  // ---- org deletion ----

  describe("org deletion", () => {
    it("soft-deletes the org's projects and leaves other orgs' projects alone", async () => {
      const { owner, slug } = await newOrg("Doomed Org");
      const a = await provisioned(slug, owner, { name: "One" });
      const b = await created(slug, owner, { name: "Two", region: UNSERVED });
      await p.settle(slug, b.slug, owner);
      const bystander = await newOrg("Bystander Org");
      const c = await provisioned(bystander.slug, bystander.owner, { name: "One" });

      const del = await call(app, "DELETE", `/org/${slug}`, { cookie: owner.cookie });
      expectStatus(del, 200);
      expectError(await p.list(slug, owner), 404, "NOT_FOUND");
      expectError(await p.get(slug, a.slug, owner), 404, "NOT_FOUND");

      for (const id of [a.id, b.id]) {
        const row = await storedProject(deps, id);
        expect(row.status).toBe("deleted");
        expect(row.deleted_at).not.toBeNull();
        expect(row.purge_after).not.toBeNull();
      }
      const other = await p.get(bystander.slug, c.slug, bystander.owner);
      expectStatus(other, 200);
      expect(other.body.project.status).toBe("active");
      expect((await storedProject(deps, c.id)).deleted_at).toBeNull();
    });
  });

  // ---- role matrix ----

  describe("role matrix", () => {
    let owner: TestUser;
    let slug: string;
    const principals: Partial<Record<Who, Principal>> = {};
    /** Active; every allowed pause is undone, every refused one must leave it active. */
    let target: any;
    /** Paused; every allowed resume is undone. */
    let pausedTarget: any;
    /** Failed (unserved region); every allowed retry fails again. */
    let failedTarget: any;

    const READ: Record<Who, number> = {
      owner: 200,
      admin: 200,
      developer: 200,
      viewer: 200,
      full: 200,
      deploy: 200,
      "read-only": 200,
      none: 401,
    };
    const LIFECYCLE: Record<Who, number> = {
      owner: 200,
      admin: 200,
      developer: 200,
      viewer: 403,
      full: 200,
      deploy: 200,
      "read-only": 403,
      none: 401,
    };
    const ADMIN_ONLY: Record<Who, number> = {
      owner: 200,
      admin: 200,
      developer: 403,
      viewer: 403,
      full: 200,
      deploy: 403,
      "read-only": 403,
      none: 401,
    };

    function who(w: Who): Principal {
      return w === "none" ? {} : as(principals[w]);
    }

    function expectRefused(res: CallResult, expected: number): void {
      expectError(res, expected, expected === 401 ? "UNAUTHORIZED" : "FORBIDDEN");
    }

    async function status(projectSlug: string): Promise<string> {
      return (await p.get(slug, projectSlug, owner)).body.project.status;
    }

    beforeAll(async () => {
      ({ owner, slug } = await newOrg("Matrix Org"));
      principals.owner = { cookie: owner.cookie };
      for (const role of ["admin", "developer", "viewer"] as const) {
        principals[role] = { cookie: (await addMember(app, mailbox, owner, slug, role)).user.cookie };
      }
      for (const scope of ["full", "deploy", "read-only"] as const) {
        principals[scope] = { token: (await createApiKey(app, owner, slug, scope)).token };
      }
      target = await provisioned(slug, owner, { name: "Matrix Target" });
      pausedTarget = await provisioned(slug, owner, { name: "Matrix Paused" });
      expectStatus(await p.action(slug, pausedTarget.slug, owner, "pause"), 200);
      failedTarget = await created(slug, owner, { name: "Matrix Failed", region: UNSERVED });
      expect((await p.settle(slug, failedTarget.slug, owner)).status).toBe("failed");
    });

    it.each(EVERYONE)("GET projects as %s", async (w) => {
      const res = await p.list(slug, who(w));
      if (READ[w] !== 200) return expectRefused(res, READ[w]);
      expectStatus(res, 200);
      expect(res.body.projects.some((x: any) => x.id === target.id)).toBe(true);
    });

    it.each(EVERYONE)("GET a project as %s", async (w) => {
      const res = await p.get(slug, target.slug, who(w));
      if (READ[w] !== 200) return expectRefused(res, READ[w]);
      expectStatus(res, 200);
      expect(res.body.project.id).toBe(target.id);
    });

    it.each(EVERYONE)("GET deploys as %s", async (w) => {
      const res = await p.deploys(slug, target.slug, who(w));
      if (READ[w] !== 200) return expectRefused(res, READ[w]);
      expectStatus(res, 200);
      expect(res.body.deploys.length).toBeGreaterThanOrEqual(1);
    });

    it.each(EVERYONE)("GET overview as %s", async (w) => {
      const res = await p.overview(slug, who(w));
      if (READ[w] !== 200) return expectRefused(res, READ[w]);
      expectStatus(res, 200);
      expect(res.body.projects.some((x: any) => x.id === target.id)).toBe(true);
    });

    it.each(EVERYONE.filter((w) => w !== "none"))("GET /api/templates as %s", async (w) => {
      const res = await call(app, "GET", "/templates", who(w));
      expectStatus(res, 200);
      expect(res.body.templates.some((t: any) => t.name === "default")).toBe(true);
    });

    it.each(EVERYONE)("POST create as %s", async (w) => {
      const before = (await p.list(slug, owner)).body.projects.length;
      const res = await p.create(slug, who(w), { name: `Made by ${w}` });
      if (LIFECYCLE[w] !== 200) {
        expectRefused(res, LIFECYCLE[w]);
        expect((await p.list(slug, owner)).body.projects).toHaveLength(before);
        return;
      }
      expectStatus(res, 201);
      tokensSeen.push(res.body.project.adminToken);
      expect(res.body.project.status).toBe("provisioning");
      expect((await p.list(slug, owner)).body.projects).toHaveLength(before + 1);
    });

    it.each(EVERYONE)("PATCH as %s", async (w) => {
      const name = `Renamed by ${w}`;
      const res = await p.patch(slug, target.slug, who(w), { name });
      const current = (await p.get(slug, target.slug, owner)).body.project;
      if (LIFECYCLE[w] !== 200) {
        expectRefused(res, LIFECYCLE[w]);
        expect(current.name).not.toBe(name);
        return;
      }
      expectStatus(res, 200);
      expect(current.name).toBe(name);
    });

    it.each(EVERYONE)("pause as %s", async (w) => {
      const res = await p.action(slug, target.slug, who(w), "pause");
      if (LIFECYCLE[w] !== 200) {
        expectRefused(res, LIFECYCLE[w]);
        expect(await status(target.slug)).toBe("active");
        return;
      }
      expectStatus(res, 200);
      expect(res.body.project.status).toBe("paused");
      expectStatus(await p.action(slug, target.slug, owner, "resume"), 200);
    });

    it.each(EVERYONE)("resume as %s", async (w) => {
      const res = await p.action(slug, pausedTarget.slug, who(w), "resume");
      if (LIFECYCLE[w] !== 200) {
        expectRefused(res, LIFECYCLE[w]);
        expect(await status(pausedTarget.slug)).toBe("paused");
        return;
      }
      expectStatus(res, 200);
      expect(res.body.project.status).toBe("active");
      expectStatus(await p.action(slug, pausedTarget.slug, owner, "pause"), 200);
    });

    it.each(EVERYONE)("provision-retry as %s", async (w) => {
      const deploysBefore = (await deploysOf(slug, failedTarget.slug, owner)).length;
      const res = await p.action(slug, failedTarget.slug, who(w), "provision-retry");
      if (LIFECYCLE[w] !== 200) {
        expectRefused(res, LIFECYCLE[w]);
        expect(await status(failedTarget.slug)).toBe("failed");
        expect(await deploysOf(slug, failedTarget.slug, owner)).toHaveLength(deploysBefore);
        return;
      }
      expectStatus(res, 200);
      expect(res.body.project.status).toBe("provisioning");
      expect((await p.settle(slug, failedTarget.slug, owner)).status).toBe("failed");
      expect(await deploysOf(slug, failedTarget.slug, owner)).toHaveLength(deploysBefore + 1);
    });

    it.each(EVERYONE)("upgrade as %s", async (w) => {
      const deploysBefore = (await deploysOf(slug, target.slug, owner)).length;
      const res = await p.action(slug, target.slug, who(w), "upgrade");
      if (LIFECYCLE[w] !== 200) {
        expectRefused(res, LIFECYCLE[w]);
        expect(await deploysOf(slug, target.slug, owner)).toHaveLength(deploysBefore);
        return;
      }
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ status: "skipped", to: "1.1.0" });
    });

    it.each(EVERYONE)("reprovision-admin as %s", async (w) => {
      const hashBefore = (await storedProject(deps, target.id)).admin_token_hash;
      const res = await p.action(slug, target.slug, who(w), "reprovision-admin");
      const hashAfter = (await storedProject(deps, target.id)).admin_token_hash;
      if (ADMIN_ONLY[w] !== 200) {
        expectRefused(res, ADMIN_ONLY[w]);
        expect(hashAfter).toBe(hashBefore);
        return;
      }
      expectStatus(res, 200);
      tokensSeen.push(res.body.adminToken);
      expect(hashAfter).toBe(sha256Hex(res.body.adminToken));
      expect(hashAfter).not.toBe(hashBefore);
    });

    it.each(EVERYONE)("DELETE as %s", async (w) => {
      if (ADMIN_ONLY[w] !== 200) {
        const res = await p.remove(slug, target.slug, who(w));
        expectRefused(res, ADMIN_ONLY[w]);
        expectStatus(await p.get(slug, target.slug, owner), 200);
        return;
      }
      const victim = await created(slug, owner, { name: `Victim of ${w}` });
      const res = await p.remove(slug, victim.slug, who(w));
      expectStatus(res, 200);
      expect(res.body).toEqual({ ok: true });
      expectError(await p.get(slug, victim.slug, owner), 404, "NOT_FOUND");
    });

    it("audit rows name the API key as actor for key-made changes", async () => {
      const events = await p.audit(slug, owner);
      const byKey = events.filter((e) => e.action.startsWith("project.") && e.actor.type === "api_key");
      // In the matrix above the full and deploy keys each created and paused once; only the full key deleted.
      expect(byKey.filter((e) => e.action === "project.created").length).toBe(2);
      expect(byKey.filter((e) => e.action === "project.paused").length).toBe(2);
      expect(byKey.filter((e) => e.action === "project.deleted").length).toBe(1);
    });
  });

  // ---- cross-org isolation ----

  describe("cross-org isolation", () => {
    it("answers 404 for another org's projects, for members of other orgs and for other orgs' keys", async () => {
      const a = await newOrg("Org A");
      const b = await newOrg("Org B");
      const project = await provisioned(a.slug, a.owner, { name: "Alpha Secret" });
      const keyA = await createApiKey(app, a.owner, a.slug, "full");
      const keyB = await createApiKey(app, b.owner, b.slug, "full");

      type Attempt = (org: string, projectSlug: string, who: Principal) => Promise<CallResult>;
      const attempts: [string, Attempt][] = [
        ["GET", (o, s, w) => p.get(o, s, w)],
        ["PATCH", (o, s, w) => p.patch(o, s, w, { name: "Hijacked" })],
        ["DELETE", (o, s, w) => p.remove(o, s, w)],
        ["deploys", (o, s, w) => p.deploys(o, s, w)],
        ...["pause", "resume", "provision-retry", "reprovision-admin", "upgrade"].map(
          (action) => [action, (o: string, s: string, w: Principal) => p.action(o, s, w, action)] as [string, Attempt],
        ),
      ];
      for (const [label, attempt] of attempts) {
        // B's owner (signed in) and B's key, on A's org path.
        for (const w of [{ cookie: b.owner.cookie }, { token: keyB.token }]) {
          const res = await attempt(a.slug, project.slug, w);
          expect(res.status, `${label} on A's path: ${JSON.stringify(res.body)}`).toBe(404);
          expect(res.body.error.code).toBe("NOT_FOUND");
        }
        // B's owner on B's path, naming A's project slug: B has no such project.
        const own = await attempt(b.slug, project.slug, { cookie: b.owner.cookie });
        expect(own.status, `${label} on B's path: ${JSON.stringify(own.body)}`).toBe(404);
        // A's key on B's org.
        const crossKey = await attempt(b.slug, project.slug, { token: keyA.token });
        expect(crossKey.status, `${label} with A's key on B: ${JSON.stringify(crossKey.body)}`).toBe(404);
      }
      expectError(await p.list(a.slug, { cookie: b.owner.cookie }), 404, "NOT_FOUND");
      expectError(await p.list(a.slug, { token: keyB.token }), 404, "NOT_FOUND");
      expectError(await p.create(a.slug, { cookie: b.owner.cookie }, { name: "Intruder" }), 404, "NOT_FOUND");
      expectError(await p.create(a.slug, { token: keyB.token }, { name: "Intruder" }), 404, "NOT_FOUND");
      expect((await p.list(b.slug, b.owner)).body.projects).toEqual([]);

      // A's project is untouched.
      const after = await p.get(a.slug, project.slug, a.owner);
      expect(after.body.project).toMatchObject({ name: "Alpha Secret", status: "active" });
      expect((await p.list(a.slug, a.owner)).body.projects).toHaveLength(1);
      expect((await storedProject(deps, project.id)).admin_token_hash).toBe(sha256Hex(project.adminToken));
    });
  });

  // ---- secrets ----

  describe("admin tokens", () => {
    it("never appear in any audit row", async () => {
      expect(tokensSeen.length).toBeGreaterThan(20);
      const rows = await deps.db.selectFrom("audit_events").selectAll().execute();
      expect(rows.length).toBeGreaterThan(0);
      const text = JSON.stringify(rows);
      for (const token of tokensSeen) {
        expect(text).not.toContain(token);
        // Nor its hash.
        expect(text).not.toContain(sha256Hex(token));
      }
    });
  });
});
