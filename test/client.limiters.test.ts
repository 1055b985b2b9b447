import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TokenBucket, UploadLimiter, type LimiterWait } from '../src/client/index.js';

/**
 * The client's limiters (src/client/limiters.ts), on a fake clock: the upload window (5 a minute per key, a
 * slot held from acquire until release plus the window, so the service never sees more than the limit of
 * ours) and the status-read token bucket. Each test moves the clock itself, so no outcome depends on load.
 */

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

const clock = (): number => Date.now();
/** Whether p has settled once the microtasks queued so far have run (no timer is run). */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 20; i++) await Promise.resolve();
  return done;
}

describe('TokenBucket', () => {
  it('refuses a rate or burst that is not a finite positive number, with the expected and the actual value', () => {
    for (const rate of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => new TokenBucket(rate)).toThrow(`Expected ratePerSec to be a finite number > 0, got ${rate}`);
    for (const burst of [0.5, 0, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => new TokenBucket(1, burst)).toThrow(`Expected burst to be a finite number >= 1, got ${burst}`);
    expect(new TokenBucket(0.1, 1)).toMatchObject({ ratePerSec: 0.1, burst: 1 });
    expect(new TokenBucket(3).burst).toBe(1);
  });

  it('starts full: a burst of 2 gives two tokens at once, then one per 1/rate', () => {
    let now = 0;
    const bucket = new TokenBucket(4, 2, () => now);
    expect([bucket.tryTake(), bucket.tryTake(), bucket.tryTake()]).toEqual([true, true, false]);
    now = 249;
    expect(bucket.tryTake()).toBe(false);
    now = 250;
    expect(bucket.tryTake()).toBe(true);
    expect(bucket.tryTake()).toBe(false);
  });

  it('holds at most its burst however long it was idle', () => {
    let now = 0;
    const bucket = new TokenBucket(10, 2, () => now);
    now = 60_000;
    expect([bucket.tryTake(), bucket.tryTake(), bucket.tryTake()]).toEqual([true, true, false]);
  });

  it('take() resolves at once with a free token, and a waiter gets the next token 1/rate later, not before', async () => {
    const bucket = new TokenBucket(4, 1, clock);
    expect(await settled(bucket.take())).toBe(true);
    const second = bucket.take();
    await vi.advanceTimersByTimeAsync(249);
    expect(await settled(second)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(second)).toBe(true);
  });

  it('serves waiters first come, first served: tryTake() and take() never jump a waiter, even with a token refilled', async () => {
    let now = 0;
    const bucket = new TokenBucket(1, 1, () => now);
    await bucket.take();
    const order: string[] = [];
    const first = bucket.take().then(() => order.push('first'));
    now = 5_000; // the token is back, but the waiter's timer has not fired yet
    expect(bucket.tryTake()).toBe(false);
    const second = bucket.take().then(() => order.push('second'));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(order).toEqual(['first']);
    now = 6_000;
    await vi.advanceTimersByTimeAsync(1_000);
    await Promise.all([first, second]);
    expect(order).toEqual(['first', 'second']);
  });

  it('releases one waiter per token: three waiters at 2 a second take 1.5 s', async () => {
    const bucket = new TokenBucket(2, 1, clock);
    await bucket.take();
    const done: number[] = [];
    const waiters = [1, 2, 3].map((i) => bucket.take().then(() => done.push(i)));
    await vi.advanceTimersByTimeAsync(500);
    expect(done).toEqual([1]);
    await vi.advanceTimersByTimeAsync(499);
    expect(done).toEqual([1]);
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toEqual([1, 2]);
    await vi.advanceTimersByTimeAsync(500);
    await Promise.all(waiters);
    expect(done).toEqual([1, 2, 3]);
  });

  it('a late timer releases as many waiters as the tokens refilled, up to the burst', async () => {
    let now = 0;
    const bucket = new TokenBucket(1, 3, () => now);
    expect([bucket.tryTake(), bucket.tryTake(), bucket.tryTake()]).toEqual([true, true, true]);
    const done: number[] = [];
    const waiters = [1, 2, 3, 4].map((i) => bucket.take().then(() => done.push(i)));
    now = 10_000; // the machine was busy: the timer fires late, with the bucket full again
    await vi.advanceTimersByTimeAsync(1_000);
    expect(done).toEqual([1, 2, 3]);
    now = 11_000;
    await vi.advanceTimersByTimeAsync(1_000);
    await Promise.all(waiters);
    expect(done).toEqual([1, 2, 3, 4]);
  });

  it('a waiter that comes when half a token has refilled waits the other half', async () => {
    const bucket = new TokenBucket(1, 1, clock);
    await bucket.take();
    await vi.advanceTimersByTimeAsync(500);
    const waiter = bucket.take();
    await vi.advanceTimersByTimeAsync(499);
    expect(await settled(waiter)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(waiter)).toBe(true);
  });

  it('a late timer that finds more tokens than waiters keeps the rest for later callers', async () => {
    let now = 0;
    const bucket = new TokenBucket(1, 3, () => now);
    expect([bucket.tryTake(), bucket.tryTake(), bucket.tryTake()]).toEqual([true, true, true]);
    const waiter = bucket.take();
    now = 10_000;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await settled(waiter)).toBe(true);
    expect([bucket.tryTake(), bucket.tryTake(), bucket.tryTake()]).toEqual([true, true, false]);
  });

  it('keeps one timer at most, and none once nobody waits', async () => {
    const bucket = new TokenBucket(10, 1, clock);
    await bucket.take();
    expect(vi.getTimerCount()).toBe(0);
    const waiters = [bucket.take(), bucket.take(), bucket.take()];
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(200);
    await Promise.all(waiters);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a waiter served leaves no listener on its signal (a run takes every token with one signal)', async () => {
    const bucket = new TokenBucket(10, 1, clock);
    const run = new AbortController();
    await bucket.take(run.signal);
    const waiters = [1, 2, 3].map(() => bucket.take(run.signal));
    expect(getEventListeners(run.signal, 'abort')).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(300);
    await Promise.all(waiters);
    expect(getEventListeners(run.signal, 'abort')).toHaveLength(0);
  });

  it('an aborted waiter leaves the queue with its reason, and the one behind it takes its token', async () => {
    const bucket = new TokenBucket(1, 1, clock);
    await bucket.take();
    const stop = new AbortController();
    const aborted = bucket.take(stop.signal);
    const next = bucket.take();
    const reason = new Error('stopping');
    stop.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await settled(next)).toBe(true);
  });

  it('a signal already aborted throws its reason at once and takes no token', () => {
    const bucket = new TokenBucket(1, 1, clock);
    const reason = new Error('stopped before');
    expect(() => bucket.take(AbortSignal.abort(reason))).toThrow(reason);
    expect(bucket.tryTake()).toBe(true);
  });
});

