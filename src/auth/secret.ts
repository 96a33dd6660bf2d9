import { randomBytes } from "node:crypto";
import { linkSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { makeDirectory } from "../lib/dirs.ts";

/** better-auth's own floor for a secret's length (AUTH_SECRET is held to it too). */
const MIN_SECRET_LENGTH = 32;

/**
 * The configured AUTH_SECRET, or one generated on first start and kept in DATA_DIR so sessions
 * survive restarts. The file appears whole or not at all (written aside, then linked into place,
 * which fails if it exists), so processes racing to create it all read the one that won; a file
 * too short to be a secret stops the process instead of signing sessions with it.
 */
export function resolveAuthSecret(configured: string | undefined, dataDir: string): string {
  if (configured) return configured;
  const file = path.join(dataDir, "auth-secret");
  makeDirectory(dataDir);
  const draft = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
  try {
    writeFileSync(draft, randomBytes(32).toString("hex"), { flag: "wx", mode: 0o600 });
    linkSync(draft, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    rmSync(draft, { force: true });
  }
  const secret = readFileSync(file, "utf8").trim();
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new Error(
      `${file} holds no usable secret (fewer than ${MIN_SECRET_LENGTH} characters): delete it to have one generated, or set AUTH_SECRET`,
    );
  }
  return secret;
}
