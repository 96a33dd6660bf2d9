import type { Context } from "hono";
import type { Kysely } from "kysely";
import type { Clock } from "../clock.ts";
import type { Database } from "../db/schema.ts";
import type { Logger } from "../logger.ts";
import type { AppEnv } from "./context.ts";
import { AppError } from "./errors.ts";
import { setResponseHeader } from "./response-headers.ts";

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the current window ends. */
  resetSeconds: number;
}

interface WindowState {
  window: number;
  /** Hits in the database for this bucket and window, as of the last load or flush. */
  stored: number;
  /** Hits taken by this process and not yet written. */
  pending: number;
  loading: Promise<void> | undefined;
  /** When `stored` was last read from the database (clock ms). */
  syncedAt: number;
}

const FLUSH_INTERVAL_MS = 200;
const BATCH_SIZE = 200;

/**
 * Fixed-window counters shared by every process through the `rate_limits` table.
 *
 * Writing each hit to the database would put a write on every request, so each process counts
 * locally and adds its hits to the shared row every 200 ms (one batched upsert that also reads
 * back the total). A bucket's count is loaded from the database the first time a process sees it
 * in a window, and again at a hit when it has not been read for a flush interval (a process that
 * was idle has nothing to flush and would otherwise keep a stale count). With one process the
 * count is exact; with several, a process can miss at most the other processes' hits of the last
 * flush interval.
 */
export class RateLimiter {
  private readonly windows = new Map<string, WindowState>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private lastCleanupWindow = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly windowMs = 60_000,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }

  /** Counts one hit; synchronous unless the bucket's count must first be read from the database. */
  hit(bucket: string, limit: number): RateDecision | Promise<RateDecision> {
    const now = this.clock.now().getTime();
    const window = Math.floor(now / this.windowMs);
    let state = this.windows.get(bucket);
    if (!state || state.window < window) {
      const fresh: WindowState = { window, stored: 0, pending: 0, loading: undefined, syncedAt: now };
      fresh.loading = this.load(bucket, fresh, now);
      // Unflushed hits of a window that has ended no longer limit anyone; they are dropped.
      this.windows.set(bucket, fresh);
      state = fresh;
    } else if (
      !state.loading &&
      state.pending === 0 &&
      state.stored < limit &&
      now - state.syncedAt >= FLUSH_INTERVAL_MS
    ) {
      // Nothing pending, so no flush has read the shared count back lately: read it before
      // allowing more. A count at the limit already refuses (counts only rise in a window), and
      // a bucket hit steadily is kept fresh by the flushes, so this is one read per request only
      // for callers slower than the flush interval.
      state.loading = this.load(bucket, state, now);
    }
    const loaded = state;
    if (loaded.loading) return loaded.loading.then(() => this.count(loaded, limit, now));
    return this.count(loaded, limit, now);
  }

  private count(state: WindowState, limit: number, now: number): RateDecision {
    const used = state.stored + state.pending;
    const resetSeconds = Math.max(1, Math.ceil(((state.window + 1) * this.windowMs - now) / 1000));
    if (used >= limit) return { allowed: false, limit, remaining: 0, resetSeconds };
    state.pending++;
    return { allowed: true, limit, remaining: limit - used - 1, resetSeconds };
  }

  private async load(bucket: string, state: WindowState, now: number): Promise<void> {
    try {
      const row = await this.db
        .selectFrom("rate_limits")
        .select("hits")
        .where("bucket", "=", bucket)
        .where("window_start", "=", state.window)
        .executeTakeFirst();
      state.stored = Number(row?.hits ?? 0);
    } catch (error) {
      this.log.error({ err: error }, "loading a rate-limit counter failed; counting locally");
    } finally {
      // A failed read is not retried before the next interval either.
      state.syncedAt = now;
      state.loading = undefined;
    }
  }

  /** Adds pending hits to the shared counters and reads back the totals. */
  async flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    this.flushing = this.writePending().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async writePending(): Promise<void> {
    const now = this.clock.now().getTime();
    const current = Math.floor(now / this.windowMs);
    const dirty: [string, WindowState, number][] = [];
    for (const [bucket, state] of this.windows) {
      if (state.window < current) this.windows.delete(bucket);
      else if (state.pending > 0) dirty.push([bucket, state, state.pending]);
    }
    for (let i = 0; i < dirty.length; i += BATCH_SIZE) {
      const batch = dirty.slice(i, i + BATCH_SIZE);
      try {
        const rows = await this.db
          .insertInto("rate_limits")
          .values(batch.map(([bucket, state, hits]) => ({ bucket, window_start: state.window, hits })))
          .onConflict((oc) =>
            oc.columns(["bucket", "window_start"]).doUpdateSet((eb) => ({
              hits: eb("rate_limits.hits", "+", eb.ref("excluded.hits")),
            })),
          )
          .returning(["bucket", "window_start", "hits"])
          .execute();
        const totals = new Map(rows.map((row) => [`${row.bucket}\u0000${row.window_start}`, Number(row.hits)]));
        for (const [bucket, state, hits] of batch) {
          state.pending -= hits;
          state.stored = totals.get(`${bucket}\u0000${state.window}`) ?? state.stored + hits;
          state.syncedAt = now;
        }
      } catch (error) {
        this.log.error({ err: error }, "writing rate-limit counters failed; will retry");
      }
    }
    if (current > this.lastCleanupWindow) {
      this.lastCleanupWindow = current;
      await this.db
        .deleteFrom("rate_limits")
        .where("window_start", "<", current - 1)
        .execute()
        .catch((error: unknown) => this.log.error({ err: error }, "pruning rate-limit counters failed"));
    }
  }
}

