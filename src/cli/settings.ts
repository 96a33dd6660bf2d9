import { chmod, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import { UsageError } from "./errors.ts";

/** What `plinth login` keeps: where Plinth is, the API key, and the org commands act on. */
export interface SavedSettings {
  url?: string;
  apiKey?: string;
  org?: string;
}

/** `${XDG_CONFIG_HOME:-~/.config}/plinth/config.json`. */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || path.join(homedir(), ".config");
  return path.join(base, "plinth", "config.json");
}

export async function readSettings(file = configPath()): Promise<SavedSettings> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as SavedSettings;
    return typeof parsed === "object" && parsed !== null ? parsed : {};
  } catch {
    throw new UsageError(`${file} is not JSON: fix it, or run plinth logout and log in again`);
  }
}

/** Writes the settings readable by their owner only (0600, in a 0700 directory): they hold an API key. */
export async function writeSettings(settings: SavedSettings, file = configPath()): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(file, `${JSON.stringify(settings, null, 2)}\n`, { mode: 0o600 });
  // `mode` applies only to a file it creates: one written before keeps its own.
  await chmod(file, 0o600);
}

export async function removeSettings(file = configPath()): Promise<boolean> {
  try {
    await rm(file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw error;
  }
}
