import { PassThrough } from "node:stream";
import { NotFoundError } from "../../errors.ts";
import type { BlobStore } from "../../storage/blob-store.ts";
import { exportKey } from "../../storage/keys.ts";
import { recordAudit } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { workspaceSchema } from "../projects/workspace-db.ts";
import type { WorkspacePool } from "../workspace/pool.ts";
import { dumpName, dumpTakenAt, isExpired } from "./dump-files.ts";
import { type DumpSink, dumpWorkspace } from "./sql-dump.ts";

interface ExportedProject {
  id: string;
  slug: string;
  status: string;
}

/**
 * Dumps every live project of the org to a file of its own in the blob store, one workspace at a
 * time, each stored whole before the answer names it. A project with no workspace yet
 * (provisioning, or failed) gets a dump that creates nothing. Should one fail, the dumps already
 * written go too: nothing is named that is not whole.
 */
export async function exportOrg({ ctx, workspaces }: { ctx: OrgCtx; workspaces: WorkspacePool }) {
  authorize(ctx, "org:export");
  const { deps } = ctx;
  const projects: ExportedProject[] = await deps.db
    .selectFrom("projects")
    .select(["id", "slug", "status"])
    .where("org_id", "=", ctx.org.id)
    .where("deleted_at", "is", null)
    .orderBy("created_at")
    .orderBy("id")
    .execute();
  const exportedAt = deps.clock.now();
  const entries: { slug: string; filename: string }[] = [];
  try {
    for (const project of projects) {
      const filename = dumpName(project.slug, exportedAt);
      await storeDump(deps.storage, exportKey(ctx.org.id, filename), async (sink) => {
        await sink.write(dumpHeader(project, exportedAt));
        const dumped = await workspaces.use(project.id, async (db) => {
          await dumpWorkspace(sink, { db, dialect: deps.dialect, schema: workspaceSchema(project.id) });
          return true;
        });
        if (!dumped) await dumpWorkspace(sink, null);
      });
      entries.push({ slug: project.slug, filename });
    }
    await inOrgTransaction(ctx, (trx) =>
      recordAudit(trx, ctx, {
        orgId: ctx.org.id,
        action: "org.exported",
        target: { type: "org", id: ctx.org.id },
        data: { projects: entries.map((entry) => entry.slug), filenames: entries.map((entry) => entry.filename) },
      }),
    );
  } catch (error) {
    await deps.storage.delete(entries.map((entry) => exportKey(ctx.org.id, entry.filename))).catch(() => {});
    throw error;
  }
  return { projects: entries, exportedAt: exportedAt.toISOString() };
}

function dumpHeader(project: ExportedProject, at: Date): string {
  return [
    `-- Plinth export of project ${project.slug} (${project.id}, ${project.status}), taken ${at.toISOString()}.`,
    "-- Plain SQL: load it with sqlite3 into an empty database, or with psql into an empty schema.",
    "",
  ].join("\n");
}

/**
 * Streams what `write` writes into the store under `key`: whole once stored, nothing if `write`
 * fails (a crash midway leaves an upload the daily job removes). `write` waits while the store
 * is behind, so a dump is never held in memory.
 */
async function storeDump(store: BlobStore, key: string, write: (sink: DumpSink) => Promise<void>): Promise<void> {
  const stream = new PassThrough();
  const stored = store.put(key, stream);
  // Should the store fail first, `write` stops at its next chunk.
  let failed: unknown;
  stored.catch((error: unknown) => {
    failed = error;
    stream.destroy();
  });
  const sink: DumpSink = {
    write: async (text) => {
      if (failed) throw failed;
      if (!stream.write(text, "utf8")) {
        await new Promise<void>((resolve) => {
          const go = () => {
            stream.off("close", go);
            stream.off("drain", go);
            resolve();
          };
          stream.on("drain", go);
          stream.on("close", go);
        });
      }
      if (failed) throw failed;
    },
  };
  try {
    await write(sink);
    stream.end();
  } catch (error) {
    stream.destroy(error as Error);
    await stored.catch(() => {});
    throw error;
  }
  await stored;
}

/**
 * One of the org's dumps, streamed from the store. A name that is not a dump's (a path, `..`), another
 * org's dump, and one past EXPORT_RETENTION_DAYS are not found, as is one never written.
 */
export async function openExport({ ctx, filename }: { ctx: OrgCtx; filename: string }) {
  authorize(ctx, "org:export");
  const takenAt = dumpTakenAt(filename);
  if (!takenAt || isExpired(ctx.deps, takenAt)) throw exportNotFound();
  const stored = await ctx.deps.storage.get(exportKey(ctx.org.id, filename));
  if (!stored) throw exportNotFound();
  return { content: stored.body as ReadableStream, filename, size: stored.size };
}

function exportNotFound(): NotFoundError {
  return new NotFoundError("export not found");
}
