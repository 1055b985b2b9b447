import { describe, expect, it } from 'vitest';
import { checkPolicy, decide, delay, retryAfterMs, TokenBucket, UploadLimiter, withRetry, type RetryPolicy } from '../src/client/index.js';
import { AmbiguousSubmitError, ApiError, BadResponseError, NetworkError, UsageError } from '../src/errors.js';

const P: RetryPolicy = { baseMs: 1000, maxMs: 10_000, maxAttempts: 5 };

describe('delay', () => {
  it('full jitter: uniform in [0, base x 2^(attempt-1)], capped', () => {
    expect([1, 2, 3, 4].map((a) => delay(a, P, undefined, () => 1))).toEqual([1000, 2000, 4000, 8000]);
    expect(delay(5, P, undefined, () => 1)).toBe(10_000);
    expect(delay(30, P, undefined, () => 1)).toBe(10_000);
    expect(delay(3, P, undefined, () => 0.5)).toBe(2000);
    expect(delay(3, P, undefined, () => 0)).toBe(0);
  });

  it('decorrelated jitter: never below base, up to 1.5 x the step, capped', () => {
    const D: RetryPolicy = { ...P, jitter: 'decorrelated' };
    expect(delay(1, D, undefined, () => 0)).toBe(1000);
    expect(delay(3, D, undefined, () => 1)).toBe(6000);
    expect(delay(4, D, undefined, () => 1)).toBe(10_000);
    expect(delay(2, D, undefined, () => 0.5)).toBe(2000);
  });

  it('Retry-After wins over backoff and is capped at maxMs', () => {
    expect(delay(1, P, 3000, () => 0)).toBe(3000);
    expect(delay(4, P, 0, () => 1)).toBe(0);
    expect(delay(1, P, 3_600_000, () => 0)).toBe(10_000);
    expect(delay(2, P, null, () => 1)).toBe(2000);
  });
});

describe('retryAfterMs', () => {
  it('reads seconds and HTTP dates', () => {
    expect(retryAfterMs('2')).toBe(2000);
    expect(retryAfterMs(['0.5'])).toBe(500);
    expect(retryAfterMs('Sat, 21 Nov 2026 10:00:30 GMT', Date.parse('Sat, 21 Nov 2026 10:00:00 GMT'))).toBe(30_000);
    expect(retryAfterMs('Sat, 21 Nov 2026 09:00:00 GMT', Date.parse('Sat, 21 Nov 2026 10:00:00 GMT'))).toBe(0);
    expect(retryAfterMs(undefined)).toBeNull();
    expect(retryAfterMs('soon')).toBeNull();
  });
});

describe('decide: by class and status only', () => {
  const api = (s: number) => new ApiError(s, null, 'x');
  it.each([
    [api(429), 'retry', 'retry'],
    [api(500), 'retry', 'ambiguous'],
    [api(502), 'retry', 'ambiguous'],
    [api(503), 'retry', 'retry'],
    [api(504), 'retry', 'ambiguous'],
    [api(400), 'fail', 'fail'],
    [api(401), 'fail', 'fail'],
    [api(402), 'fail', 'fail'],
    [api(404), 'fail', 'fail'],
    [api(408), 'fail', 'fail'],
    [new NetworkError('refused', false), 'retry', 'retry'],
    [new NetworkError('reset', true), 'retry', 'ambiguous'],
    [new BadResponseError(200, 'no task_id'), 'fail', 'ambiguous'],
    [new UsageError('x'), 'fail', 'fail'],
    [new Error('HTTP 503 service unavailable'), 'fail', 'fail'],
  ] as const)('%s: GET %s, POST %s', (err, get, post) => {
    expect(decide(err, 'GET')).toBe(get);
    expect(decide(err, 'POST')).toBe(post);
    // An upload is retried like a GET: a second temporary copy is harmless.
    expect(decide(err, 'UPLOAD')).toBe(get);
  });
});

