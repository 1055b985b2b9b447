import { abortReason, throwIfAborted } from './retry.js';

/**
 * Client-side rate limits, kept by waiting (never by provoking 429s).
 * Waiters are served first come, first served, and leave the queue at once
 * when their AbortSignal fires.
 */

interface Waiter {
  resolve: () => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

function enqueue(queue: Waiter[], signal: AbortSignal | undefined, onQueued: () => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const w: Waiter = {
      resolve,
      reject,
      signal,
      onAbort: () => {
        const i = queue.indexOf(w);
        // Stryker disable next-line ConditionalExpression: onAbort runs only while the waiter is queued (release removes the listener first), so i is never -1.
        if (i >= 0) queue.splice(i, 1);
        reject(abortReason(signal as AbortSignal));
      },
    };
    queue.push(w);
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: an AbortSignal fires 'abort' once at most, so `once` changes nothing.
    signal?.addEventListener('abort', w.onAbort, { once: true });
    onQueued();
  });
}

function release(w: Waiter): void {
  w.signal?.removeEventListener('abort', w.onAbort);
  w.resolve();
}

/**
 * A token bucket: `ratePerSec` tokens a second, holding at most `burst`
 * (default 1: requests evenly spaced, so no one-second window holds more than
 * rate + 1). One bucket is shared by every caller of a ServiceClient.
 */
export class TokenBucket {
  readonly ratePerSec: number;
  readonly burst: number;
  #tokens: number;
  #last: number;
  #queue: Waiter[] = [];
  #timer: NodeJS.Timeout | undefined;
  #now: () => number;

  constructor(ratePerSec: number, burst = 1, now: () => number = () => performance.now()) {
    if (!(ratePerSec > 0) || !Number.isFinite(ratePerSec)) throw new RangeError(`Expected ratePerSec to be a finite number > 0, got ${ratePerSec}`);
    if (!(burst >= 1) || !Number.isFinite(burst)) throw new RangeError(`Expected burst to be a finite number >= 1, got ${burst}`);
    this.ratePerSec = ratePerSec;
    this.burst = burst;
    this.#tokens = burst;
    this.#now = now;
    this.#last = now();
  }

  /** Takes a token now when one is free and nobody is waiting (as take() would at once); false otherwise: then call take(). */
  tryTake(): boolean {
    this.#refill();
    if (this.#queue.length === 0 && this.#tokens >= 1) {
      this.#tokens -= 1;
      return true;
    }
    return false;
  }

  /** Resolves when a token is taken; rejects with the signal's reason on abort. */
  take(signal?: AbortSignal): Promise<void> {
    throwIfAborted(signal);
    this.#refill();
    if (this.#queue.length === 0 && this.#tokens >= 1) {
      this.#tokens -= 1;
      return Promise.resolve();
    }
    return enqueue(this.#queue, signal, () => this.#schedule());
  }

  #refill(): void {
    const t = this.#now();
    this.#tokens = Math.min(this.burst, this.#tokens + ((t - this.#last) * this.ratePerSec) / 1000);
    this.#last = t;
  }

  #schedule(): void {
    if (this.#timer || this.#queue.length === 0) return;
    this.#refill();
    const waitMs = Math.max(0, Math.ceil(((1 - this.#tokens) * 1000) / this.ratePerSec));
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#refill();
      // Stryker disable next-line EqualityOperator: >= and > differ only at tokens exactly 1 - 1e-9, which the refill arithmetic does not land on.
      while (this.#queue.length > 0 && this.#tokens >= 1 - 1e-9) {
        this.#tokens = Math.max(0, this.#tokens - 1);
        release(this.#queue.shift() as Waiter);
      }
      this.#schedule();
    }, waitMs);
  }
}

/** A limiter's wait as its onWait hears of it: `queued` callers wait (0: the wait is over), the next slot in `nextInMs`. */
export interface LimiterWait {
  queued: number;
  nextInMs: number | null;
}

/**
 * A sliding-window limiter for the upload endpoints (5 requests per 60 s per
 * key by default). A slot is held from `acquire()` until the returned release
 * function is called, and then for `windowMs` more: the service counts a
 * request when it arrives, which is never after we release it, so the
 * service's window never sees more than `limit` of ours.
 */
export class UploadLimiter {
  readonly limit: number;
  readonly windowMs: number;
  #inFlight = 0;
  #released: number[] = [];
  #queue: Waiter[] = [];
  #timer: NodeJS.Timeout | undefined;
  #now: () => number;
  #onWait: ((w: LimiterWait) => void) | undefined;
  /** The queue length last told to onWait (0: no wait going on). */
  #told = 0;
  /** Whether the last one told the time of the next slot. */
  // Stryker disable next-line BooleanLiteral: read only once something was told (#told > 0), which sets it first.
  #toldKnown = false;

  constructor(opts: { limit?: number; windowMs?: number; now?: () => number; onWait?: (w: LimiterWait) => void } = {}) {
    this.limit = opts.limit ?? 5;
    this.#onWait = opts.onWait;
    this.windowMs = opts.windowMs ?? 60_000;
    if (!Number.isInteger(this.limit) || this.limit < 1) throw new RangeError(`Expected limit to be an integer >= 1, got ${this.limit}`);
    if (!(this.windowMs >= 0) || !Number.isFinite(this.windowMs)) throw new RangeError(`Expected windowMs to be a finite number >= 0, got ${this.windowMs}`);
    this.#now = opts.now ?? (() => performance.now());
  }

  /** Waits for a free slot; call the returned function once the request has ended (success or not). */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    throwIfAborted(signal);
    // Stryker disable next-line ConditionalExpression,EqualityOperator: a caller who finds a slot free and nobody waiting is served at once by the queue's pump the same way; this path only skips the queue.
    if (this.#queue.length > 0 || !this.#free()) {
      try {
        await enqueue(this.#queue, signal, () => this.#pump());
      } catch (err) {
        this.#tell(); // an aborted waiter left the queue
        throw err;
      }
    } else this.#inFlight++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#inFlight--;
      this.#released.push(this.#now());
      this.#pump();
    };
  }

  #free(): boolean {
    const since = this.#now() - this.windowMs;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: on an empty list released[0] is undefined, and undefined <= since is false.
    while (this.#released.length > 0 && (this.#released[0] as number) <= since) this.#released.shift();
    return this.#inFlight + this.#released.length < this.limit;
  }

  #pump(): void {
    while (this.#queue.length > 0 && this.#free()) {
      this.#inFlight++;
      release(this.#queue.shift() as Waiter);
    }
    this.#tell();
    if (this.#queue.length === 0 || this.#timer) return;
    const oldest = this.#released[0];
    if (oldest === undefined) return; // every slot is in flight: the next release pumps
    const waitMs = Math.max(0, Math.ceil(oldest + this.windowMs - this.#now()) + 1);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#pump();
    }, waitMs);
  }

  /** Tells onWait when the queue changed: how many wait and when the next slot frees (null: when an upload in flight ends). */
  #tell(): void {
    const queued = this.#queue.length;
    const oldest = queued === 0 ? undefined : this.#released[0];
    // Told again when the queue's length changed, or the time of the next slot became known.
    if (!this.#onWait || (queued === this.#told && (oldest === undefined || this.#toldKnown))) return;
    this.#told = queued;
    this.#toldKnown = oldest !== undefined;
    this.#onWait({ queued, nextInMs: oldest === undefined ? null : Math.max(0, Math.ceil(oldest + this.windowMs - this.#now())) });
  }
}
