import type { Context } from "hono";
import type { ConsoleSessions } from "../../auth/console-sessions.ts";
import { preparedRead } from "../../db/compiled.ts";
import type { Deps } from "../../deps.ts";
import { ConflictError, ForbiddenError, NotFoundError, UnauthorizedError, ValidationError } from "../../errors.ts";
import type { AppEnv } from "../../http/context.ts";
import { inProcessCall } from "../../http/in-process.ts";
import type { ApiKeyPrincipal } from "../../http/principal.ts";
import type { RateLimiter } from "../../http/rate-limit.ts";
import type { SignInFailures } from "../../http/sign-in-failures.ts";
import { isIdOf } from "../../lib/ids.ts";
import { sameHash, sha256Hex } from "../../lib/tokens.ts";
import { authenticateApiKey } from "../api-keys/service.ts";
import type { AuditActor } from "../audit/service.ts";
import { textIssue } from "../fields.ts";
import { hasRole, type Role } from "../orgs/access.ts";
import type { ProjectRow } from "../projects/service.ts";
import type { TenantErrorRecorder } from "../tenant-errors/recorder.ts";
import type { UsageMeter } from "../usage/meter.ts";
import type { WorkspaceDispatcher } from "./dispatch.ts";
import type { WorkspaceDb, WorkspaceLease, WorkspacePool } from "./pool.ts";

/** Who is calling a workspace: its admin (admin token, or an org admin's key or session), or one of its users. */
export type WorkspaceCaller =
  | {
      kind: "admin";
      via: "admin_token" | "api_key" | "session";
      id: string;
      readOnly: boolean;
      /** The signed-in account's e-mail (`via: "session"`), for the audit log. */
      email?: string;
    }
  | { kind: "user"; userId: string; tokenHash: string }
  | { kind: "anonymous" };

export interface WorkspaceRuntime {
  deps: Deps;
  /** Where the workspace API's error answers are recorded (tenant errors). */
  errors: TenantErrorRecorder;
  /** Where the workspace API's requests are counted (usage). */
  meter: UsageMeter;
  sessions: ConsoleSessions;
  pool: WorkspacePool;
  dispatcher: WorkspaceDispatcher;
  limiter: RateLimiter;
  signInFailures: SignInFailures;
}

/** Everything a workspace operation needs: the project, its database and the caller. */
export interface WorkspaceCtx {
  runtime: WorkspaceRuntime;
  deps: Deps;
  project: WorkspaceProject;
  db: WorkspaceDb;
  caller: WorkspaceCaller;
  ip: string | null;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** What a workspace request needs of its project. */
export type WorkspaceProject = Pick<ProjectRow, "id" | "org_id" | "status" | "admin_token_hash">;

/**
 * The project behind a workspace request: one precompiled read on every workspace request's
 * path, of the columns it needs only (building a whole project row costs more than finding it).
 */
const findLiveProject = preparedRead<WorkspaceProject>("plinth_live_project", (db) =>
  db
    .selectFrom("projects")
    .select(["id", "org_id", "status", "admin_token_hash"])
    .where("id", "=", "?")
    .where("deleted_at", "is", null),
);

/**
 * A branch's workspace as a workspace project (DESIGN §9): the branch's id, status and admin
 * token, its project's org. Gone with its project.
 */
const findLiveBranch = preparedRead<WorkspaceProject>("plinth_live_branch", (db) =>
  db
    .selectFrom("branches")
    .innerJoin("projects", "projects.id", "branches.project_id")
    .select(["branches.id", "projects.org_id", "branches.status", "branches.admin_token_hash"])
    .where("branches.id", "=", "?")
    .where("projects.deleted_at", "is", null),
);

/**
 * Workspace requests for one project that arrive in the same turn of the event loop share one
 * read of it on PostgreSQL, sent after all of them have arrived, so each still sees every commit
 * that finished before it was asked (a pause, say). Under load that is one round trip for many
 * requests; SQLite reads in process, in microseconds, and reads for each.
 */
const pendingReads = new WeakMap<Deps["db"], Map<string, Promise<WorkspaceProject | undefined>>>();

function readLiveProject(deps: Deps, projectId: string): Promise<WorkspaceProject | undefined> {
  if (deps.dialect !== "postgres") return findLiveProject(deps, projectId);
  let pending = pendingReads.get(deps.db);
  if (!pending) {
    pending = new Map();
    pendingReads.set(deps.db, pending);
  }
  const reads = pending;
  let read = reads.get(projectId);
  if (!read) {
    read = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      reads.delete(projectId);
      return findLiveProject(deps, projectId);
    });
    reads.set(projectId, read);
  }
  return read;
}