class RateLimitedError extends AppError {
  constructor(readonly retryAfterSeconds: number) {
    super(429, "RATE_LIMITED", `rate limit exceeded; retry in ${retryAfterSeconds}s`);
  }
}

const CREDENTIAL_PATHS = new Set(["/api/auth/sign-in/email", "/api/auth/sign-up/email"]);

/**
 * Which budget a request draws on: per address on sign-in and sign-up (stricter), else per
 * principal (API key, signed-in account, or client address when anonymous).
 */
export function rateBucket(
  c: Context<AppEnv>,
  limits: { perMinute: number; authPerMinute: number },
): [bucket: string, limit: number] {
  if (c.req.method === "POST" && CREDENTIAL_PATHS.has(c.req.path)) {
    return [`auth:${c.get("clientIp")}`, limits.authPerMinute];
  }
  const principal = c.get("principal");
  if (principal?.type === "api_key") return [`key:${principal.keyId}`, limits.perMinute];
  if (principal?.type === "account") return [`account:${principal.accountId}`, limits.perMinute];
  return [`ip:${c.get("clientIp")}`, limits.perMinute];
}

/**
 * Counts a request against `bucket` and applies the decision (see `applyRateDecision`); returns a
 * promise only when the limiter has to read the shared count first, so callers await only then.
 */
export function limitRate<E extends AppEnv>(
  c: Context<E>,
  limiter: RateLimiter,
  bucket: string,
  limit: number,
): Promise<void> | undefined {
  const decision = limiter.hit(bucket, limit);
  if (decision instanceof Promise) return decision.then((settled) => applyRateDecision(c, settled));
  applyRateDecision(c, decision);
  return undefined;
}

/** Sets the `RateLimit-*` headers every response carries; a refusal adds `Retry-After` and throws 429. */
function applyRateDecision<E extends AppEnv>(c: Context<E>, decision: RateDecision): void {
  setResponseHeader(c, "RateLimit-Limit", String(decision.limit));
  setResponseHeader(c, "RateLimit-Remaining", String(decision.remaining));
  setResponseHeader(c, "RateLimit-Reset", String(decision.resetSeconds));
  if (!decision.allowed) {
    setResponseHeader(c, "Retry-After", String(decision.resetSeconds));
    throw new RateLimitedError(decision.resetSeconds);
  }
}
