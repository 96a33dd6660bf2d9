import type { Context } from "hono";
import { insertRows } from "../../db/shapes.ts";
import type { Deps } from "../../deps.ts";
import { AppError } from "../../errors.ts";
import { statusOf } from "../../http/envelope.ts";
import { newId } from "../../lib/ids.ts";

/** Rows kept per project at most (DESIGN §10); older ones go as newer ones come. */
export const TENANT_ERRORS_PER_PROJECT = 10_000;
/** Errors waiting to be written at most: past it, new ones are counted and dropped. */
const MAX_PENDING = 10_000;
/** How often waiting errors are written; sooner once a batch is full. */
const FLUSH_MS = 1_000;
const BATCH = 500;
const MAX_MESSAGE = 500;
const MAX_PATH = 1_000;
/**
 * Errors recorded per project and second at most. A project keeps only its newest 10,000, so a
 * flood faster than this would write rows only to delete them: past it, errors are counted and
 * dropped, and a flood costs the database a bounded trickle.
 */
const PER_PROJECT_PER_SECOND = 200;

/** What the error envelope said, set by `errorResponse` for whoever records the answer. */
export interface AnsweredError {
  code: string;
  message: string;
}

/**
 * Tenant errors (DESIGN §10): every workspace API answer of status 400 or more, per project.
 *
 * Recording costs a request nothing it would notice: the error is appended to a list in memory,
 * and written in batches, one statement per batch, every second or as soon as a batch is full;
 * at most PER_PROJECT_PER_SECOND per project and second.
 * The list is bounded: an error that finds it full (a flood faster than the database takes
 * them) is counted and dropped, so memory stays flat whatever a client sends. After each batch,
 * each project it touched keeps its newest TENANT_ERRORS_PER_PROJECT rows; a daily job removes
 * rows older than 7 days. Requests for projects that do not exist record nothing.
 */
export class TenantErrorRecorder {
  private pending: Array<Record<string, unknown>> = [];
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> | undefined;
  /** Errors dropped because the list was full or their project's second was, since the start. */
  dropped = 0;
  /** Per project: the second being counted, and its errors so far. */
  private readonly perSecond = new Map<string, { second: number; count: number }>();

  constructor(private readonly deps: Deps) {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  /**
   * Records the answer of a workspace request for `projectId` if it is an error: `thrown` when
   * the request ended in an exception not yet rendered, else the response's status and what
   * `errorResponse` said.
   */
  noteAnswer(c: Context, projectId: string, thrown: unknown): void {
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
    if (this.pending.length >= MAX_PENDING || !this.admits(projectId)) {
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
    });
    if (this.pending.length >= BATCH) void this.flush();
  }

  /** Whether the project's second has room for one more error. */
  private admits(projectId: string): boolean {
    const second = Math.floor(Date.now() / 1000);
    const counted = this.perSecond.get(projectId);
    if (!counted || counted.second !== second) {
      // Forgotten each second: the map holds the projects erring now, not every one ever.
      if (!counted && this.perSecond.size >= MAX_PENDING) this.perSecond.clear();
      this.perSecond.set(projectId, { second, count: 1 });
      return true;
    }
    if (counted.count >= PER_PROJECT_PER_SECOND) return false;
    counted.count++;
    return true;
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
    const { db, dialect, log } = this.deps;
    try {
      for (let i = 0; i < rows.length; i += BATCH) {
        // biome-ignore lint/suspicious/noExplicitAny: rows built above, in the table's shape
        await insertRows(db, dialect, "tenant_errors", rows.slice(i, i + BATCH) as any);
      }
      for (const projectId of new Set(rows.map((row) => row.project_id as string))) {
        const oldestKept = db
          .selectFrom("tenant_errors")
          .select("id")
          .where("project_id", "=", projectId)
          .orderBy("id", "desc")
          .limit(1)
          .offset(TENANT_ERRORS_PER_PROJECT - 1);
        await db.deleteFrom("tenant_errors").where("project_id", "=", projectId).where("id", "<", oldestKept).execute();
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
