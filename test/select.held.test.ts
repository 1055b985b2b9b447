import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { selectPending } from '../src/engine/prepare/select.js';
import { Store } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Jobs held by a room (a credit cap, the balance) are listed in manifest order, each once, in a list that grows in
 * place: a run whose whole manifest is over the cap (`--max-credits 0` on 100,000 jobs) held every job, and each
 * job copied the list before it (145 s of CPU and 335 MB of peak RSS on this 2-core machine; 20 s and 204 MB once
 * the list grows in place, the sync and the reports included).
 */
const N = 60_000;
const t = tempDir('genbatch-select-held-');
afterAll(() => t.cleanup());

it(`${N} pending jobs over a room of 0 credits are all held, in manifest order, in linear time`, () => {
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  try {
    store.openRun(join(t.dir, 'm.csv'), t.dir, 'http://service.invalid', false, false);
    store.db.transaction(() => {
      for (let i = 0; i < N; i++) store.syncJob({ id: `j${i}`, model: 'alpha-image-2', kind: 'submit', where: `m.csv:${i + 2}, row ${i + 1}`, specHash: 'h', spec: '{}', estimatedCredits: 2 });
    })();
    const t0 = performance.now();
    const sel = selectPending(store, null, null, [{ credits: 0, kind: 'cap', reason: 'over --max-credits 0' }]);
    const ms = performance.now() - t0;
    expect(sel.ids.size).toBe(0);
    expect(sel.heldBy).toEqual({ balance: 0, cap: N });
    const held = sel.held.get('over --max-credits 0')!;
    expect(held).toHaveLength(N);
    expect(held[0]).toBe('j0');
    expect(held[N - 1]).toBe(`j${N - 1}`);
    expect(sel.leftOut).toEqual({ jobs: N, known: 2 * N, unknown: 0 });
    // Linear: ~0.1 s here; a copy of the list per job took 53 s for 60,000 (the bound leaves room for a loaded CI machine).
    expect(ms).toBeLessThan(4000);
  } finally {
    store.close();
  }
}, 60_000);
