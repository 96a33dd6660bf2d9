import type { Context } from "hono";
import type { Kysely } from "kysely";
import type { Clock } from "../clock.ts";
import type { Database } from "../db/schema.ts";
import { RateLimitedError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { AppEnv } from "./context.ts";
import { inProcessCall } from "./in-process.ts";
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
  /** Hits in the database for this bucket and window, as of the last load or write. */
  stored: number;
  /** Hits taken by this process and not yet written. */
  pending: number;
  /** Hits of this process being written now (neither pending nor in `stored` yet). */
  writing: number;
  /** The write of this bucket under way, if any: one at a time, so each total counts the last. */
  busy: Promise<void> | undefined;
  loading: Promise<void> | undefined;
  /** When `stored` was last read from the database (clock ms). */
  syncedAt: number;
}

const MINUTE_MS = 60_000;
const FLUSH_INTERVAL_MS = 200;
const BATCH_SIZE = 200;
/**
 * The last part of a budget, as a share of the limit, that is counted in the database request by
 * request, so that processes sharing a budget do not together overshoot it by what each counted
 * since its last flush.
 */
const EXACT_SHARE = 0.2;

/** How many hits at the end of a budget of `limit` are counted exactly. */
function exactPart(limit: number): number {
  return Math.ceil(limit * EXACT_SHARE);
}

/**
 * Fixed-window counters shared by every process through the `rate_limits` table.
 *
 * Writing each hit to the database would put a write on every request, so each process counts
 * locally and adds its hits to the shared row every 200 ms (one batched upsert that also reads
 * back the total). A bucket's count is loaded from the database the first time a process sees it
 * in a window, and again at a hit when it has not been read for a flush interval (a process that
 * was idle has nothing to flush and would otherwise keep a stale count). Within the last fifth
 * of a budget (`EXACT_SHARE`) each hit is added to the shared row as it comes, and decided by the
 * total that comes back: there, processes sharing a budget miss only each other's hits not yet
 * flushed as they entered it, instead of a flush interval's worth for the rest of the window.
 * Past the limit, refusals are local again (counts only rise in a window).
 */
export class RateLimiter {
  private readonly windows = new Map<string, WindowState>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private lastCleanupWindow = 0;

