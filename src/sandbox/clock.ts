/**
 * The sandbox clock. Virtual time = the real time at start + real elapsed
 * time (at rate 1) + every advance made through `advance()` or
 * `POST /__sandbox/clock`. All task times, expiries and callbacks use it.
 */
/** The clock never moves further than this past its start (100 years): far enough for any test, and dates stay printable. */
export const MAX_ADVANCE_S = 100 * 365.25 * 24 * 3600;

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

  /** Why advancing by `seconds` is refused (negative, not finite, or past 100 years from the start), or null. */
  advanceProblem(seconds: number): string | null {
    if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) return `must be a non-negative number of seconds, got ${String(seconds)}`;
    const room = MAX_ADVANCE_S - (this.now() - this.epochStart) / 1000;
    if (seconds > room) return `must keep the clock within 100 years of its start: at most ${Math.floor(room)} more seconds, got ${seconds}`;
    return null;
  }

  /** Move the clock forward by `seconds` (>= 0, keeping it within 100 years of its start) and wake whoever waits on it. */
  advance(seconds: number): void {
    const problem = this.advanceProblem(seconds);
    if (problem) throw new RangeError(`advance: ${problem}`);
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
