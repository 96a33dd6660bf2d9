import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DAY_MS } from "../src/clock.ts";
import { maintainHistory } from "../src/domains/backups/jobs.ts";
import { workspaceSchema } from "../src/domains/projects/workspace-db.ts";
import { sweepUploadLeftovers } from "../src/domains/workspace/files.ts";
import { localStore } from "../src/domains/workspace/store.ts";
import { fileKey } from "../src/storage/keys.ts";
import {
  call,
  callWorkspace,
  createActiveProject,
  createOrg,
  dialect,
  signUp,
  startApp,
  type TestApp,
  type TestUser,
} from "./harness.ts";

describe("keeping a workspace's history", () => {
  let app: TestApp;
  let owner: TestUser;
  let slug: string;

  beforeAll(async () => {
    app = await startApp({ RATE_LIMIT_PER_MINUTE: "100000" });
    owner = await signUp(app);
    slug = (await createOrg(app, owner, "History Org")).slug;
  });
  afterAll(() => app?.close());

  const store = () => localStore(app.server.workspaces, app.server.deps.dialect);
  const historyRows = (projectId: string) =>
    app.server.workspaces.use(projectId, async (db) =>
      Number(
        (
          await db
            .selectFrom("_history")
            .select((eb) => eb.fn.countAll().as("n"))
            .executeTakeFirstOrThrow()
        ).n,
      ),
    );

  it("installs it in a workspace made before history existed; its window starts then", async () => {
    const project = await createActiveProject(app, owner, slug, "Legacy");
    const { deps } = app.server;
    // What a workspace made by an earlier release looks like: no history, nothing recorded.
    await app.server.workspaces.use(project.id, async (db) => {
      if (deps.dialect === "postgres") {
        await sql`drop table ${sql.id(workspaceSchema(project.id))}._history cascade`.execute(db);
        await sql`drop function ${sql.id(workspaceSchema(project.id))}._history_record() cascade`.execute(db);
      } else {
        for (const table of ["collections", "items", "users", "user_sessions", "files"]) {
          for (const op of ["insert", "update", "delete"]) {
            await sql.raw(`drop trigger if exists "_history_${table}_${op}"`).execute(db);
          }
        }
        await sql`drop table _history`.execute(db);
      }
    });
    await deps.db.updateTable("projects").set({ history_since: null }).where("id", "=", project.id).execute();
    const before = await call(app, "GET", `/org/${slug}/projects/legacy/restore-window`, { cookie: owner.cookie });
    expect(Date.parse(before.body.earliest)).toBe(Date.parse(before.body.latest));
    expect(
      (await callWorkspace(app, project.id, "POST", "/collections", { token: project.adminToken, body: { slug: "c" } }))
        .status,
    ).toBe(201);

    await maintainHistory(deps, store());
    const row = await deps.db
      .selectFrom("projects")
      .select("history_since")
      .where("id", "=", project.id)
      .executeTakeFirstOrThrow();
    expect(row.history_since).not.toBeNull();
    expect(
      (await callWorkspace(app, project.id, "POST", "/items/c", { token: project.adminToken, body: { a: 1 } })).status,
    ).toBe(201);
    expect(await historyRows(project.id)).toBe(1);
    const window = await call(app, "GET", `/org/${slug}/projects/legacy/restore-window`, { cookie: owner.cookie });
    expect(window.body.earliest).toBe(row.history_since);
  });

  it("prunes records past the plan's window, and then the bytes of files only they held", async () => {
    const project = await createActiveProject(app, owner, slug, "Pruned");
    const { deps } = app.server;
    const ws = (method: string, route: string, body?: unknown) =>
      callWorkspace(app, project.id, method, route, {
        token: project.adminToken,
        ...(body === undefined ? {} : { body }),
      });
    expect((await ws("POST", "/collections", { slug: "c" })).status).toBe(201);
    expect((await ws("POST", "/items/c", { a: 1 })).status).toBe(201);
    const upload = await fetch(`${app.url}/w/${project.id}/api/files?name=old.txt`, {
      method: "POST",
      headers: { authorization: `Bearer ${project.adminToken}`, "content-type": "text/plain" },
      body: "old bytes",
    });
    const fileId = ((await upload.json()) as { file: { id: string } }).file.id;
    expect((await ws("DELETE", `/files/${fileId}`)).status).toBe(204);
    const bytes = fileKey(project.id, fileId);
    // Two days on, the bytes are old enough for the upload leftovers sweep; deleted, but the
    // history holds the file until it is pruned: the bytes stay.
    app.clock.advance(2 * DAY_MS);
    try {
      await sweepUploadLeftovers(deps, store());
      expect(await deps.storage.has(bytes)).toBe(true);
      expect(await historyRows(project.id)).toBeGreaterThan(0);
      // Past the free plan's one-day window, the records go, and with them the file's last claim.
      await maintainHistory(deps, store());
      expect(await historyRows(project.id)).toBe(0);
      await sweepUploadLeftovers(deps, store());
      expect(await deps.storage.has(bytes)).toBe(false);
    } finally {
      app.clock.advance(-2 * DAY_MS);
    }
    expect(dialect === "sqlite" || dialect === "postgres").toBe(true);
  });
});