  /** `windowMs`: whole minutes. */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly windowMs = MINUTE_MS,
  ) {
    if (windowMs <= 0 || windowMs % MINUTE_MS !== 0)
      throw new Error("a rate-limit window is a whole number of minutes");
  }

  /**
   * The row a window is counted in: its last minute (Unix ms / 60 000), so that limiters of any
   * window length share the table, and one rule prunes what has ended.
   */
  private rowOf(window: number): number {
    return ((window + 1) * this.windowMs) / MINUTE_MS - 1;
  }

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    // A flush under way took only the hits counted before it began; the second takes the rest.
    await this.flush();
    await this.flush();
  }

  /**
   * Counts one hit; synchronous unless the bucket's count must first be read from the database,
   * or the hit falls in the last part of the budget.
   */
  hit(bucket: string, limit: number): RateDecision | Promise<RateDecision> {
    const now = this.clock.now().getTime();
    const state = this.stateOf(bucket, now);
    if (
      !state.loading &&
      state.pending === 0 &&
      state.writing === 0 &&
      // In the last part of the budget each hit reads the shared count back anyway.
      limit - state.stored > exactPart(limit) &&
      now - state.syncedAt >= FLUSH_INTERVAL_MS
    ) {
      // Nothing pending, so no flush has read the shared count back lately: read it before
      // allowing more. A count at the limit already refuses (counts only rise in a window), and
      // a bucket hit steadily is kept fresh by the flushes, so this is one read per request only
      // for callers slower than the flush interval.
      state.loading = this.load(bucket, state, now);
    }
    if (state.loading) return state.loading.then(() => this.count(bucket, state, limit, now));
    return this.count(bucket, state, limit, now);
  }

  /**
   * The decision a hit would get now, without counting one, for a budget counted only after what
   * it guards has run (failed sign-ins): reads the shared count first, unless this process already
   * sees the budget spent.
   */
  async peek(bucket: string, limit: number): Promise<RateDecision> {
    const now = this.clock.now().getTime();
    const state = this.stateOf(bucket, now);
    if (!state.loading && state.stored + state.writing + state.pending < limit) {
      state.loading = this.load(bucket, state, now);
    }
    await state.loading;
    return this.decision(state, limit, state.stored + state.writing + state.pending + 1, now);
  }

  /** The bucket's state in the current window; a new window's count is being loaded. */
  private stateOf(bucket: string, now: number): WindowState {
    const window = Math.floor(now / this.windowMs);
    const state = this.windows.get(bucket);
    if (state && state.window >= window) return state;
    const fresh: WindowState = {
      window,
      stored: 0,
      pending: 0,
      writing: 0,
      busy: undefined,
      loading: undefined,
      syncedAt: now,
    };
    fresh.loading = this.load(bucket, fresh, now);
    // Unflushed hits of a window that has ended no longer limit anyone; they are dropped.
    this.windows.set(bucket, fresh);
    return fresh;
  }

  private count(bucket: string, state: WindowState, limit: number, now: number): RateDecision | Promise<RateDecision> {
    const used = state.stored + state.writing + state.pending;
    if (used >= limit) return this.decision(state, limit, used + 1, now);
    if (limit - used <= exactPart(limit)) return this.countExactly(bucket, state, limit, now);
    state.pending++;
    return this.decision(state, limit, used + 1, now);
  }

  /** `used`: hits counted with this one; more than the limit refuses it. */
  private decision(state: WindowState, limit: number, used: number, now: number): RateDecision {
    const resetSeconds = Math.max(1, Math.ceil(((state.window + 1) * this.windowMs - now) / 1000));
    const allowed = used <= limit;
    return { allowed, limit, remaining: allowed ? limit - used : 0, resetSeconds };
  }

  /**
   * Adds this hit, and this process's hits not yet written, to the shared row now and decides by
   * the total read back. If the write fails, the hit is counted locally. (A write that hangs holds
   * up the bucket's next hits, as every other query of the request would hang.)
   */
  private async countExactly(bucket: string, state: WindowState, limit: number, now: number): Promise<RateDecision> {
    // After this process's last write of the bucket, so that the total read back counts it.
    while (state.busy) await state.busy;
    if (state.stored + state.pending >= limit) return this.decision(state, limit, limit + 1, now);
    state.pending++;
    const taken = state.pending;
    state.pending = 0;
    const written = this.write([{ bucket, state, taken }]);
    const busy = written.then(
      () => undefined,
      () => undefined,
    );
    state.busy = busy;
    try {
      const [total = taken] = await written;
      // Every hit written before this one, by any process, and this process's not yet written.
      // A refused hit stays counted: it only keeps the bucket refused, as it is by then.
      return this.decision(state, limit, total + state.pending, now);
    } catch {
      return this.decision(state, limit, state.stored + state.pending, now);
    } finally {
      if (state.busy === busy) state.busy = undefined;
    }
  }

  /**
   * Writes hits taken from `pending` (counted as `writing` meanwhile) and updates `stored` with the
   * totals read back; on failure they are pending again. Resolves to the totals, in order.
   */
  private async write(batch: Array<{ bucket: string; state: WindowState; taken: number }>): Promise<number[]> {
    const now = this.clock.now().getTime();
    for (const { state, taken } of batch) state.writing += taken;
    try {
      const totals = await this.add(batch.map(({ bucket, state, taken }) => [bucket, this.rowOf(state.window), taken]));
      for (const [i, { state, taken }] of batch.entries()) {
        state.writing -= taken;
        state.stored = Math.max(state.stored, totals[i] ?? 0);
        state.syncedAt = now;
      }
      return totals;
    } catch (error) {
      for (const { state, taken } of batch) {
        state.writing -= taken;
        state.pending += taken;
      }
      this.log.error({ err: error }, "writing rate-limit counters failed; counting locally, will retry");
      throw error;
    }
  }

  /** Adds hits to shared counters; resolves to each counter's new total, in order. */
  private async add(hits: Array<[bucket: string, row: number, hits: number]>): Promise<number[]> {
    const rows = await this.db
      .insertInto("rate_limits")
      .values(hits.map(([bucket, window_start, count]) => ({ bucket, window_start, hits: count })))
      .onConflict((oc) =>
        oc.columns(["bucket", "window_start"]).doUpdateSet((eb) => ({
          hits: eb("rate_limits.hits", "+", eb.ref("excluded.hits")),
        })),
      )
      .returning(["bucket", "window_start", "hits"])
      .execute();
    const totals = new Map(rows.map((row) => [`${row.bucket}\u0000${row.window_start}`, Number(row.hits)]));
    return hits.map(([bucket, row, count]) => totals.get(`${bucket}\u0000${row}`) ?? count);
  }

  private async load(bucket: string, state: WindowState, now: number): Promise<void> {
    try {
      const row = await this.db
        .selectFrom("rate_limits")
        .select("hits")
        .where("bucket", "=", bucket)
        .where("window_start", "=", this.rowOf(state.window))
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
    const dirty: [string, WindowState][] = [];
    for (const [bucket, state] of this.windows) {
      if (state.window < current) this.windows.delete(bucket);
      // A bucket being written exactly takes its pending hits with it, or the next flush does.
      else if (state.pending > 0 && !state.busy) dirty.push([bucket, state]);
    }
    for (let i = 0; i < dirty.length; i += BATCH_SIZE) {
      // Checked again as each batch is taken: an exact write may have begun while earlier
      // batches were written, and carries the bucket's pending hits with it.
      const batch = dirty
        .slice(i, i + BATCH_SIZE)
        .filter(([, state]) => state.pending > 0 && !state.busy)
        .map(([bucket, state]) => {
          const taken = state.pending;
          state.pending = 0;
          return { bucket, state, taken };
        });
      if (batch.length === 0) continue;
      const written = this.write(batch).then(
        () => undefined,
        () => undefined,
      );
      for (const { state } of batch) state.busy = written;
      await written;
      for (const { state } of batch) if (state.busy === written) state.busy = undefined;
    }
    if (current > this.lastCleanupWindow) {
      this.lastCleanupWindow = current;
      // Windows of every length that ended before the last minute (see `rowOf`).
      await this.db
        .deleteFrom("rate_limits")
        .where("window_start", "<", Math.floor(now / MINUTE_MS) - 1)
        .execute()
        .catch((error: unknown) => this.log.error({ err: error }, "pruning rate-limit counters failed"));
    }
  }
}

