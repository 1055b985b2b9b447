/**
 * The sandbox clock. Virtual time = the real time at start + real elapsed
 * time (at rate 1) + every advance made through `advance()` or
 * `POST /__sandbox/clock`. All task times, expiries and callbacks use it.
 */
export class Clock {
  private readonly realStart = performance.now();
  private readonly epochStart: number;
  private offsetMs = 0;
  private readonly listeners: Array<() => void> = [];

  constructor(epochStart: number = Date.now()) {
    this.epochStart = epochStart;
  }

  /** Virtual now, in epoch milliseconds. */
  now(): number {
    return this.epochStart + (performance.now() - this.realStart) + this.offsetMs;
  }

  /** Move the clock forward by `seconds` (>= 0) and wake whoever waits on it. */
  advance(seconds: number): void {
    if (!Number.isFinite(seconds) || seconds < 0) throw new RangeError(`advance expects a non-negative number of seconds, got ${seconds}`);
    this.offsetMs += seconds * 1000;
    for (const fn of this.listeners) fn();
  }

  /** Total seconds added by advance(). */
  get advancedSeconds(): number {
    return this.offsetMs / 1000;
  }

  onAdvance(fn: () => void): void {
    this.listeners.push(fn);
  }
}

/** `YYYY-MM-DDThh:mm:ss` in UTC, no zone offset (the contract's created_time). */
export function isoNoZone(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19);
}