/** A workspace request once its project and caller are known, before the project's state is. */
export interface WorkspaceVisit {
  project: WorkspaceProject;
  caller: WorkspaceCaller;
  /**
   * The workspace database, held for the request, when the project has one (none before
   * provisioning made it). Whoever visits releases it when the request is over.
   */
  lease: WorkspaceLease | null;
}

/**
 * Resolves the project (404 when deleted or unknown) and the caller. Bad credentials are 401,
 * and so is no credential unless `anonymous` (sign-up and sign-in); a key or session of another
 * org is 404, of the org below admin 403.
 */
export async function visitWorkspace<E extends AppEnv>(
  c: Context<E>,
  runtime: WorkspaceRuntime,
  projectId: string,
  anonymous: boolean,
  found?: (projectId: string) => void,
): Promise<WorkspaceVisit> {
  // The id is a path parameter, held to the same text rules as the validated ones.
  const issue = textIssue(projectId);
  if (issue) throw new ValidationError([{ path: "projectId", message: issue }]);
  // Nothing is looked up (or cached) for an id that cannot be one.
  const project = isIdOf("prj", projectId)
    ? await readLiveProject(runtime.deps, projectId)
    : isIdOf("brn", projectId)
      ? await findLiveBranch(runtime.deps, projectId)
      : undefined;
  if (!project) throw new NotFoundError("project not found");
  // From here on, the project's tenant errors record how the request ends (see the router).
  found?.(project.id);
  // None before provisioning has made it; a user token then matches nothing.
  const lease =
    project.status === "active" || project.status === "paused" ? await runtime.pool.acquire(project.id) : null;
  try {
    const caller = await resolveCaller(c, runtime, project, lease?.db ?? null, anonymous);
    if (caller.kind === "anonymous" && !anonymous) throw new UnauthorizedError();
    return { project, caller, lease };
  } catch (error) {
    lease?.release();
    throw error;
  }
}

/**
 * The workspace of a visit whose caller may make it (checked first, so that only a caller the
 * project would answer learns its state): 409 unless the project is active.
 */
export function openWorkspace<E extends AppEnv>(
  c: Context<E>,
  runtime: WorkspaceRuntime,
  { project, caller, lease }: WorkspaceVisit,
): WorkspaceCtx {
  if (project.status === "paused") throw new ConflictError("project is paused");
  if (project.status !== "active") throw new ConflictError(`project is ${project.status}`);
  if (!lease) throw new NotFoundError("project has no workspace");
  return { runtime, deps: runtime.deps, project, db: lease.db, caller, ip: c.get("clientIp") };
}

/**
 * Who calls. A console session cookie is sent by the browser on its own, so where anyone may
 * call (`anonymous`: sign-up, sign-in) one that makes its holder no workspace admin (another
 * org's, or below admin) is ignored rather than refused.
 */