describe('UploadLimiter', () => {
  it('defaults to 5 per 60 s, and refuses a limit or window that cannot be kept', () => {
    const lim = new UploadLimiter();
    expect([lim.limit, lim.windowMs]).toEqual([5, 60_000]);
    for (const limit of [0, -1, 1.5, Number.NaN]) expect(() => new UploadLimiter({ limit })).toThrow(`Expected limit to be an integer >= 1, got ${limit}`);
    for (const windowMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => new UploadLimiter({ windowMs })).toThrow(`Expected windowMs to be a finite number >= 0, got ${windowMs}`);
    expect(new UploadLimiter({ limit: 1, windowMs: 0 })).toMatchObject({ limit: 1, windowMs: 0 });
  });

  it('gives 5 slots at once per key by default; the 6th waits until a slot was released 60 s ago', async () => {
    const lim = new UploadLimiter({ now: clock });
    const releases = await Promise.all([1, 2, 3, 4, 5].map(() => lim.acquire()));
    const sixth = lim.acquire();
    await vi.advanceTimersByTimeAsync(120_000);
    expect(await settled(sixth)).toBe(false); // every slot is still in flight
    releases[0]!();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await settled(sixth)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(sixth)).toBe(true);
  });

  it('frees a released slot exactly one window after its release, never before', async () => {
    let now = 0;
    const lim = new UploadLimiter({ limit: 1, windowMs: 1_000, now: () => now });
    (await lim.acquire())();
    now = 999;
    expect(await settled(lim.acquire())).toBe(false);
    const lim2 = new UploadLimiter({ limit: 1, windowMs: 1_000, now: () => now });
    now = 0;
    (await lim2.acquire())();
    now = 1_000;
    expect(await settled(lim2.acquire())).toBe(true);
  });

  it('counts the slots released within the window with those in flight', async () => {
    let now = 0;
    const lim = new UploadLimiter({ limit: 3, windowMs: 1_000, now: () => now });
    (await lim.acquire())();
    now = 500;
    (await lim.acquire())();
    await lim.acquire();
    expect(await settled(lim.acquire())).toBe(false);
  });

  it('a release called twice frees one slot', async () => {
    let now = 0;
    const lim = new UploadLimiter({ limit: 2, windowMs: 0, now: () => now });
    const a = await lim.acquire();
    await lim.acquire();
    now = 10;
    a();
    a();
    now = 20;
    await lim.acquire();
    expect(await settled(lim.acquire())).toBe(false);
  });

  it('serves waiters first come, first served: a caller never jumps the queue, even when a slot freed before the timer fired', async () => {
    let now = 0;
    const lim = new UploadLimiter({ limit: 1, windowMs: 1_000, now: () => now });
    (await lim.acquire())();
    const order: string[] = [];
    const first = lim.acquire().then((r) => (order.push('first'), r));
    now = 5_000; // the slot is free, but the waiter's timer has not fired yet
    const second = lim.acquire().then((r) => (order.push('second'), r));
    await vi.advanceTimersByTimeAsync(1_001);
    expect(order).toEqual(['first']);
    (await first)();
    now = 7_000;
    await vi.advanceTimersByTimeAsync(1_001);
    await second;
    expect(order).toEqual(['first', 'second']);
  });

  it('releases every waiter the freed slots allow at once', async () => {
    let now = 0;
    const lim = new UploadLimiter({ limit: 2, windowMs: 1_000, now: () => now });
    const held = [await lim.acquire(), await lim.acquire()];
    const waiting = [lim.acquire(), lim.acquire(), lim.acquire()];
    held.forEach((r) => r());
    now = 1_000;
    await vi.advanceTimersByTimeAsync(1_001);
    expect(await Promise.all(waiting.map(settled))).toEqual([true, true, false]);
  });

  it('sets no timer while every slot is in flight: the next release wakes the queue', async () => {
    const lim = new UploadLimiter({ limit: 1, windowMs: 1_000, now: clock });
    const r = await lim.acquire();
    const waiter = lim.acquire();
    expect(vi.getTimerCount()).toBe(0);
    r();
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(1_001);
    expect(await settled(waiter)).toBe(true);
  });

  it('keeps one timer at most, and none while nobody waits', async () => {
    const lim = new UploadLimiter({ limit: 1, windowMs: 1_000, now: clock });
    (await lim.acquire())();
    expect(vi.getTimerCount()).toBe(0);
    const waiters = [lim.acquire(), lim.acquire()];
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(1_001);
    (await waiters[0]!)();
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(1_001);
    (await waiters[1]!)();
    await vi.advanceTimersByTimeAsync(1_001);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('an aborted waiter leaves the queue with its reason, and the one behind it gets the slot', async () => {
    const lim = new UploadLimiter({ limit: 1, windowMs: 1_000, now: clock });
    const r = await lim.acquire();
    const stop = new AbortController();
    const aborted = lim.acquire(stop.signal);
    const next = lim.acquire();
    const reason = new Error('stopping');
    stop.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    r();
    await vi.advanceTimersByTimeAsync(1_001);
    expect(await settled(next)).toBe(true);
  });

  it('a signal already aborted rejects with its reason and holds no slot', async () => {
    const lim = new UploadLimiter({ limit: 1, windowMs: 1_000, now: clock });
    const reason = new Error('stopped before');
    await expect(lim.acquire(AbortSignal.abort(reason))).rejects.toBe(reason);
    expect(await settled(lim.acquire())).toBe(true);
  });
});

describe('UploadLimiter onWait', () => {
  function heard(limit: number, windowMs = 1_000): { lim: UploadLimiter; told: LimiterWait[] } {
    const told: LimiterWait[] = [];
    return { lim: new UploadLimiter({ limit, windowMs, now: clock, onWait: (w) => told.push(w) }), told };
  }

  it('tells nothing while no caller waits', async () => {
    const { lim, told } = heard(2);
    const r = await lim.acquire();
    r();
    (await lim.acquire())();
    expect(told).toEqual([]);
  });

  it('tells the time of the next slot from the oldest release, and again when the queue changes', async () => {
    const { lim, told } = heard(1);
    (await lim.acquire())();
    await vi.advanceTimersByTimeAsync(400);
    const a = lim.acquire();
    expect(told).toEqual([{ queued: 1, nextInMs: 600 }]);
    const b = lim.acquire();
    expect(told.at(-1)).toEqual({ queued: 2, nextInMs: 600 });
    await vi.advanceTimersByTimeAsync(601);
    (await a)();
    expect(told.at(-2)).toEqual({ queued: 1, nextInMs: null });
    expect(told.at(-1)).toEqual({ queued: 1, nextInMs: 1_000 });
    await vi.advanceTimersByTimeAsync(1_001);
    (await b)();
    expect(told.at(-1)).toEqual({ queued: 0, nextInMs: null });
  });

  it('is told once per change, not again while the same queue waits for the same slot', async () => {
    const { lim, told } = heard(1);
    const r = await lim.acquire();
    const a = lim.acquire();
    expect(told).toEqual([{ queued: 1, nextInMs: null }]);
    r(); // the next slot's time is now known: told again with the same queue
    expect(told).toEqual([
      { queued: 1, nextInMs: null },
      { queued: 1, nextInMs: 1_000 },
    ]);
    await vi.advanceTimersByTimeAsync(1_001);
    await a;
    expect(told.at(-1)).toEqual({ queued: 0, nextInMs: null });
    expect(told).toHaveLength(3);
  });

  it('a waiter that gives up is told: the queue shorter, or the wait over when it was the last', async () => {
    const { lim, told } = heard(1);
    await lim.acquire();
    const first = new AbortController();
    const second = new AbortController();
    const a = lim.acquire(first.signal);
    const b = lim.acquire(second.signal);
    first.abort();
    await expect(a).rejects.toBeDefined();
    expect(told).toEqual([
      { queued: 1, nextInMs: null },
      { queued: 2, nextInMs: null },
      { queued: 1, nextInMs: null },
    ]);
    second.abort();
    await expect(b).rejects.toBeDefined();
    expect(told.at(-1)).toEqual({ queued: 0, nextInMs: null });
    expect(told).toHaveLength(4);
  });

  it('the timer that finds the slot still taken tells nothing new', async () => {
    let now = 0;
    const told: LimiterWait[] = [];
    const lim = new UploadLimiter({ limit: 1, windowMs: 1_000, now: () => now, onWait: (w) => told.push(w) });
    (await lim.acquire())();
    const a = lim.acquire();
    expect(told).toEqual([{ queued: 1, nextInMs: 1_000 }]);
    now = 500; // the clock lags the timer: the slot is not free when it fires
    await vi.advanceTimersByTimeAsync(1_001);
    expect(told).toEqual([{ queued: 1, nextInMs: 1_000 }]);
    now = 1_000;
    await vi.advanceTimersByTimeAsync(1_000);
    await a;
    expect(told.at(-1)).toEqual({ queued: 0, nextInMs: null });
  });
});
