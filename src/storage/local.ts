import { createReadStream, createWriteStream } from "node:fs";
import { link, mkdir, open, readdir, rename, rm, rmdir, stat, utimes } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { makeDirectory } from "../lib/dirs.ts";
import { randomHex } from "../lib/tokens.ts";
import { assertKey, type BlobBody, type BlobStore, chunksOf, type StoredObject } from "./blob-store.ts";

/** An upload in progress: `<key>.<random>.part`, renamed to `<key>` once whole. */
const PART = /\.[0-9a-f]{12}\.part$/;

/**
 * The blob store in a directory (under DATA_DIR, the embedded default): a key is a path. A put
 * writes a `.part` file, syncs it and renames it into place; a copy is a hard link (the bytes
 * are never changed in place, so sharing them is safe), a plain copy across file systems.
 */
export class LocalBlobStore implements BlobStore {
  readonly kind = "local";

  constructor(private readonly root: string) {}

  async prepare(): Promise<void> {
    makeDirectory(this.root);
    await adoptEarlierLayout(this.root);
  }

  async check(): Promise<void> {
    if (!(await stat(this.root)).isDirectory()) throw new Error(`${this.root} is not a directory`);
  }

  private pathOf(key: string): string {
    assertKey(key);
    return path.join(this.root, ...key.split("/"));
  }

  private dirOf(prefix: string): string {
    assertKey(prefix, { prefix: true });
    return path.join(this.root, ...prefix.slice(0, -1).split("/"));
  }

  async put(key: string, body: BlobBody): Promise<{ size: number }> {
    const file = this.pathOf(key);
    const dir = path.dirname(file);
    await mkdir(dir, { recursive: true });
    const partial = `${file}.${randomHex(6)}.part`;
    let size = 0;
    try {
      await pipeline(
        chunksOf(body),
        async function* (source: AsyncIterable<Uint8Array>) {
          for await (const chunk of source) {
            size += chunk.length;
            yield chunk;
          }
        },
        createWriteStream(partial),
      );
      await syncPath(partial);
      await rename(partial, file);
      await syncPath(dir);
      return { size };
    } catch (error) {
      await rm(partial, { force: true });
      throw error;
    }
  }

  async get(key: string): Promise<{ body: ReadableStream<Uint8Array>; size: number } | null> {
    // Opened first: a delete meanwhile unlinks the name, and the download still completes.
    const handle = await open(this.pathOf(key), "r").catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT" || error.code === "EISDIR") return null;
      throw error;
    });
    if (!handle) return null;
    const info = await handle.stat();
    if (!info.isFile()) {
      await handle.close();
      return null;
    }
    return { body: Readable.toWeb(handle.createReadStream()) as ReadableStream<Uint8Array>, size: info.size };
  }

  async has(key: string): Promise<boolean> {
    const info = await stat(this.pathOf(key)).catch(() => undefined);
    return info?.isFile() ?? false;
  }

  async copy(from: string, to: string): Promise<boolean> {
    const source = this.pathOf(from);
    const target = this.pathOf(to);
    if (!(await this.has(from))) return false;
    await mkdir(path.dirname(target), { recursive: true });
    await rm(target, { force: true });
    try {
      await link(source, target);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
      // Another file system (or one without links): the bytes themselves, put in place whole.
      await this.put(to, createReadStream(source));
    }
    // A link shares its inode's time, the original's: made new, as an S3 copy is, so that the
    // leftovers sweep (which spares what is less than a day old) leaves it to its new owner.
    const now = new Date();
    await utimes(target, now, now);
    return true;
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) await rm(this.pathOf(key), { force: true });
  }

  async deletePrefix(prefix: string): Promise<void> {
    await rm(this.dirOf(prefix), { recursive: true, force: true });
  }

  async *list(prefix: string): AsyncIterable<StoredObject> {
    for await (const entry of walk(this.dirOf(prefix), prefix)) {
      if (!PART.test(entry.key)) yield entry;
    }
  }

  async removeIncomplete(prefix: string, before: Date): Promise<void> {
    for await (const entry of walk(this.dirOf(prefix), prefix)) {
      if (PART.test(entry.key) && entry.modifiedAt < before) await rm(this.pathOf(entry.key), { force: true });
    }
  }
}

/** The files under `dir` (whose key prefix is `prefix`), depth first; nothing when there is no `dir`. */
async function* walk(dir: string, prefix: string): AsyncIterable<StoredObject> {
  const entries = await readdir(dir, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT" || error.code === "ENOTDIR") return [];
    throw error;
  });
  for (const entry of entries) {
    const key = `${prefix}${entry.name}`;
    if (entry.isDirectory()) {
      yield* walk(path.join(dir, entry.name), `${key}/`);
      continue;
    }
    const info = await stat(path.join(dir, entry.name)).catch(() => undefined);
    if (!info?.isFile()) continue;
    yield {
      key,
      size: info.size,
      modifiedAt: info.mtime,
      ...(info.nlink > 1 ? { sharedAs: `${info.dev}:${info.ino}` } : {}),
    };
  }
}

/** Makes a file's bytes, or a directory's entries, durable. */
async function syncPath(target: string): Promise<void> {
  const handle = await open(target, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Moves what releases before the blob store kept under DATA_DIR into the store's keys:
 * `files/<workspace>/<file>` to `projects/<workspace>/files/<file>`, and a backup's
 * `backups/<project>/<backup>.files/<file>` to `projects/<project>/backups/<backup>/<file>`. Each
 * is one rename of a directory, and a directory already moved is left alone, so it is safe to
 * run at every start, and by two processes at once.
 */
async function adoptEarlierLayout(root: string): Promise<void> {
  const move = async (from: string, to: string) => {
    await mkdir(path.dirname(to), { recursive: true });
    await rename(from, to).catch((error: NodeJS.ErrnoException) => {
      // Moved by another process meanwhile, or already there: what is there stays.
      if (!["ENOENT", "EEXIST", "ENOTEMPTY"].includes(error.code ?? "")) throw error;
    });
  };
  const subdirectories = async (dir: string) =>
    (await readdir(dir, { withFileTypes: true }).catch(() => [])).filter((entry) => entry.isDirectory());
  const files = path.join(root, "files");
  for (const workspace of await subdirectories(files)) {
    await move(path.join(files, workspace.name), path.join(root, "projects", workspace.name, "files"));
  }
  // Only once empty: a workspace whose move found its place taken keeps its bytes where they are.
  await rmdir(files).catch(() => {});
  const backups = path.join(root, "backups");
  for (const project of await subdirectories(backups)) {
    for (const held of await subdirectories(path.join(backups, project.name))) {
      if (!held.name.endsWith(".files")) continue;
      const backupId = held.name.slice(0, -".files".length);
      await move(
        path.join(backups, project.name, held.name),
        path.join(root, "projects", project.name, "backups", backupId),
      );
    }
  }
}
