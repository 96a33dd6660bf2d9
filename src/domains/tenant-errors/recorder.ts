import type { Context } from "hono";
import type { Insertable } from "kysely";
import type { TenantErrorsTable } from "../../db/schema.ts";
import { insertRows } from "../../db/shapes.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { statusOf } from "../../http/envelope.ts";
import { newId } from "../../lib/ids.ts";

/** Authenticated callers' errors kept per project at most (DESIGN §10); older ones go as newer ones come. */
export const TENANT_ERRORS_PER_PROJECT = 10_000;
/**
 * Errors of requests without valid workspace credentials kept per project at most: anyone who
 * knows a project's id can make them, so they have budgets of their own and can never push out
 * or bury the errors of the project's own clients.
 */
export const UNAUTHENTICATED_ERRORS_PER_PROJECT = 20;
/** Errors waiting to be written at most, per kind: past it, new ones are counted and dropped. */
const MAX_PENDING = 10_000;
const MAX_PENDING_UNAUTHENTICATED = 1_000;
/** How often waiting errors are written; sooner once a batch is full. */
const FLUSH_MS = 1_000;
const BATCH = 500;
const MAX_MESSAGE = 500;
const MAX_PATH = 1_000;
/**
 * Errors recorded per project and second at most, per kind. A project keeps only its newest rows
 * of each kind, so a flood faster than this would write rows only to delete them: past it, errors
 * are counted and dropped, and a flood costs the database a bounded trickle.
 */
const PER_PROJECT_PER_SECOND = 200;
const UNAUTHENTICATED_PER_PROJECT_PER_SECOND = UNAUTHENTICATED_ERRORS_PER_PROJECT;

/** Errors per project and second, up to a limit (one kind of error's budget). */
class PerSecondBudget {
  /** Per project: the second being counted, and its errors so far. */
  private readonly counts = new Map<string, { second: number; count: number }>();

  constructor(private readonly limit: number) {}

  /** Whether the project's second has room for one more error. */
  admits(projectId: string): boolean {
    const second = Math.floor(Date.now() / 1000);
    const counted = this.counts.get(projectId);
    if (!counted || counted.second !== second) {
      // Forgotten each second: the map holds the projects erring now, not every one ever.
      if (!counted && this.counts.size >= MAX_PENDING) this.counts.clear();
      this.counts.set(projectId, { second, count: 1 });
      return true;
    }
    if (counted.count >= this.limit) return false;
    counted.count++;
    return true;
  }
}

/** An error waiting to be written. */
type PendingError = Insertable<TenantErrorsTable> & { authenticated: 0 | 1 };

/** What the error envelope said, set by `errorResponse` for whoever records the answer. */
export interface AnsweredError {
  code: string;
  message: string;
}

/**
 * Tenant errors (DESIGN §10): every workspace API answer of status 400 or more, per project.
 *
 * Recording costs a request nothing it would notice: the error is appended to a list in memory,
 * and written in batches, one statement per batch, every second or as soon as a batch is full.
 * Errors of requests without valid workspace credentials (`authenticated` false) are a kind of
 * their own with budgets of their own, so that a flood of them takes nothing from the others:
 * per project and second at most PER_PROJECT_PER_SECOND of authenticated callers' errors and
 * UNAUTHENTICATED_PER_PROJECT_PER_SECOND of the rest; the list is bounded for each kind, and an
 * error that finds its kind's full (a flood faster than the database takes them) is counted and
 * dropped, so memory stays flat whatever a client sends. After each batch, each project it
 * touched keeps its newest TENANT_ERRORS_PER_PROJECT authenticated rows and
 * UNAUTHENTICATED_ERRORS_PER_PROJECT others; a daily job removes rows older than 7 days.
 * Requests for projects that do not exist record nothing.
 */
