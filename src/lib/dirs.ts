import { mkdirSync, statSync } from "node:fs";
import path from "node:path";

/**
 * `mkdir -p`, one level at a time. Node's own `mkdirSync(dir, { recursive: true })` never returns
 * for a path under a pseudo file system that refuses new entries with ENOENT (`/proc/x`, say): a
 * DATA_DIR there would hang the start instead of stopping it with a message.
 */
export function makeDirectory(dir: string): void {
  if (tryMkdir(dir) !== "ENOENT") return;
  const parent = path.dirname(dir);
  if (parent === dir) throw noSuchDirectory(dir);
  makeDirectory(parent);
  // The parent is there now: ENOENT again means this file system takes no new entry here.
  if (tryMkdir(dir) === "ENOENT") throw noSuchDirectory(dir);
}

/** Makes `dir`: "made" (or there already, by another process too), or "ENOENT"; any other failure throws. */
function tryMkdir(dir: string): "made" | "ENOENT" {
  try {
    mkdirSync(dir);
    return "made";
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EEXIST" && statSync(dir).isDirectory()) return "made";
    if (code === "ENOENT") return "ENOENT";
    throw error;
  }
}

function noSuchDirectory(dir: string): Error {
  return Object.assign(new Error(`ENOENT: cannot create directory '${dir}'`), { code: "ENOENT" });
}
