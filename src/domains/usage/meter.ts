import { stat } from "node:fs/promises";
import { sql } from "kysely";
import type { Deps } from "../../deps.ts";
import { isIdOf } from "../../lib/ids.ts";
import { filesPrefix } from "../../storage/keys.ts";
import { workspaceFile, workspaceSchema } from "../projects/workspace-db.ts";
import { forgetOrgUsage } from "./quotas.ts";

/** How often counted requests are written (DESIGN §10: at least every 10 s). */
const FLUSH_MS = 5_000;
/** How long after an upload or delete its project's r2 is measured (a burst is measured once). */
const FILES_SETTLE_MS = 2_000;

/** The UTC day of an instant, `YYYY-MM-DD`. */
export function dayOf(at: Date): string {
  return at.toISOString().slice(0, 10);
}

interface Counted {
  date: string;
  projectId: string;
  orgId: string;
  requests: number;
}

/**
 * Workspace API requests per project and day, counted in memory (a request pays a map update)
 * and added to `usage_daily` every FLUSH_MS and at shutdown, one statement per project and day.
 * Counts a failed write could not add are kept for the next one: none is lost while the process
 * lives. Also measures a project's r2 soon after its files (or a branch's) change.
 */
export class UsageMeter {
  private counts = new Map<string, Counted>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> | undefined;
  private readonly filesChanged = new Map<string, NodeJS.Timeout>();

  constructor(private readonly deps: Deps) {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  /** One workspace API request for the project. */
  count(projectId: string, orgId: string): void {
    const date = dayOf(this.deps.clock.now());
    const key = `${date}|${projectId}`;
    const counted = this.counts.get(key);
    if (counted) counted.requests++;
    else this.counts.set(key, { date, projectId, orgId, requests: 1 });
  }

  /** A workspace's files changed (an upload, a delete): its project's r2 is measured again shortly. */
  filesChangedIn(workspaceId: string): void {
    if (this.filesChanged.has(workspaceId)) return;
    const timer = setTimeout(() => {
      this.filesChanged.delete(workspaceId);
      void measureProject(this.deps, workspaceId).catch((error: unknown) =>
        this.deps.log.warn({ err: error, workspaceId }, "measuring a project's usage failed"),
      );
    }, FILES_SETTLE_MS);
    timer.unref();
    this.filesChanged.set(workspaceId, timer);
  }

  /** Adds what was counted to `usage_daily`; resolves once written (or kept for the next try). */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => (this.counts.size > 0 ? this.flush() : undefined));
    if (this.counts.size === 0) return Promise.resolve();
    this.flushing = this.write().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async write(): Promise<void> {
    const batch = [...this.counts.values()];
    this.counts = new Map();
    const { db, log } = this.deps;
    const slugs = new Map(
      (
        await db
          .selectFrom("projects")
          .select(["id", "slug"])
          .where("id", "in", [...new Set(batch.map((row) => row.projectId))])
          .execute()
          .catch(() => [])
      ).map((row) => [row.id, row.slug]),
    );
    for (const row of batch) {
      try {
        await db
          .insertInto("usage_daily")
          .values({
            date: row.date,
            project_id: row.projectId,
            org_id: row.orgId,
            project_slug: slugs.get(row.projectId) ?? row.projectId,
            requests: row.requests,
            d1: 0,
            r2: 0,
            measured_at: null,
          })
          .onConflict((oc) =>
            oc.columns(["date", "project_id"]).doUpdateSet({
              requests: sql`usage_daily.requests + excluded.requests`,
            }),
          )
          .execute();
      } catch (error) {
        // Kept for the next flush: counted requests are not lost to a passing failure.
        const key = `${row.date}|${row.projectId}`;
        const later = this.counts.get(key);
        if (later) later.requests += row.requests;
        else this.counts.set(key, row);
        log.warn({ err: error, projectId: row.projectId }, "writing usage failed; kept for the next flush");
      }
    }
  }

