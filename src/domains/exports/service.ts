import { type FileHandle, open, rename, rm } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { NotFoundError } from "../../errors.ts";
import { makeDirectory } from "../../lib/dirs.ts";
import { recordAudit } from "../audit/service.ts";
import type { OrgCtx } from "../context.ts";
import { authorize, inOrgTransaction } from "../orgs/access.ts";
import { workspaceSchema } from "../projects/workspace-db.ts";
import type { WorkspacePool } from "../workspace/pool.ts";
import { dumpName, dumpTakenAt, isExpired, orgExportsDir } from "./dump-files.ts";
import { type DumpSink, dumpWorkspace } from "./sql-dump.ts";

interface ExportedProject {
  id: string;
  slug: string;
  status: string;
}

/**
 * Dumps every live project of the org to a file of its own, one workspace at a time, each
 * written and synced to disk before the answer names it. A project with no workspace yet
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
  const dir = orgExportsDir(deps, ctx.org.id);
  makeDirectory(dir);
  const entries: { slug: string; filename: string }[] = [];
  try {
    for (const project of projects) {
      const filename = dumpName(project.slug, exportedAt);
      await writeDumpFile(path.join(dir, filename), async (sink) => {
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
    await Promise.all(entries.map((entry) => rm(path.join(dir, entry.filename), { force: true })));
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
 * Writes a dump to `<file>.part`, syncs it and only then gives it its name, so a dump under its
 * name is always whole; a failed one leaves nothing (a crash, a `.part` the daily job removes).
 */
async function writeDumpFile(file: string, write: (sink: DumpSink) => Promise<void>): Promise<void> {
  const partial = `${file}.part`;
  const handle = await open(partial, "wx");
  try {
    await write({ write: (text) => writeAll(handle, Buffer.from(text, "utf8")) });
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(partial, { force: true });
    throw error;
  }
  await handle.close();
  await rename(partial, file);
}

async function writeAll(handle: FileHandle, bytes: Buffer): Promise<void> {
  for (let offset = 0; offset < bytes.length; ) {
    offset += (await handle.write(bytes, offset, bytes.length - offset)).bytesWritten;
  }
}

/**
 * One of the org's dumps, streamed from disk. A name that is not a dump's (a path, `..`), another
 * org's dump, and one past EXPORT_RETENTION_DAYS are not found, as is one never written.
 */
export async function openExport({ ctx, filename }: { ctx: OrgCtx; filename: string }) {
  authorize(ctx, "org:export");
  const takenAt = dumpTakenAt(filename);
  if (!takenAt || isExpired(ctx.deps, takenAt)) throw exportNotFound();
  // Held open from here: the daily removal may unlink the file, and the download still completes.
  const handle = await open(path.join(orgExportsDir(ctx.deps, ctx.org.id), filename), "r").catch(
    (error: NodeJS.ErrnoException) => {
      throw error.code === "ENOENT" ? exportNotFound() : error;
    },
  );
  const info = await handle.stat();
  if (!info.isFile()) {
    await handle.close();
    throw exportNotFound();
  }
  return {
    content: Readable.toWeb(handle.createReadStream()) as ReadableStream,
    filename,
    size: info.size,
  };
}

function exportNotFound(): NotFoundError {
  return new NotFoundError("export not found");
}