async function resolveCaller<E extends AppEnv>(
  c: Context<E>,
  runtime: WorkspaceRuntime,
  project: WorkspaceProject,
  db: WorkspaceDb | null,
  anonymous: boolean,
): Promise<WorkspaceCaller> {
  const { deps } = runtime;
  const call = inProcessCall(c);
  if (call) return keyCaller(call.principal, project);
  const authorization = c.req.header("authorization");
  if (authorization) {
    const token = BEARER.exec(authorization)?.[1];
    if (!token) throw new UnauthorizedError("the Authorization header must be 'Bearer <token>'");
    if (token.startsWith("wsa_")) {
      if (!sameHash(sha256Hex(token), project.admin_token_hash)) throw new UnauthorizedError("invalid admin token");
      return { kind: "admin", via: "admin_token", id: project.id, readOnly: false };
    }
    if (token.startsWith("pak_")) return keyCaller(await authenticateApiKey(deps, token, c.get("clientIp")), project);
    const tokenHash = sha256Hex(token);
    if (!db) throw new UnauthorizedError("invalid or expired token");
    // Only a session whose user still exists: a sign-in that overlapped the user's deletion
    // may have left one behind.
    const session = await db
      .selectFrom("user_sessions")
      .innerJoin("users", "users.id", "user_sessions.user_id")
      .select(["user_sessions.user_id", "user_sessions.expires_at"])
      .where("user_sessions.token_hash", "=", tokenHash)
      .executeTakeFirst();
    if (!session || (session.expires_at as string) <= deps.clock.now().toISOString()) {
      throw new UnauthorizedError("invalid or expired token");
    }
    return { kind: "user", userId: session.user_id as string, tokenHash };
  }
  const account = await runtime.sessions.accountOf(c);
  if (account) {
    const membership = await deps.db
      .selectFrom("memberships")
      .select("role")
      .where("org_id", "=", project.org_id)
      .where("account_id", "=", account.accountId)
      .where("status", "=", "active")
      .executeTakeFirst();
    const admin = membership !== undefined && hasRole(membership.role as Role, "admin");
    if (admin) return { kind: "admin", via: "session", id: account.accountId, readOnly: false, email: account.email };
    if (anonymous) return { kind: "anonymous" };
    if (!membership) throw new NotFoundError("project not found");
    throw new ForbiddenError("only the org's admins and owners act as workspace admin");
  }
  return { kind: "anonymous" };
}

function keyCaller(key: ApiKeyPrincipal, project: WorkspaceProject): WorkspaceCaller {
  if (key.org.id !== project.org_id) throw new NotFoundError("project not found");
  // A key acts as admin narrowed by its scope: managing a workspace is beyond a deploy key.
  return { kind: "admin", via: "api_key", id: key.keyId, readOnly: key.scope !== "full" };
}

/** Who the audit log names for a workspace caller: the admin (by token, key or account), or the workspace. */
export function workspaceActor(ctx: Pick<WorkspaceCtx, "caller" | "project">): AuditActor {
  const caller = ctx.caller;
  return caller.kind === "admin"
    ? {
        type: caller.via === "admin_token" ? "workspace_admin" : caller.via === "api_key" ? "api_key" : "account",
        id: caller.id,
        email: caller.email ?? null,
      }
    : { type: "workspace", id: ctx.project.id, email: null };
}

/** 401 without credentials; 403 for a workspace user, or a read-only key on a write. */
export function requireAdmin(ctx: Pick<WorkspaceCtx, "caller">, write: boolean): void {
  if (ctx.caller.kind === "anonymous") throw new UnauthorizedError();
  if (ctx.caller.kind !== "admin") throw new ForbiddenError("this needs the workspace admin");
  if (write && ctx.caller.readOnly) throw new ForbiddenError("only a 'full' API key may change a workspace");
}

/** Admins and signed-in workspace users. */
export function requireMember(ctx: Pick<WorkspaceCtx, "caller">, write: boolean): void {
  if (ctx.caller.kind === "anonymous") throw new UnauthorizedError();
  if (write && ctx.caller.kind === "admin" && ctx.caller.readOnly) {
    throw new ForbiddenError("only a 'full' API key may change a workspace");
  }
}
