import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAY_MS } from "../src/clock.ts";
import { pruneBranchHistory } from "../src/domains/branches/jobs.ts";
import { onWorkspace } from "../src/domains/projects/workspace-db.ts";
import { sweepUploadLeftovers } from "../src/domains/workspace/files.ts";
import { localStore } from "../src/domains/workspace/store.ts";
import { fileKey } from "../src/storage/keys.ts";
import {
  addMember,
  type CallResult,
  call,
  callWorkspace,
  createActiveProject,
  createApiKey,
  createOrg,
  expectError,
  expectValidation,
  type Mailbox,
  type Receiver,
  signUp,
  sleep,
  startApp,
  startMailbox,
  startReceiver,
  type TestApp,
  type TestUser,
  until,
} from "./harness.ts";

type Item = { id: string; n: number; createdAt: string; updatedAt: string };
type Who = { cookie?: string; token?: string };

describe("branches", () => {
  let app: TestApp;
  let mailbox: Mailbox;
  let receiver: Receiver;
  let owner: TestUser;
  let slug: string;
  let project: { id: string; slug: string; adminToken: string };
  let fileId: string;
  const fileBytes = "the bytes of the parent's file ✓";

  const asOwner = (): Who => ({ cookie: owner.cookie });
  const branchesOf = (projectSlug = project.slug) => `/org/${slug}/projects/${projectSlug}/branches`;
  const createBranch = (body: unknown, who: Who = asOwner(), projectSlug = project.slug) =>
    call(app, "POST", branchesOf(projectSlug), { ...who, body });
  const ws = (workspaceId: string, token: string, method: string, path: string, body?: unknown) =>
    callWorkspace(app, workspaceId, method, path, { token, ...(body === undefined ? {} : { body }) });
  const parent = (method: string, path: string, body?: unknown) =>
    ws(project.id, project.adminToken, method, path, body);

  async function items(workspaceId: string, token: string): Promise<Map<string, Item>> {
    const res = await ws(workspaceId, token, "GET", "/items/things?limit=500");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return new Map((res.body.items as Item[]).map((item) => [item.id, item]));
  }

  function expectSameItems(actual: Map<string, Item>, expected: Map<string, Item>) {
    expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort());
    for (const [id, item] of expected) expect(actual.get(id), id).toEqual(item);
  }

  async function upload(workspaceId: string, token: string, name: string, body: string): Promise<string> {
    const res = await fetch(`${app.url}/w/${workspaceId}/api/files?name=${name}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "text/plain" },
      body,
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as { file: { id: string } }).file.id;
  }

  async function download(workspaceId: string, token: string, id: string): Promise<string | number> {
    const res = await fetch(`${app.url}/w/${workspaceId}/api/files/${id}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return res.status === 200 ? res.text() : res.status;
  }

  function expectCreated(res: CallResult) {
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.branch.status).toBe("active");
    expect(res.body.adminToken).toMatch(/^wsa_[0-9a-f]{64}$/);
    return { ...res.body.branch, adminToken: res.body.adminToken as string };
  }

  beforeAll(async () => {
    mailbox = await startMailbox();
    receiver = await startReceiver();
    app = await startApp({
      SMTP_URL: mailbox.url,
      ALLOW_PRIVATE_WEBHOOK_URLS: "true",
      RATE_LIMIT_PER_MINUTE: "100000",
      AUTH_RATE_LIMIT_PER_MINUTE: "100000",
    });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "Branch Org")).slug;
    project = await createActiveProject(app, owner, slug, "Trunk");
    expect((await parent("POST", "/collections", { slug: "things" })).status).toBe(201);
    for (let n = 0; n < 5; n++) expect((await parent("POST", "/items/things", { n })).status).toBe(201);
    expect(
      (await parent("POST", "/auth/sign-up", { email: "ann@example.com", password: "a long password" })).status,
    ).toBe(201);
    fileId = await upload(project.id, project.adminToken, "parent.txt", fileBytes);
    const hook = await parent("POST", "/webhooks", { name: "prod", url: `${receiver.url}/ws`, events: ["*"] });
    expect(hook.status).toBe(201);
    const orgHook = await call(app, "POST", `/org/${slug}/webhooks`, {
      cookie: owner.cookie,
      body: { url: `${receiver.url}/org`, events: ["branch.*"] },
    });
    expect(orgHook.status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await receiver?.close();
    await mailbox?.close();
  });

  it("copies the parent as of now: items, users, files, with its own API, token and no webhooks", async () => {
    const branch = expectCreated(await createBranch({ name: "feature-a", prNumber: 12 }));
    expect(branch).toMatchObject({
      id: expect.stringMatching(/^brn_[0-9a-z]{26}$/),
      name: "feature-a",
      prNumber: 12,
      projectId: project.id,
      workspaceUrl: `${app.config.publicUrl}/w/${branch.id}`,
      error: null,
    });
    expect(Date.parse(branch.sourceTimestamp)).toBeGreaterThan(Date.now() - 60_000);

    expectSameItems(await items(branch.id, branch.adminToken), await items(project.id, project.adminToken));
    expect(await download(branch.id, branch.adminToken, fileId)).toBe(fileBytes);
    const files = await ws(branch.id, branch.adminToken, "GET", "/files");
    expect(files.body.files.map((file: { id: string }) => file.id)).toEqual([fileId]);
    // The parent's workspace users can sign in to the branch (their sessions came along too).
    const signIn = await ws(branch.id, "", "POST", "/auth/sign-in", {
      email: "ann@example.com",
      password: "a long password",
    });
    expect(signIn.status, JSON.stringify(signIn.body)).toBe(200);

    // No webhooks, though the parent has one: a branch never fires at production receivers.
    const hooks = await ws(branch.id, branch.adminToken, "GET", "/webhooks");
    expect(hooks.status).toBe(200);
    expect(hooks.body.webhooks).toEqual([]);
    expect((await parent("GET", "/webhooks")).body.webhooks).toHaveLength(1);

    // Each admin token opens its own workspace only.
    expectError(await ws(project.id, branch.adminToken, "GET", "/collections"), 401, "UNAUTHORIZED");
    expectError(await ws(branch.id, project.adminToken, "GET", "/collections"), 401, "UNAUTHORIZED");

    // Writes on either side stay there.
    const onBranch = await ws(branch.id, branch.adminToken, "POST", "/items/things", { n: 100 });
    expect(onBranch.status).toBe(201);
    const onParent = await parent("POST", "/items/things", { n: 200 });
    expect(onParent.status).toBe(201);
    expect((await parent("GET", `/items/things/${onBranch.body.item.id}`)).status).toBe(404);
    expect((await ws(branch.id, branch.adminToken, "GET", `/items/things/${onParent.body.item.id}`)).status).toBe(404);
    const branchFile = await upload(branch.id, branch.adminToken, "branch.txt", "branch only");
    expect(await download(project.id, project.adminToken, branchFile)).toBe(404);
    expect(await download(branch.id, branch.adminToken, branchFile)).toBe("branch only");

    // The branch records its own history, and its outbox is dispatched: its audit rows reach the
    // org's log, and its events a hook of its own only.
    const { deps } = app.server;
    const history = await onWorkspace(deps, branch.id, (db) => db.selectFrom("_history").select("tbl").execute());
    expect(history.map((row) => row.tbl)).toEqual(expect.arrayContaining(["items", "files"]));
    expect((await ws(branch.id, branch.adminToken, "POST", "/collections", { slug: "branch-only" })).status).toBe(201);
    await until("the branch's audit row", async () => {
      const audit = await call(app, "GET", `/org/${slug}/audit?action=workspace_collection.created`, asOwner());
      return audit.body.events.some((event: { data: { projectId: string } }) => event.data.projectId === branch.id);
    });
    const own = await ws(branch.id, branch.adminToken, "POST", "/webhooks", {
      name: "staging",
      url: `${receiver.url}/branch`,
      events: ["items:*"],
    });
    expect(own.status, JSON.stringify(own.body)).toBe(201);
    expect((await parent("GET", "/webhooks")).body.webhooks).toHaveLength(1);
    expect((await ws(branch.id, branch.adminToken, "POST", "/items/things", { n: 101 })).status).toBe(201);
    await receiver.waitFor("the branch's own hook", (r) => r.path === "/branch" && r.body.includes('"n":101'));
    await until("the branch's outbox to empty", async () => {
      const events = await onWorkspace(deps, branch.id, (db) => db.selectFrom("events").select("id").execute());
      return events.length === 0;
    });

    // The branch's events reach no production receiver; the parent's write reached its hook.
    await receiver.waitFor("the parent's item event", (r) => r.path === "/ws" && r.body.includes('"n":200'));
    await sleep(200);
    expect(receiver.at("/ws").filter((r) => r.body.includes('"n":10'))).toEqual([]);

    const listed = await call(app, "GET", branchesOf(), asOwner());
    expect(listed.status).toBe(200);
    expect(listed.body.branches.map((b: { id: string }) => b.id)).toContain(branch.id);
    const read = await call(app, "GET", `${branchesOf()}/${branch.id}`, asOwner());
    expect(read.status).toBe(200);
    expect(read.body.branch).toMatchObject({ id: branch.id, status: "active", name: "feature-a" });
    expect(read.body.branch).not.toHaveProperty("adminToken");

    const created = await receiver.waitFor(
      "branch.created",
      (r) => r.path === "/org" && r.body.includes(branch.id) && r.body.includes("branch.created"),
    );
    expect(JSON.parse(created.body)).toMatchObject({
      event: "branch.created",
      payload: { branchId: branch.id, projectId: project.id, branchName: "feature-a" },
    });
  });

  it("copies the parent as of an instant of its restore window", async () => {
    const kept = await upload(project.id, project.adminToken, "kept.txt", "deleted later");
    await sleep(20);
    const instant = Date.now();
    const then = await items(project.id, project.adminToken);
    await sleep(20);
    const [first, second] = [...then.keys()];
    expect((await parent("DELETE", `/items/things/${first}`)).status).toBe(204);
    expect((await parent("PATCH", `/items/things/${second}`, { n: -1 })).status).toBe(200);
    expect((await parent("POST", "/items/things", { n: 300 })).status).toBe(201);
    expect((await parent("DELETE", `/files/${kept}`)).status).toBe(204);

    const branch = expectCreated(await createBranch({ name: "from-an-instant", at: instant }));
    expect(branch.sourceTimestamp).toBe(new Date(instant).toISOString());
    expectSameItems(await items(branch.id, branch.adminToken), then);
    expect(await download(branch.id, branch.adminToken, kept)).toBe("deleted later");
    expect(await download(project.id, project.adminToken, kept)).toBe(404);

    // Unix seconds are read as such (the first whole second of the window).
    const window = await call(app, "GET", `/org/${slug}/projects/${project.slug}/restore-window`, asOwner());
    const seconds = Math.ceil(Date.parse(window.body.earliest) / 1000);
    await sleep(Math.max(0, seconds * 1000 - Date.now() + 10));
    const bySeconds = expectCreated(await createBranch({ name: "by-seconds", at: seconds }));
    expect(bySeconds.sourceTimestamp).toBe(new Date(seconds * 1000).toISOString());
  });

  it("reset brings the parent's current data back", async () => {
    const branch = expectCreated(await createBranch({ name: "to-reset" }));
    expect((await ws(branch.id, branch.adminToken, "POST", "/items/things", { n: 400 })).status).toBe(201);
    expect((await parent("POST", "/items/things", { n: 500 })).status).toBe(201);
    const res = await call(app, "POST", `${branchesOf()}/${branch.id}/reset`, asOwner());
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.branch).toMatchObject({ id: branch.id, status: "active", error: null });
    expect(Date.parse(res.body.branch.sourceTimestamp)).toBeGreaterThanOrEqual(Date.parse(branch.sourceTimestamp));
    expectSameItems(await items(branch.id, branch.adminToken), await items(project.id, project.adminToken));
    // Same branch, same token; the webhooks are still none.
    expect((await ws(branch.id, branch.adminToken, "GET", "/webhooks")).body.webhooks).toEqual([]);
    const audit = await call(app, "GET", `/org/${slug}/audit?action=branch.reset`, asOwner());
    expect(audit.body.events[0]).toMatchObject({ action: "branch.reset", target: { type: "branch", id: branch.id } });
  });

  it("delete removes the branch and its workspace", async () => {
    const branch = expectCreated(await createBranch({ name: "to-delete" }));
    expect((await ws(branch.id, branch.adminToken, "GET", "/collections")).status).toBe(200);
    const res = await call(app, "DELETE", `${branchesOf()}/${branch.id}`, asOwner());
    expect(res.status).toBe(204);
    expectError(await ws(branch.id, branch.adminToken, "GET", "/collections"), 404, "NOT_FOUND");
    expectError(await call(app, "GET", `${branchesOf()}/${branch.id}`, asOwner()), 404, "NOT_FOUND");
    expectError(await call(app, "DELETE", `${branchesOf()}/${branch.id}`, asOwner()), 404, "NOT_FOUND");
    const listed = await call(app, "GET", branchesOf(), asOwner());
    expect(listed.body.branches.map((b: { id: string }) => b.id)).not.toContain(branch.id);
    const deleted = await receiver.waitFor(
      "branch.deleted",
      (r) => r.path === "/org" && r.body.includes(branch.id) && r.body.includes("branch.deleted"),
    );
    expect(JSON.parse(deleted.body)).toMatchObject({ event: "branch.deleted", payload: { branchId: branch.id } });
    const audit = await call(app, "GET", `/org/${slug}/audit?action=branch.deleted`, asOwner());
    expect(audit.body.events[0]).toMatchObject({ target: { type: "branch", id: branch.id } });
    // The name is free again.
    expectCreated(await createBranch({ name: "to-delete" }));
  });

  it("validates the name, the PR number and the instant", async () => {
    expectValidation(await createBranch({ name: "" }), "name");
    expectValidation(await createBranch({ name: "x".repeat(64) }), "name");
    expectValidation(await createBranch({}), "name");
    expectValidation(await createBranch({ name: "pr", prNumber: 0 }), "prNumber");
    expectValidation(await createBranch({ name: "pr", prNumber: 1.5 }), "prNumber");
    const window = await call(app, "GET", `/org/${slug}/projects/${project.slug}/restore-window`, asOwner());
    for (const at of [Date.parse(window.body.earliest) - 60_000, Date.now() + 60_000]) {
      const res = await createBranch({ name: "too-far", at });
      expectValidation(res, "at");
      expect(res.body.error.message).toContain(window.body.earliest.slice(0, 16));
    }
    expectValidation(await createBranch({ name: "bad-at", at: "now" }), "at");
    expectError(await createBranch({ name: "feature-a" }), 409, "CONFLICT");
    const longest = expectCreated(await createBranch({ name: "y".repeat(63), prNumber: null }));
    expect(longest.prNumber).toBeNull();
  });

  it("is for developers and deploy keys; viewers, read-only keys and other orgs are refused", async () => {
    const viewer = await addMember(app, mailbox, owner, slug, "viewer");
    const developer = await addMember(app, mailbox, owner, slug, "developer");
    const deployKey = await createApiKey(app, owner, slug, "deploy");
    const readOnly = await createApiKey(app, owner, slug, "read-only");
    const outsider = await signUp(app);
    const elsewhere = await createOrg(app, outsider, "Elsewhere");
    const outsiderKey = await createApiKey(app, outsider, elsewhere.slug, "full");

    expectError(await createBranch({ name: "by-viewer" }, { cookie: viewer.user.cookie }), 403, "FORBIDDEN");
    expectError(await createBranch({ name: "by-read-only" }, { token: readOnly.token }), 403, "FORBIDDEN");
    expectError(await createBranch({ name: "by-outsider" }, { token: outsiderKey.token }), 404, "NOT_FOUND");
    expectError(await createBranch({ name: "by-outsider" }, { cookie: outsider.cookie }), 404, "NOT_FOUND");
    expectError(await createBranch({ name: "anonymous" }, {}), 401, "UNAUTHORIZED");
    const byDeploy = expectCreated(await createBranch({ name: "by-deploy-key" }, { token: deployKey.token }));
    const byDeveloper = expectCreated(await createBranch({ name: "by-developer" }, { cookie: developer.user.cookie }));

    // Reads are for every member and key; changes are not.
    for (const who of [{ cookie: viewer.user.cookie }, { token: readOnly.token }]) {
      expect((await call(app, "GET", branchesOf(), who)).status).toBe(200);
      expect((await call(app, "GET", `${branchesOf()}/${byDeploy.id}`, who)).status).toBe(200);
      expectError(await call(app, "POST", `${branchesOf()}/${byDeploy.id}/reset`, who), 403, "FORBIDDEN");
      expectError(await call(app, "DELETE", `${branchesOf()}/${byDeploy.id}`, who), 403, "FORBIDDEN");
    }
    expectError(await call(app, "GET", branchesOf(), { token: outsiderKey.token }), 404, "NOT_FOUND");
    expectError(
      await call(app, "GET", `${branchesOf()}/${byDeploy.id}`, { token: outsiderKey.token }),
      404,
      "NOT_FOUND",
    );
    // An org key acts as admin on the branch's workspace, and only within its org.
    expect((await ws(byDeploy.id, deployKey.token, "GET", "/collections")).status).toBe(200);
    expectError(await ws(byDeploy.id, outsiderKey.token, "GET", "/collections"), 404, "NOT_FOUND");
    expect((await call(app, "POST", `${branchesOf()}/${byDeploy.id}/reset`, { token: deployKey.token })).status).toBe(
      200,
    );
    expect((await call(app, "DELETE", `${branchesOf()}/${byDeploy.id}`, { token: deployKey.token })).status).toBe(204);
    expect(
      (await call(app, "DELETE", `${branchesOf()}/${byDeveloper.id}`, { cookie: developer.user.cookie })).status,
    ).toBe(204);
  });

  it("caps a project at 10 branches, 404s unknown and other projects' ids, and goes with its project", async () => {
    const other = await createActiveProject(app, owner, slug, "Side");
    const first = expectCreated(await createBranch({ name: "side-0" }, asOwner(), other.slug));
    for (let n = 1; n < 10; n++) expectCreated(await createBranch({ name: `side-${n}` }, asOwner(), other.slug));
    const over = await createBranch({ name: "side-10" }, asOwner(), other.slug);
    expectError(over, 409, "PLAN_LIMIT");
    expect(over.body.error.details).toEqual({ limit: 10, used: 10, planId: "free" });

    // Unknown ids, ids that cannot be, and another project's branch.
    const unknown = `brn_${"0".repeat(26)}`;
    for (const id of [unknown, "nope", project.id, first.id]) {
      expectError(await call(app, "GET", `${branchesOf()}/${id}`, asOwner()), 404, "NOT_FOUND");
      expectError(await call(app, "POST", `${branchesOf()}/${id}/reset`, asOwner()), 404, "NOT_FOUND");
      expectError(await call(app, "DELETE", `${branchesOf()}/${id}`, asOwner()), 404, "NOT_FOUND");
    }
    expectError(await ws(unknown, first.adminToken, "GET", "/collections"), 404, "NOT_FOUND");

    // The project's deletion takes its branches' workspaces offline at once.
    expect((await ws(first.id, first.adminToken, "GET", "/collections")).status).toBe(200);
    expect((await call(app, "DELETE", `/org/${slug}/projects/${other.slug}`, asOwner())).status).toBe(200);
    expectError(await ws(first.id, first.adminToken, "GET", "/collections"), 404, "NOT_FOUND");
    expectError(await call(app, "GET", branchesOf(other.slug), asOwner()), 404, "NOT_FOUND");
  }, 60_000);

  it("prunes a branch's history past the restore window", async () => {
    const branch = expectCreated(await createBranch({ name: "pruned" }));
    expect((await ws(branch.id, branch.adminToken, "POST", "/items/things", { n: 600 })).status).toBe(201);
    // A file deleted in the branch: its bytes go once nothing holds them.
    const dropped = await upload(branch.id, branch.adminToken, "dropped.txt", "dropped in the branch");
    expect((await ws(branch.id, branch.adminToken, "DELETE", `/files/${dropped}`)).status).toBe(204);
    const { deps } = app.server;
    const bytes = fileKey(branch.id, dropped);
    const records = () => onWorkspace(deps, branch.id, (db) => db.selectFrom("_history").select("seq").execute());
    const store = localStore(app.server.workspaces, deps.dialect);
    await pruneBranchHistory(deps, store);
    expect((await records()).length).toBeGreaterThan(0);
    // Two days on: past the window, and the bytes old enough for the leftovers sweep.
    app.clock.advance(2 * DAY_MS);
    try {
      await pruneBranchHistory(deps, store);
      expect(await records()).toEqual([]);
      expect(await deps.storage.has(bytes)).toBe(true);
      await sweepUploadLeftovers(deps, store);
      expect(await deps.storage.has(bytes)).toBe(false);
    } finally {
      app.clock.advance(-2 * DAY_MS);
    }
    // The branch's copy of the parent's file stays: the branch lists it.
    expect(await download(branch.id, branch.adminToken, fileId)).toBe(fileBytes);
  });

  it("leaves a failed branch with its error and a notification, and no workspace", async () => {
    const broken = await createActiveProject(app, owner, slug, "Broken parent");
    // The parent's workspace vanishes underneath it (as a disk fault might): the copy fails.
    const { deps } = app.server;
    app.server.workspaces.forget(broken.id);
    if (deps.dialect === "sqlite") {
      const { rmSync } = await import("node:fs");
      const { workspaceFile } = await import("../src/domains/projects/workspace-db.ts");
      for (const suffix of ["", "-wal", "-shm"]) rmSync(`${workspaceFile(deps, broken.id)}${suffix}`, { force: true });
    } else {
      const { sql } = await import("kysely");
      const { workspaceSchema } = await import("../src/domains/projects/workspace-db.ts");
      await sql`drop schema ${sql.id(workspaceSchema(broken.id))} cascade`.execute(deps.db);
    }
    const res = await createBranch({ name: "doomed" }, asOwner(), broken.slug);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.branch).toMatchObject({ name: "doomed", status: "failed", error: expect.any(String) });
    const read = await call(app, "GET", `${branchesOf(broken.slug)}/${res.body.branch.id}`, asOwner());
    expect(read.body.branch.status).toBe("failed");
    // Its workspace was never made: nothing answers there.
    const there = await ws(res.body.branch.id, res.body.adminToken, "GET", "/items/things");
    expect(there.status).not.toBe(200);
    const notes = await call(app, "GET", `/org/${slug}/notifications`, asOwner());
    expect(
      notes.body.notifications.some(
        (n: { kind: string; data: { branchId?: string } }) => n.data?.branchId === res.body.branch.id,
      ),
    ).toBe(true);
  });

  it("is in the OpenAPI document", async () => {
    const doc = (await call(app, "GET", "/openapi.json")).body;
    const base = "/org/{slug}/projects/{projectSlug}/branches";
    expect(Object.keys(doc.paths[base])).toEqual(expect.arrayContaining(["get", "post"]));
    expect(Object.keys(doc.paths[`${base}/{id}`])).toEqual(expect.arrayContaining(["get", "delete"]));
    expect(Object.keys(doc.paths[`${base}/{id}/reset`])).toEqual(["post"]);
    expect(doc.paths[base].post.responses).toHaveProperty("201");
    expect(doc.paths[base].post.responses).toHaveProperty("409");
    expect(doc.paths[base].post.responses).toHaveProperty("422");
    expect(doc.paths[`${base}/{id}`].delete.responses).toHaveProperty("204");
  });
});
