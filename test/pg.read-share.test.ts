import { describe, expect, it } from 'vitest';
import { ReadShare } from '../src/store/pg/read-share.js';

/** A worker's share of the key's status-read rate (src/store/pg/read-share.ts), on a clock the test moves. */
describe('ReadShare', () => {
  it('spaces the reads by rate / workers, the first one a spacing after the start; an idle worker does not save reads up', async () => {
    let t = 1_000;
    const share = new ReadShare(1_000_000, () => t); // 1 us apart: the real sleeps are too short to matter
    share.setWorkers(4);
    expect(share.perSec).toBe(250_000);
    share.setWorkers(0.5);
    expect(share.perSec).toBe(1_000_000);
    const slow = new ReadShare(10, () => t);
    slow.setWorkers(2);
    expect(slow.perSec).toBe(5);
    const stop = new AbortController();
    // The first read is due 100 ms after the start (made with 1 worker): it waits; abort ends the wait.
    const first = slow.take(stop.signal);
    stop.abort(new Error('stopped'));
    await expect(first).rejects.toThrow('stopped');
    // Long idle: the next read is at once, the one after it a whole spacing (200 ms with 2 workers) later.
    t += 60_000;
    const at = Date.now();
    await slow.take();
    expect(Date.now() - at).toBeLessThan(50);
    const second = slow.take(AbortSignal.timeout(20));
    await expect(second).rejects.toBeDefined();
  });

  it('refuses a rate that is not a finite number > 0', () => {
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => new ReadShare(bad)).toThrow(RangeError);
  });
});
