import type { Context } from "hono";
import { UnauthorizedError } from "../errors.ts";
import { sha256Hex } from "../lib/tokens.ts";
import type { AppEnv } from "./context.ts";
import { applyRateDecision, type RateLimiter } from "./rate-limit.ts";

/** The window failed sign-ins are counted in. */
export const SIGN_IN_FAILURE_WINDOW_MS = 15 * 60_000;

/**
 * Failed sign-ins per account, beside each address's budget: guesses at one password spread over
 * many addresses run out too. Past the limit, the account's sign-ins are refused (429, even with
 * the right password) until the window ends; a success neither counts nor clears the failures.
 * Accounts are known by a hash of their e-mail, and are counted only once an address's budget has
 * let the attempt through, so each address adds a bounded number of rows a minute.
 *
 * Only the outcome tells a failure, so attempts on one account run one at a time in a process:
 * otherwise a burst would all pass the check before the first failure was counted.
 */
export class SignInFailures {
  private readonly running = new Map<string, Promise<void>>();

  /** `limiter`: one with `SIGN_IN_FAILURE_WINDOW_MS` windows. */
  constructor(
    private readonly limiter: RateLimiter,
    private readonly limit: number,
  ) {}

  /**
   * Runs `signIn` for `email` within `scope` (the console, or a project) unless the account's
   * failures have spent its budget. A failure is an `UnauthorizedError` thrown, or an outcome
   * `failed` says is one. A refusal shows the account's budget in the `RateLimit-*` headers;
   * otherwise they show the address's, as on every other response.
   */
  async attempt<T, E extends AppEnv>(
    c: Context<E>,
    scope: string,
    email: string,
    signIn: () => Promise<T>,
    failed: (outcome: T) => boolean = () => false,
  ): Promise<T> {
    const bucket = `sign-in:${scope}:${sha256Hex(email.trim().toLowerCase())}`;
    return this.oneAtATime(bucket, async () => {
      const decision = await this.limiter.peek(bucket, this.limit);
      if (!decision.allowed) applyRateDecision(c, decision);
      let outcome: T;
      try {
        outcome = await signIn();
      } catch (error) {
        if (error instanceof UnauthorizedError) await this.limiter.hit(bucket, this.limit);
        throw error;
      }
      if (failed(outcome)) await this.limiter.hit(bucket, this.limit);
      return outcome;
    });
  }

  private async oneAtATime<T>(key: string, run: () => Promise<T>): Promise<T> {
    const before = this.running.get(key);
    let done = () => {};
    const mine = new Promise<void>((resolve) => {
      done = resolve;
    });
    this.running.set(key, mine);
    try {
      await before;
      return await run();
    } finally {
      done();
      if (this.running.get(key) === mine) this.running.delete(key);
    }
  }
}