  /** Stops the timers and writes what was counted (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    for (const timer of this.filesChanged.values()) clearTimeout(timer);
    this.filesChanged.clear();
    await this.flush();
  }
}

/**
 * Bytes of a workspace's stored files. An object sharing its bytes with others (a hard link in a
 * local store: a branch's copy of its project's files) counts once over one `seen`.
 */
async function storedBytes(deps: Deps, workspaceId: string, seen: Set<string>): Promise<number> {
  let bytes = 0;
  for await (const object of deps.storage.list(filesPrefix(workspaceId))) {
    if (object.sharedAs !== undefined) {
      if (seen.has(object.sharedAs)) continue;
      seen.add(object.sharedAs);
    }
    bytes += object.size;
  }
  return bytes;
}

/** The d1 (database bytes) and r2 (stored file bytes) of the workspaces `workspaceIds` together, now. */
export async function measureBytes(deps: Deps, workspaceIds: readonly string[]): Promise<{ d1: number; r2: number }> {
  let d1 = 0;
  if (deps.dialect === "sqlite") {
    for (const id of workspaceIds) {
      const file = workspaceFile(deps, id);
      for (const suffix of ["", "-wal"]) d1 += (await stat(`${file}${suffix}`).catch(() => undefined))?.size ?? 0;
    }
  } else {
    const schemas = workspaceIds.map((id) => workspaceSchema(id));
    const { rows } = await sql<{ bytes: string | number | null }>`
      select coalesce(sum(pg_total_relation_size(c.oid)), 0) as bytes from pg_class c
      where c.relnamespace in (select to_regnamespace(s) from unnest(${schemas}::text[]) as s)
        and c.relkind = 'r'`.execute(deps.db);
    d1 = Number(rows[0]?.bytes ?? 0);
  }
  const seen = new Set<string>();
  let r2 = 0;
  for (const id of workspaceIds) r2 += await storedBytes(deps, id, seen);
  return { d1, r2 };
}

/** The project whose usage a workspace's bytes count toward: itself, or a branch's project (DESIGN §9). */
function meteredProjectOf(deps: Deps, workspaceId: string) {
  if (isIdOf("brn", workspaceId)) {
    return deps.db
      .selectFrom("branches")
      .innerJoin("projects", "projects.id", "branches.project_id")
      .select(["projects.id", "projects.org_id", "projects.slug"])
      .where("branches.id", "=", workspaceId)
      .executeTakeFirst();
  }
  return deps.db
    .selectFrom("projects")
    .select(["id", "org_id", "slug"])
    .where("id", "=", workspaceId)
    .executeTakeFirst();
}

/**
 * Measures a project's workspace with its branches' (each a workspace of its own, whose data the
 * project's usage and quotas must count) and records it as the project's d1 and r2 of the day.
 * `workspaceId` may be a branch's: its project is measured.
 */
export async function measureProject(deps: Deps, workspaceId: string): Promise<void> {
  const project = await meteredProjectOf(deps, workspaceId);
  if (!project) return;
  const branches = await deps.db.selectFrom("branches").select("id").where("project_id", "=", project.id).execute();
  const { d1, r2 } = await measureBytes(deps, [project.id, ...branches.map((branch) => branch.id)]);
  const now = deps.clock.now();
  await deps.db
    .insertInto("usage_daily")
    .values({
      date: dayOf(now),
      project_id: project.id,
      org_id: project.org_id,
      project_slug: project.slug,
      requests: 0,
      d1,
      r2,
      measured_at: now.toISOString(),
    })
    .onConflict((oc) =>
      oc
        .columns(["date", "project_id"])
        .doUpdateSet({ d1, r2, measured_at: now.toISOString(), project_slug: project.slug }),
    )
    .execute();
  forgetOrgUsage(project.org_id);
}

const PAGE = 500;

/** The hourly `usage.measure` job: every active or paused project's d1 and r2, its branches' included. */
export async function measureUsage(deps: Deps): Promise<void> {
  let after = "";
  for (;;) {
    const projects = await deps.db
      .selectFrom("projects")
      .select("id")
      .where("status", "in", ["active", "paused"])
      .where("deleted_at", "is", null)
      .where("id", ">", after)
      .orderBy("id")
      .limit(PAGE)
      .execute();
    for (const { id } of projects) {
      await measureProject(deps, id).catch((error: unknown) =>
        deps.log.warn({ err: error, projectId: id }, "measuring a project's usage failed"),
      );
    }
    if (projects.length < PAGE) return;
    after = projects[projects.length - 1]?.id as string;
  }
}

/**
 * Adds an upload's bytes to the project's r2 of the day at once (a branch's to its project's), so
 * that the next upload's quota check counts them before the measurement that follows (which then
 * sets the exact figure).
 */
export async function recordUploadedBytes(deps: Deps, workspaceId: string, bytes: number): Promise<void> {
  const projectId = isIdOf("brn", workspaceId) ? (await meteredProjectOf(deps, workspaceId))?.id : workspaceId;
  if (projectId === undefined) return;
  const today = dayOf(deps.clock.now());
  const updated = await deps.db
    .updateTable("usage_daily")
    .set({ r2: sql`r2 + ${bytes}` })
    .where("date", "=", today)
    .where("project_id", "=", projectId)
    .where("measured_at", "is not", null)
    .executeTakeFirst();
  if (Number(updated.numUpdatedRows) === 0) await measureProject(deps, projectId);
}
