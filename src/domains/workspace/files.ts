import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import Busboy from "busboy";
import { DAY_MS } from "../../clock.ts";
import type { Deps } from "../../deps.ts";
import {
  AppError,
  BadRequestError,
  errorMessage,
  NotFoundError,
  PayloadTooLargeError,
  ValidationError,
} from "../../errors.ts";
import type { JobHandlers } from "../../jobs/handlers.ts";
import type { RecurringJob } from "../../jobs/schedule.ts";
import { newId } from "../../lib/ids.ts";
import { baseName, fileKey, filesPrefix } from "../../storage/keys.ts";
import { hasControlCharacter } from "../fields.ts";
import { recordUploadedBytes } from "../usage/meter.ts";
import { assertR2Room, forgetOrgUsage } from "../usage/quotas.ts";
import { requireMember, type WorkspaceCtx } from "./access.ts";
import type { WorkspaceStore } from "./store.ts";
import { insertWithEvent, writeWithEvent } from "./writes.ts";

interface FileRow {
  id: string;
  name: string;
  content_type: string;
  size: number;
  created_at: string;
}

function toFile(row: FileRow) {
  return {
    id: row.id,
    name: row.name,
    contentType: row.content_type,
    size: Number(row.size),
    createdAt: row.created_at,
  };
}

class FileTooLargeError extends PayloadTooLargeError {
  constructor(limit: number) {
    super(`file exceeds ${limit} bytes (MAX_FILE_BYTES)`);
  }
}

/** Passes `source`'s bytes through, and fails once more than `limit` have gone by. */
async function* byteLimit(source: AsyncIterable<Buffer>, limit: number, counted: { bytes: number }) {
  for await (const chunk of source) {
    counted.bytes += chunk.length;
    if (counted.bytes > limit) throw new FileTooLargeError(limit);
    yield chunk;
  }
}

export interface Upload {
  /** The request body as a Node stream. */
  body: Readable;
  contentType: string | undefined;
  /** `?name=` for a raw upload. */
  name: string | undefined;
  /** The body's Content-Length, when the client sent one (a multipart body's is a little more than the file). */
  length?: number | undefined;
}

/** Streams one upload to `store`; multipart (field `file`) or a raw body named by `?name=`. */
async function receive(ctx: WorkspaceCtx, upload: Upload, store: (bytes: AsyncIterable<Buffer>) => Promise<unknown>) {
  const limit = ctx.deps.config.maxFileBytes;
  const counted = { bytes: 0 };
  if (upload.contentType?.toLowerCase().startsWith("multipart/form-data")) {
    let busboy: Busboy.Busboy;
    try {
      busboy = Busboy({
        headers: { "content-type": upload.contentType },
        limits: { files: 1, fileSize: limit + 1 },
        // Browsers and curl send a file name as raw UTF-8 (busboy would read it as Latin-1).
        defParamCharset: "utf8",
      });
    } catch (error) {
      // A multipart type without a boundary, for one: busboy refuses it before reading a byte.
      throw new BadRequestError(`malformed multipart body: ${errorMessage(error)}`);
    }
    const received = new Promise<{ name: string; contentType: string }>((resolve, reject) => {
      let found = false;
      busboy.on("file", (field, stream, info) => {
        if (field !== "file" || found) {
          stream.resume();
          return;
        }
        found = true;
        const name = info.filename || "upload";
        // The same rules as a raw upload's ?name= (which the router checks): no NUL or other
        // control character, 255 at most.
        if (name.includes("\u0000") || hasControlCharacter(name) || name.length > 255) {
          stream.resume();
          reject(
            new ValidationError([
              { path: "file", message: "a file name has 1 to 255 characters and no NUL or other control character" },
            ]),
          );
          return;
        }
        store(byteLimit(stream, limit, counted)).then(
          () => resolve({ name, contentType: info.mimeType || "application/octet-stream" }),
          reject,
        );
      });
      busboy.on("error", (error) => reject(new BadRequestError(`malformed multipart body: ${errorMessage(error)}`)));
      busboy.on("close", () => {
        if (!found)
          reject(new ValidationError([{ path: "file", message: "a multipart field named 'file' is required" }]));
      });
    });
    // A body that stops short (the client went away) fails the upload instead of leaving it waiting.
    const fed = pipeline(upload.body, busboy);
    const meta = await Promise.all([received, fed]).then(([found]) => found, asCutOff(upload));
    return { ...meta, size: counted.bytes };
  }
  if (!upload.name) {
    throw new ValidationError([{ path: "name", message: "a raw upload needs ?name=<file name>" }]);
  }
  await store(byteLimit(upload.body, limit, counted)).catch(asCutOff(upload));
  return { name: upload.name, contentType: upload.contentType || "application/octet-stream", size: counted.bytes };
}

/**
 * An upload whose body ended before it was whole (the client closed the connection) is the
 * client's doing, a 400 nobody will read, not a server error; any other failure stays as it is.
 */
function asCutOff(upload: Upload) {
  return (error: unknown): never => {
    if (error instanceof AppError) throw error;
    if (upload.body.readableAborted) {
      throw new BadRequestError("the upload ended before its body was complete");
    }
    throw error;
  };
}

/**
 * Streams the upload into the blob store (a whole object once it is there for good), and only
 * then commits its row and `files:uploaded` event: a file that is listed and announced has its
 * content, whenever the process stops. A stop between the two leaves an object without a row,
 * which nothing lists or serves, and the leftovers sweep removes.
 */