const CREDENTIAL_PATHS = new Set(["/api/auth/sign-in/email", "/api/auth/sign-up/email"]);

/**
 * Which budget a request draws on: per address on sign-in and sign-up (stricter), else per
 * principal (API key, signed-in account, or client address when anonymous). An address is an
 * IPv6 client's /64 (`clientRateKey`).
 */
export function rateBucket(
  c: Context<AppEnv>,
  limits: { perMinute: number; authPerMinute: number },
): [bucket: string, limit: number] {
  if (c.req.method === "POST" && CREDENTIAL_PATHS.has(c.req.path)) {
    return [`auth:${c.get("clientRateKey")}`, limits.authPerMinute];
  }
  const principal = c.get("principal");
  if (principal?.type === "api_key") return [`key:${principal.keyId}`, limits.perMinute];
  if (principal?.type === "account") return [`account:${principal.accountId}`, limits.perMinute];
  return [`ip:${c.get("clientRateKey")}`, limits.perMinute];
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
  // Counted once, as the request that made it (an MCP tool call).
  if (inProcessCall(c)) return undefined;
  const decision = limiter.hit(bucket, limit);
  if (decision instanceof Promise) return decision.then((settled) => applyRateDecision(c, settled));
  applyRateDecision(c, decision);
  return undefined;
}

/** Sets the `RateLimit-*` headers every response carries; a refusal adds `Retry-After` and throws 429. */
export function applyRateDecision<E extends AppEnv>(c: Context<E>, decision: RateDecision): void {
  setResponseHeader(c, "RateLimit-Limit", String(decision.limit));
  setResponseHeader(c, "RateLimit-Remaining", String(decision.remaining));
  setResponseHeader(c, "RateLimit-Reset", String(decision.resetSeconds));
  if (!decision.allowed) {
    setResponseHeader(c, "Retry-After", String(decision.resetSeconds));
    throw new RateLimitedError(decision.resetSeconds);
  }
}