export class TenantErrorRecorder {
  private pending: PendingError[] = [];
  /** How many of `pending` are unauthenticated requests' errors. */
  private pendingUnauthenticated = 0;
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> | undefined;
  /** Errors dropped because the list was full or their project's second was, since the start. */
  dropped = 0;
  private readonly authenticatedBudget = new PerSecondBudget(PER_PROJECT_PER_SECOND);
  private readonly unauthenticatedBudget = new PerSecondBudget(UNAUTHENTICATED_PER_PROJECT_PER_SECOND);

  constructor(private readonly deps: Deps) {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  /**
   * Records the answer of a workspace request for `projectId` if it is an error: `thrown` when
   * the request ended in an exception not yet rendered, else the response's status and what
   * `errorResponse` said. `authenticated`: whether the caller presented valid workspace
   * credentials.
   */
  noteAnswer(c: Context, projectId: string, thrown: unknown, authenticated: boolean): void {
    let status: number;
    let code: string;
    let message: string;
    if (thrown !== undefined) {
      if (thrown instanceof AppError) {
        status = statusOf(thrown.code);
        code = thrown.code;
        message = thrown.message;
      } else {
        status = 500;
        code = "INTERNAL";
        message = "internal error";
      }
    } else {
      status = c.res.status;
      if (status < 400) return;
      const answered = c.get("answeredError") as AnsweredError | undefined;
      code = answered?.code ?? `HTTP_${status}`;
      message = answered?.message ?? "";
    }
    const full = authenticated
      ? this.pending.length - this.pendingUnauthenticated >= MAX_PENDING
      : this.pendingUnauthenticated >= MAX_PENDING_UNAUTHENTICATED;
    const budget = authenticated ? this.authenticatedBudget : this.unauthenticatedBudget;
    if (full || !budget.admits(projectId)) {
      this.dropped++;
      return;
    }
    const now = this.deps.clock.now();
    this.pending.push({
      id: newId("ter", now),
      project_id: projectId,
      at: now.toISOString(),
      method: c.req.method,
      path: c.req.path.slice(0, MAX_PATH),
      status,
      code,
      message: message.slice(0, MAX_MESSAGE),
      request_id: (c.get("requestId") as string | undefined) ?? null,
      authenticated: authenticated ? 1 : 0,
    });
    if (!authenticated) this.pendingUnauthenticated++;
    if (this.pending.length >= BATCH) void this.flush();
  }

  /** Writes what is waiting; resolves once it is written (or has failed, logged). */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => (this.pending.length > 0 ? this.flush() : undefined));
    if (this.pending.length === 0) return Promise.resolve();
    this.flushing = this.write().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async write(): Promise<void> {
    const rows = this.pending;
    this.pending = [];
    this.pendingUnauthenticated = 0;
    const { db, dialect, log } = this.deps;
    try {
      for (let i = 0; i < rows.length; i += BATCH) {
        await insertRows(db, dialect, "tenant_errors", rows.slice(i, i + BATCH));
      }
      const touched = new Map(rows.map((row) => [`${row.authenticated}:${row.project_id}`, row]));
      for (const { project_id: projectId, authenticated } of touched.values()) {
        const kept = authenticated ? TENANT_ERRORS_PER_PROJECT : UNAUTHENTICATED_ERRORS_PER_PROJECT;
        const oldestKept = db
          .selectFrom("tenant_errors")
          .select("id")
          .where("project_id", "=", projectId)
          .where("authenticated", "=", authenticated)
          .orderBy("id", "desc")
          .limit(1)
          .offset(kept - 1);
        await db
          .deleteFrom("tenant_errors")
          .where("project_id", "=", projectId)
          .where("authenticated", "=", authenticated)
          .where("id", "<", oldestKept)
          .execute();
      }
    } catch (error) {
      // Lost, not retried: they are diagnostics, and a database that refuses them has worse news.
      log.warn({ err: error, count: rows.length }, "recording tenant errors failed");
    }
  }

  /** Stops the timer and writes what is waiting (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
