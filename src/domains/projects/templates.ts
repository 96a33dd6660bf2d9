import { type Kysely, sql } from "kysely";
import type { Dialect } from "../../db/database.ts";

/** One step of a template: what a workspace database gains at this version. */
interface TemplateVersion {
  version: string;
  // biome-ignore lint/suspicious/noExplicitAny: workspace schemas are the template's, not Plinth's
  migrate(db: Kysely<any>, dialect: Dialect): Promise<void>;
}

interface Template {
  name: string;
  description: string;
  /** Oldest first; a version is never edited once released, only followed by a new one. */
  versions: TemplateVersion[];
}

const timestampType = sql`text`;

/**
 * The built-in template: the workspace backend of DESIGN §7 (collections of items, users,
 * sessions, files, and the outbox of events their changes raise).
 */
const defaultTemplate: Template = {
  name: "default",
  description: "Collections of JSON items, workspace users, files and their event outbox",
  versions: [
    {
      version: "1.0.0",
      async migrate(db) {
        await db.schema
          .createTable("collections")
          .addColumn("slug", "text", (c) => c.primaryKey())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("created_at", timestampType, (c) => c.notNull())
          .execute();
        await db.schema
          .createTable("items")
          .addColumn("id", "text", (c) => c.primaryKey())
          .addColumn("collection", "text", (c) => c.notNull())
          .addColumn("data", "text", (c) => c.notNull())
          .addColumn("created_at", timestampType, (c) => c.notNull())
          .addColumn("updated_at", timestampType, (c) => c.notNull())
          .execute();
        await db.schema.createIndex("items_collection").on("items").columns(["collection", "created_at"]).execute();
        await db.schema
          .createTable("users")
          .addColumn("id", "text", (c) => c.primaryKey())
          .addColumn("email", "text", (c) => c.notNull())
          .addColumn("password_hash", "text", (c) => c.notNull())
          .addColumn("created_at", timestampType, (c) => c.notNull())
          .addColumn("updated_at", timestampType, (c) => c.notNull())
          .execute();
        await db.schema
          .createTable("user_sessions")
          .addColumn("token_hash", "text", (c) => c.primaryKey())
          .addColumn("user_id", "text", (c) => c.notNull())
          .addColumn("created_at", timestampType, (c) => c.notNull())
          .addColumn("expires_at", timestampType, (c) => c.notNull())
          .execute();
        await db.schema
          .createTable("files")
          .addColumn("id", "text", (c) => c.primaryKey())
          .addColumn("name", "text", (c) => c.notNull())
          .addColumn("content_type", "text", (c) => c.notNull())
          .addColumn("size", "integer", (c) => c.notNull())
          .addColumn("created_at", timestampType, (c) => c.notNull())
          .execute();
        await db.schema
          .createTable("events")
          .addColumn("id", "text", (c) => c.primaryKey())
          .addColumn("channel", "text", (c) => c.notNull())
          .addColumn("event", "text", (c) => c.notNull())
          .addColumn("data", "text", (c) => c.notNull())
          .addColumn("created_at", timestampType, (c) => c.notNull())
          .execute();
      },
    },
    {
      version: "1.1.0",
      // Sign-in looks users up by e-mail regardless of case; the unique index makes that
      // unambiguous. A workspace holding two addresses that differ only in case cannot take
      // it, and the upgrade fails (changing nothing) until they are merged.
      async migrate(db) {
        await sql`create unique index users_email_lower on users (lower(email))`.execute(db);
      },
    },
  ],
};

/** By name; a Map, so a name from a request (`constructor`, `__proto__`) finds nothing it should not. */
const TEMPLATES = new Map<string, Template>([[defaultTemplate.name, defaultTemplate]]);

export const DEFAULT_TEMPLATE = "default";

export function listTemplates() {
  return [...TEMPLATES.values()].map((template) => ({
    name: template.name,
    description: template.description,
    versions: template.versions.map((v) => v.version),
    latest: latestVersion(template.name) as string,
  }));
}

export function findTemplate(name: string): Template | undefined {
  return TEMPLATES.get(name);
}

export function latestVersion(name: string): string | null {
  return TEMPLATES.get(name)?.versions.at(-1)?.version ?? null;
}

/** `name` or `name@version` → the template and version it names, or null if there is none. */
export function resolveTemplateRef(ref: string): { name: string; version: string } | null {
  const [name = "", version, ...rest] = ref.split("@");
  const template = TEMPLATES.get(name);
  if (!template || rest.length > 0) return null;
  if (version === undefined) return { name, version: latestVersion(name) as string };
  return template.versions.some((v) => v.version === version) ? { name, version } : null;
}

/** The versions to apply to go from `from` (exclusive; null = empty database) to `to` (inclusive). */
export function versionsBetween(name: string, from: string | null, to: string): TemplateVersion[] {
  const versions = TEMPLATES.get(name)?.versions ?? [];
  const start = from === null ? 0 : versions.findIndex((v) => v.version === from) + 1;
  const end = versions.findIndex((v) => v.version === to);
  return end < start ? [] : versions.slice(start, end + 1);
}

export function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const diff = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (diff !== 0) return diff;
  }
  return 0;
}