describe('withRetry', () => {
  const fast: RetryPolicy = { baseMs: 1, maxMs: 2, maxAttempts: 3 };

  it('retries then returns, reporting each retry', async () => {
    const seen: number[] = [];
    const r = await withRetry(
      async (n) => {
        if (n < 3) throw new ApiError(502, 'upstream_error', 'bad gateway');
        return 'ok';
      },
      { policy: fast, method: 'GET', onRetry: (i) => seen.push(i.attempt) },
    );
    expect(r).toBe('ok');
    expect(seen).toEqual([1, 2]);
  });

  it('throws the last error when tries run out', async () => {
    let tries = 0;
    const p = withRetry(async () => {
      tries++;
      throw new NetworkError('reset', true);
    }, { policy: fast, method: 'GET' });
    await expect(p).rejects.toBeInstanceOf(NetworkError);
    expect(tries).toBe(3);
  });

  it('turns an unknown submit outcome into AmbiguousSubmitError at once', async () => {
    let tries = 0;
    const p = withRetry(async () => {
      tries++;
      throw new ApiError(504, null, 'gateway timeout');
    }, { policy: fast, method: 'POST', submit: true });
    await expect(p).rejects.toMatchObject({ code: 'GB_SUBMIT_UNCERTAIN', status: 504 });
    await expect(p).rejects.toBeInstanceOf(AmbiguousSubmitError);
    expect(tries).toBe(1);
  });

  it('a non-submit POST rethrows the error itself', async () => {
    const err = new NetworkError('reset', true);
    await expect(withRetry(async () => { throw err; }, { policy: fast, method: 'POST' })).rejects.toBe(err);
  });

  it('never retries an error it does not know', async () => {
    let tries = 0;
    await expect(withRetry(async () => { tries++; throw new TypeError('503'); }, { policy: fast, method: 'GET' })).rejects.toBeInstanceOf(TypeError);
    expect(tries).toBe(1);
  });

  it('waits at least baseMs before retrying a 429 that has no Retry-After', async () => {
    const delays: number[] = [];
    let n = 0;
    await withRetry(async () => {
      if (n++ === 0) throw new ApiError(429, 'rate_limit_error', 'slow down');
      return 1;
    }, { policy: { baseMs: 20, maxMs: 100, maxAttempts: 2 }, method: 'GET', random: () => 0, onRetry: (i) => delays.push(i.delayMs) });
    expect(delays).toEqual([20]);
  });

  it('does not start when already aborted', async () => {
    const ac = new AbortController();
    const reason = new Error('stop');
    ac.abort(reason);
    await expect(withRetry(async () => 1, { policy: fast, method: 'GET', signal: ac.signal })).rejects.toBe(reason);
  });
});

describe('checkPolicy', () => {
  it('names the field, the rule and the value', () => {
    expect(() => checkPolicy({ baseMs: 1, maxMs: 1, maxAttempts: 0 })).toThrow('Expected policy.maxAttempts to be an integer >= 1, got 0');
    expect(() => checkPolicy({ baseMs: -1, maxMs: 1, maxAttempts: 1 })).toThrow('policy.baseMs');
  });
});

describe('TokenBucket', () => {
  it('serves waiters in order at the rate, and an abort leaves the queue', async () => {
    // 2 a second: the second waiter waits 500 ms, so the abort (at once) always finds it waiting, however loaded
    // the machine (at 100 a second a token could refill before the abort: [1, 2, 3]).
    const bucket = new TokenBucket(2);
    const order: number[] = [];
    const ac = new AbortController();
    const a = bucket.take().then(() => order.push(1));
    const b = bucket.take(ac.signal).then(() => order.push(2), () => order.push(-2));
    const c = bucket.take().then(() => order.push(3));
    ac.abort();
    await Promise.all([a, b, c]);
    expect(order).toEqual([1, -2, 3]);
  });

  it('rejects bad arguments with the expected and actual value', () => {
    expect(() => new TokenBucket(0)).toThrow('Expected ratePerSec to be a finite number > 0, got 0');
  });
});

describe('UploadLimiter', () => {
  it('holds a slot until release plus the window', async () => {
    let now = 0;
    const lim = new UploadLimiter({ limit: 2, windowMs: 1000, now: () => now });
    const r1 = await lim.acquire();
    const r2 = await lim.acquire();
    let third = false;
    const p3 = lim.acquire().then((r) => ((third = true), r));
    await new Promise((r) => setTimeout(r, 5));
    expect(third).toBe(false);
    r1();
    // Released at now=0: the slot frees at now=1000, not before.
    await new Promise((r) => setTimeout(r, 5));
    expect(third).toBe(false);
    now = 1001;
    r2();
    (await p3)();
    expect(third).toBe(true);
  });

  it('an aborted waiter leaves the queue with the reason', async () => {
    const lim = new UploadLimiter({ limit: 1, windowMs: 60_000 });
    await lim.acquire();
    const ac = new AbortController();
    const p = lim.acquire(ac.signal);
    ac.abort(new Error('stopping'));
    await expect(p).rejects.toThrow('stopping');
  });
});
