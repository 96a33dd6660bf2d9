import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Deps } from "../src/deps.ts";
import { projectJobs } from "../src/domains/projects/jobs.ts";
import { onWorkspace, workspaceSchema, workspaceVersion } from "../src/domains/projects/workspace-db.ts";
import { deliveryJobs } from "../src/domains/webhooks/delivery-jobs.ts";
import type { SingleJobHandler } from "../src/jobs/handlers.ts";
import { Worker } from "../src/jobs/worker.ts";
import { fromJsonColumn } from "../src/lib/json.ts";
import { fileKey, projectPrefix } from "../src/storage/keys.ts";
import {
  createOrg,
  expectError,
  expectStatus,
  sha256Hex,
  signUp,
  startApp,
  storedKeys,
  type TestApp,
  type TestUser,
  uniqueEmail,
  until,
} from "./harness.ts";
import {
  ALL_REGIONS,
  api,
  dropAllWorkspaces,
  LOOSE_LIMITS,
  storedProject,
  userRow,
  workspaceExists,
} from "./project-calls.ts";

// ---------------------------------------------------------------------------------------------
// An app without built-in workers: the test runs the workers itself, so it decides when jobs
// run and which regions the deployment serves.
// ---------------------------------------------------------------------------------------------

describe("projects with workers the test controls", () => {
  let app: TestApp;
  let deps: Deps;
  let owner: TestUser;
  let slug: string;
  const p = api(() => app);
  const workers: Worker[] = [];

  beforeAll(async () => {
    app = await startApp({ WORKERS: "0", SERVED_REGIONS: "fra", PROJECT_PURGE_DAYS: "0", ...LOOSE_LIMITS });
    deps = app.server.deps;
    owner = await signUp(app, uniqueEmail("owner"));
    slug = (await createOrg(app, owner, "Worker Org")).slug;
  });
  afterAll(async () => {
    for (const worker of workers.splice(0)) await worker.stop(1_000);
    if (deps) await dropAllWorkspaces(deps);
    await app?.close();
  });

  /** A worker process of this deployment, configured to serve `regions`. */
  async function startWorker(regions: string[]): Promise<Worker> {
    const workerDeps: Deps = { ...deps, config: { ...deps.config, servedRegions: regions } };
    const worker = new Worker(
      workerDeps,
      { ...projectJobs(workerDeps), ...deliveryJobs(workerDeps) },
      { concurrency: 2, pollMs: 50 },
    );
    workers.push(worker);
    await worker.start();
    return worker;
  }

  async function stopWorker(worker: Worker): Promise<void> {
    await worker.stop(1_000);
    workers.splice(workers.indexOf(worker), 1);
  }

  it("a provisioning project answers 409 to pause, resume, retry, upgrade and reprovision-admin; delete works", async () => {
    const project = await p.created(slug, owner, { name: "Still Provisioning", region: "fra" });
    expect(project.status).toBe("provisioning");
    for (const action of ["pause", "resume", "provision-retry", "upgrade", "reprovision-admin"]) {
      expectError(await p.action(slug, project.slug, owner, action), 409, "CONFLICT");
    }
    const read = await p.get(slug, project.slug, owner);
    expect(read.body.project.status).toBe("provisioning");
    expect((await storedProject(deps, project.id)).admin_token_hash).toBe(sha256Hex(project.adminToken));

    const del = await p.remove(slug, project.slug, owner);
    expectStatus(del, 200);
    expect(del.body).toEqual({ ok: true });
    expectError(await p.get(slug, project.slug, owner), 404, "NOT_FOUND");
  });

  /** Runs the project's provisioning job in this test, the way a worker that claimed it would. */
  async function runProvisionJob(projectId: string): Promise<void> {
    const jobs = await deps.db.selectFrom("jobs").selectAll().where("kind", "=", "project.provision").execute();
    const job = jobs.find((row) => fromJsonColumn<{ projectId?: string }>(row.payload, {}).projectId === projectId);
    if (!job) throw new Error(`no provisioning job for ${projectId}`);
    const handler = projectJobs(deps)["project.provision"] as SingleJobHandler;
    await handler.handle(fromJsonColumn(job.payload, {}), { job, signal: new AbortController().signal });
  }

  it("a provisioning job run twice at once (a lapsed lease) leaves the project active on its workspace", async () => {
    // No worker here: the test is the only one to run the jobs.
    for (const worker of [...workers]) await stopWorker(worker);
    // Several projects: on PostgreSQL the two runs collided only now and then before they were ordered.
    for (const name of ["Twice A", "Twice B", "Twice C"]) {
      const project = await p.created(slug, owner, { name, region: "fra" });
      await Promise.all([runProvisionJob(project.id), runProvisionJob(project.id)]);

      const settled = (await p.get(slug, project.slug, owner)).body.project;
      expect(settled, name).toMatchObject({ status: "active", failureReason: null, templateVersion: "1.1.0" });
      expect(await workspaceVersion(deps, project.id), name).toBe("1.1.0");
      const deploys = (await p.deploys(slug, project.slug, owner)).body.deploys;
      expect(deploys.map((d: any) => [d.kind, d.status])).toEqual([["provision", "succeeded"]]);
      const actions = (await p.audit(slug, owner)).filter((e) => e.target.id === project.id).map((e) => e.action);
      expect(actions.filter((a) => a.startsWith("project.")).sort()).toEqual([
        "project.created",
        "project.provisioned",
      ]);

      // Run again once settled (its outcome was never recorded): the workspace and its data stay.
      await onWorkspace(deps, project.id, (db) =>
        db.insertInto("users").values(userRow("usr_kept", "k@x.test")).execute(),
      );
      await runProvisionJob(project.id);
      expect((await p.get(slug, project.slug, owner)).body.project.status).toBe("active");
      const users = await onWorkspace(deps, project.id, (db) => db.selectFrom("users").select("id").execute());
      expect(users).toEqual([{ id: "usr_kept" }]);
    }
  });

  it("a provisioning run that fails leaves the workspace as it found it, dropping nothing", async () => {
    for (const worker of [...workers]) await stopWorker(worker);
    const project = await p.created(slug, owner, { name: "In The Way", region: "fra" });
    // What another run of the job may have put there; here, a table the template then fails on.
    if (deps.dialect === "postgres") await sql`create schema ${sql.id(workspaceSchema(project.id))}`.execute(deps.db);
    await onWorkspace(deps, project.id, async (db) => {
      await db.schema.createTable("collections").addColumn("slug", "text").execute();
      await db.insertInto("collections").values({ slug: "placed-by-another-run" }).execute();
    });

    await runProvisionJob(project.id);
    const failed = (await p.get(slug, project.slug, owner)).body.project;
    expect(failed.status).toBe("failed");
    expect(failed.failureReason).toEqual(expect.stringContaining("default@1.1.0 failed to apply"));
    const rows = await onWorkspace(deps, project.id, (db) => db.selectFrom("collections").selectAll().execute());
    expect(rows).toEqual([{ slug: "placed-by-another-run" }]);
  });

  it("fails in an unserved region; after the region is enabled, provision-retry makes it active", async () => {
    // The deployment serves only fra: provisioning in sjc fails, naming the region.
    const narrow = await startWorker(["fra"]);
    const project = await p.created(slug, owner, { name: "West Coast", region: "sjc" });
    const failed = await p.settle(slug, project.slug, owner);
    expect(failed.status).toBe("failed");
    expect(failed.failureReason).toEqual(expect.stringContaining("sjc"));
    expect(await workspaceExists(deps, project.id)).toBe(false);

    // The operator adds sjc to SERVED_REGIONS and restarts the workers.
    await stopWorker(narrow);
    await startWorker(ALL_REGIONS);

    const retried = await p.action(slug, project.slug, owner, "provision-retry");
    expectStatus(retried, 200);
    expect(retried.body.project).toMatchObject({ status: "provisioning", failureReason: null });
    const active = await p.settle(slug, project.slug, owner);
    expect(active).toMatchObject({ status: "active", failureReason: null, region: "sjc", templateVersion: "1.1.0" });
    expect(await workspaceVersion(deps, project.id)).toBe("1.1.0");

    expectError(await p.action(slug, project.slug, owner, "provision-retry"), 409, "CONFLICT");

    const deploys = (await p.deploys(slug, project.slug, owner)).body.deploys;
    expect(deploys.map((d: any) => [d.kind, d.status])).toEqual([
      ["provision", "succeeded"],
      ["provision", "failed"],
    ]);
    expect(deploys[1].error).toEqual(expect.stringContaining("sjc"));
    expect(deploys[0].error).toBeNull();

    const events = (await p.audit(slug, owner)).filter((e) => e.target.id === project.id);
    const actions = events.map((e) => e.action);
    expect(actions).toEqual(
      expect.arrayContaining(["project.created", "project.failed", "project.provision_retried", "project.provisioned"]),
    );
    const order = (action: string) => events.findIndex((e) => e.action === action);
    // Newest first: provisioned after the retry, the retry after the failure.
    expect(order("project.provisioned")).toBeLessThan(order("project.provision_retried"));
    expect(order("project.provision_retried")).toBeLessThan(order("project.failed"));
    expect(JSON.stringify(events)).not.toContain(project.adminToken);
  });

  it("purge drops the workspaces of deleted projects once due, and only theirs", async () => {
    // PROJECT_PURGE_DAYS=0 here: a deleted project is due at once. Workers from the previous test serve all regions.
    if (workers.length === 0) await startWorker(ALL_REGIONS);
    const live = await p.provisioned(slug, owner, { name: "Survivor", region: "fra" });
    const doomed = await p.provisioned(slug, owner, { name: "Purged", region: "fra" });
    expect(await workspaceExists(deps, doomed.id)).toBe(true);
    // A workspace written to lately has an outbox hint.
    await deps.db
      .insertInto("workspace_outbox_hints")
      .values({ project_id: doomed.id, created_at: new Date().toISOString() })
      .execute();
    // Uploaded files go with their workspace.
    for (const id of [live.id, doomed.id]) await deps.storage.put(fileKey(id, "fil_upload"), "bytes");
    expectStatus(await p.remove(slug, doomed.slug, owner), 200);

    await deps.jobs.enqueue(deps.db, { kind: "projects.purge", payload: {} });
    const purged = await until(
      "purge",
      async () => {
        const row = await storedProject(deps, doomed.id);
        return row.purged_at !== null ? row : undefined;
      },
      15_000,
    );
    expect(purged.status).toBe("deleted");
    expect(await workspaceExists(deps, doomed.id)).toBe(false);
    expect(await workspaceExists(deps, live.id)).toBe(true);
    expect(await storedKeys(deps, projectPrefix(doomed.id))).toEqual([]);
    // Nor does the outbox sweep look for it any more.
    const hints = await deps.db.selectFrom("workspace_outbox_hints").select("project_id").execute();
    expect(hints.map((h) => h.project_id)).not.toContain(doomed.id);
    expect(await deps.storage.has(fileKey(live.id, "fil_upload"))).toBe(true);
    expect(await workspaceVersion(deps, live.id)).toBe("1.1.0");
    expect((await storedProject(deps, live.id)).purged_at).toBeNull();
    expectError(await p.get(slug, doomed.slug, owner), 404, "NOT_FOUND");
  });
});
