/** Time source for everything that expires or is scheduled, so tests can move time forward. */
export interface Clock {
  now(): Date;
}

export const DAY_MS = 86_400_000;

export const systemClock: Clock = { now: () => new Date() };

/** A clock that tests move by hand; it starts at the real time. */
export class ManualClock implements Clock {
  private offsetMs = 0;

  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }

  advance(ms: number): void {
    this.offsetMs += ms;
  }
}
