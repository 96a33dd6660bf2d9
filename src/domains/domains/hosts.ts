import { isIP } from "node:net";
import type { Deps } from "../../deps.ts";

/** How long a host's answer (a project, or none) is trusted before it is read again. */
const CACHE_MS = 5_000;
/** Hosts remembered at most; past it the oldest go (requests can name any host). */
const MAX_CACHED = 10_000;

const cache = new Map<string, { projectId: string | null; until: number }>();

/** Forgets what this process knows of `hostname` (deleted here: it stops serving at once). */
export function forgetHost(hostname: string): void {
  cache.delete(hostname);
}

/** The host a request names, lower-case and without its port; null when it has none. */
export function hostOf(header: string | undefined): string | null {
  if (!header) return null;
  const text = header.trim().toLowerCase();
  if (text.startsWith("[")) return null; // an IPv6 literal: never a custom domain
  return text.replace(/:\d+$/, "") || null;
}

/**
 * The project whose active custom domain `host` is, or null. Read from the database at most
 * every CACHE_MS per host (so a verified domain serves within seconds in every process, and a
 * deleted one stops), and never for this deployment's own host, IP addresses or `localhost`.
 */
export async function projectOfHost(deps: Deps, host: string, ownHost: string): Promise<string | null> {
  if (host === ownHost || host === "localhost" || isIP(host) !== 0 || !host.includes(".")) return null;
  const now = Date.now();
  const known = cache.get(host);
  if (known && known.until > now) return known.projectId;
  const row = await deps.db
    .selectFrom("domains")
    .innerJoin("projects", "projects.id", "domains.project_id")
    .select("domains.project_id")
    .where("domains.hostname", "=", host)
    .where("domains.status", "=", "active")
    .where("projects.deleted_at", "is", null)
    .executeTakeFirst();
  const projectId = row?.project_id ?? null;
  if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value as string);
  cache.set(host, { projectId, until: now + CACHE_MS });
  return projectId;
}

/**
 * Where requests to custom domains go: `/api/…` on an active domain's host is the project's
 * workspace API (`/w/{projectId}/api/…`). The router answers null at once, with nothing parsed
 * or awaited, for the requests most servers only ever see: to this deployment's own host, an IP
 * address or a bare name; else a promise of the rewritten URL, or of null.
 */
export function customDomainRouter(deps: Deps) {
  const ownHost = new URL(deps.config.publicUrl).hostname.toLowerCase();
  return (url: string, hostHeader: string | undefined): Promise<string | null> | null => {
    const host = hostOf(hostHeader);
    if (host === null || host === ownHost || host === "localhost" || isIP(host) !== 0 || !host.includes(".")) {
      return null;
    }
    return projectOfHost(deps, host, ownHost).then((projectId) => {
      if (projectId === null) return null;
      const rewritten = new URL(url);
      if (rewritten.pathname !== "/api" && !rewritten.pathname.startsWith("/api/")) return null;
      rewritten.pathname = `/w/${projectId}${rewritten.pathname}`;
      return rewritten.toString();
    });
  };
}
