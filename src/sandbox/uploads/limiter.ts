/**
 * The upload rate limit: at most `limit` admitted requests per key in any
 * window of `windowMs` (sliding, on the sandbox clock). Requests refused with
 * 429 do not take a slot. Every admitted upload request counts, whatever its outcome.
 * A window of 0 (the sandbox at time scale 0, where every duration is 0) admits everything.
 */
export class UploadRateLimit {
  private readonly seen = new Map<string, number[]>();
  private readonly limit: number;
  private readonly windowMs: number;

  constructor(limit: number, windowMs: number) {
    this.limit = limit;
    this.windowMs = windowMs;
  }

  /** null when admitted (and counted); else the milliseconds until a slot frees. */
  take(key: string, now: number): number | null {
    if (this.windowMs <= 0) return null;
    const times = (this.seen.get(key) ?? []).filter((t) => t > now - this.windowMs);
    if (times.length >= this.limit) {
      this.seen.set(key, times);
      return Math.max(1, (times[0] ?? now) + this.windowMs - now);
    }
    times.push(now);
    this.seen.set(key, times);
    return null;
  }
}