export async function uploadFile({ ctx, upload }: { ctx: WorkspaceCtx; upload: Upload }) {
  requireMember(ctx, true);
  const { storage } = ctx.deps;
  const id = newId("fil");
  const key = fileKey(ctx.project.id, id);
  // The org's r2 allowance (DESIGN §8), before a byte is kept: by the declared length, and
  // again by the bytes received (a body sent without one).
  await assertR2Room(ctx.deps, ctx.project.org_id, upload.length ?? 0);
  const meta = await receive(ctx, upload, (bytes) => storage.put(key, bytes));
  try {
    if (upload.length === undefined) await assertR2Room(ctx.deps, ctx.project.org_id, meta.size);
    const row: FileRow = {
      id,
      name: meta.name,
      content_type: meta.contentType,
      size: meta.size,
      created_at: ctx.deps.clock.now().toISOString(),
    };
    const view = toFile(row);
    const file = await insertWithEvent(ctx, "files", row, {
      result: view,
      event: { channel: "files", event: "uploaded", data: view },
    });
    await recordUploadedBytes(ctx.deps, ctx.project.id, meta.size);
    forgetOrgUsage(ctx.project.org_id);
    ctx.runtime.meter.filesChangedIn(ctx.project.id);
    return { file };
  } catch (error) {
    await storage.delete([key]).catch(() => {});
    throw error;
  }
}

export async function listFiles({
  ctx,
  query: page = {},
}: {
  ctx: WorkspaceCtx;
  query?: { limit?: number | undefined; offset?: number | undefined };
}) {
  requireMember(ctx, false);
  const rows = (await ctx.db
    .selectFrom("files")
    .selectAll()
    .orderBy("created_at")
    .orderBy("id")
    .limit(page.limit ?? 50)
    .offset(page.offset ?? 0)
    .execute()) as FileRow[];
  return { files: rows.map(toFile) };
}

async function findFile(db: WorkspaceCtx["db"], id: string): Promise<FileRow> {
  const row = (await db.selectFrom("files").selectAll().where("id", "=", id).executeTakeFirst()) as FileRow | undefined;
  if (!row) throw new NotFoundError("file not found");
  return row;
}

/** The file's bytes, streamed, with what a download says about them. */
export async function downloadFile({
  ctx,
  id,
}: {
  ctx: WorkspaceCtx;
  id: string;
}): Promise<{ content: ReadableStream; name: string; contentType: string; size: number }> {
  requireMember(ctx, false);
  const row = await findFile(ctx.db, id);
  const stored = await ctx.deps.storage.get(fileKey(ctx.project.id, row.id));
  if (!stored) throw new NotFoundError("file content missing");
  return { content: stored.body, name: row.name, contentType: row.content_type, size: stored.size };
}

export async function deleteFile({ ctx, id }: { ctx: WorkspaceCtx; id: string }): Promise<void> {
  requireMember(ctx, true);
  await writeWithEvent(ctx, async (trx) => {
    // The row as this delete removed it: of two deletes at once, only one finds it.
    const removed = (await trx.deleteFrom("files").where("id", "=", id).returningAll().executeTakeFirst()) as
      | FileRow
      | undefined;
    if (!removed) throw new NotFoundError("file not found");
    return { result: undefined, event: { channel: "files", event: "deleted", data: toFile(removed) } };
  });
  ctx.runtime.meter.filesChangedIn(ctx.project.id);
  // The bytes stay: a restore to an instant before this delete brings the file back. The daily
  // sweep removes them once the history no longer holds the file (sweepUploadLeftovers).
}

/** Upload leftovers older than this go; no upload takes a day, so none in progress is touched. */
const LEFTOVER_AGE_MS = DAY_MS;

/**
 * Removes what the workspaces' files no longer need: uploads a crash cut short, objects whose row
 * never committed (see `uploadFile`), and the bytes of deleted files once the history no longer
 * holds them (past the restore window). Only objects written more than a day ago.
 */
export async function sweepUploadLeftovers(deps: Deps, store: WorkspaceStore): Promise<void> {
  const projects = await deps.db
    .selectFrom("projects")
    .select("id")
    .where("status", "in", ["active", "paused"])
    .execute();
  // Branches' workspaces too: each has files of its own.
  const branches = await deps.db
    .selectFrom("branches")
    .innerJoin("projects", "projects.id", "branches.project_id")
    .select("branches.id")
    .where("branches.status", "=", "active")
    .where("projects.deleted_at", "is", null)
    .execute();
  const cutoff = deps.clock.now().getTime() - LEFTOVER_AGE_MS;
  for (const { id: projectId } of [...projects, ...branches]) {
    try {
      await removeLeftovers(deps, store, projectId, cutoff);
    } catch (error) {
      deps.log.error({ err: error, projectId }, "sweeping a workspace's upload leftovers failed");
    }
  }
}

async function removeLeftovers(deps: Deps, store: WorkspaceStore, projectId: string, cutoff: number) {
  const prefix = filesPrefix(projectId);
  await deps.storage.removeIncomplete(prefix, new Date(cutoff));
  const old: string[] = [];
  for await (const object of deps.storage.list(prefix)) {
    if (object.modifiedAt.getTime() < cutoff) old.push(baseName(object.key));
  }
  // Only a workspace with old files stored is opened (and takes a place in the pool).
  if (old.length === 0) return;
  const listed = await store.neededFiles(projectId, old);
  if (!listed) return;
  const kept = new Set(listed);
  await deps.storage.delete(old.filter((id) => !kept.has(id)).map((id) => fileKey(projectId, id)));
}

export function fileJobs(deps: Deps, store: WorkspaceStore): JobHandlers {
  return { "workspace.upload_leftovers": { handle: () => sweepUploadLeftovers(deps, store) } };
}

export const fileSchedule: RecurringJob[] = [
  { name: "workspace.upload_leftovers", everyMs: DAY_MS, kind: "workspace.upload_leftovers" },
];
