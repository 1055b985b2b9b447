import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store, type JobInput } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

/** Descendants skipped because a job was uncertain come back when it leaves uncertain with results to come (store level). */
const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function fresh(): Store {
  const t = tempDir('genbatch-graph-revive-');
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  cleanups.push(t.cleanup);
  cleanups.push(() => store.close());
  store.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', true, false);
  return store;
}
const job = (id: string): JobInput => ({ id, model: 'm', kind: 'submit', where: `m.yaml:${id}`, specHash: 'h', spec: '{}', estimatedCredits: 2 });

/** a <- b <- c, and y <- d, a <- d (d waits for two parents). */
function graph(store: Store): void {
  store.beginSync();
  for (const id of ['a', 'b', 'c', 'y', 'd']) store.syncJob(job(id));
  store.graph.setManifestLinks(
    new Map([
      ['b', { parents: ['a'] }],
      ['c', { parents: ['b'] }],
      ['d', { parents: ['a', 'y'] }],
    ]),
  );
  store.commitSync();
}
const states = (store: Store) => Object.fromEntries(['a', 'b', 'c', 'y', 'd'].map((id) => [id, `${store.getJob(id)!.state} ${store.getJob(id)!.last_error ?? ''}`.trim()]));

describe('a job leaving uncertain', () => {
  it('adopted (submitted): its descendants skipped for it are pending again; one also below a failed parent is skipped again, naming it', () => {
    const store = fresh();
    graph(store);
    store.transition('a', 'pending', 'submitting');
    store.transition('a', 'submitting', 'uncertain', { last_error: 'stopped' });
    expect(store.graph.drainSkipped().map((s) => s.id).sort()).toEqual(['b', 'c', 'd']);
    store.transition('y', 'pending', 'submitting');
    store.transition('y', 'submitting', 'failed', { last_error: 'bad' });
    store.transition('a', 'uncertain', 'submitted', { task_id: 'task-a', last_error: 'task adopted from a late completion callback' });
    expect(store.graph.drainRevived().sort()).toEqual(['b', 'c', 'd']);
    expect(store.graph.drainSkipped()).toEqual([{ id: 'd', reason: 'skipped because job y is failed: bad' }]);
    const s = states(store);
    expect([s.b, s.c, s.d]).toEqual(['pending', 'pending', 'skipped skipped because job y is failed: bad']);
  });

  it('resubmitted (pending): the same; a job skipped for another reason stays skipped', () => {
    const store = fresh();
    graph(store);
    store.transition('y', 'pending', 'submitting');
    store.transition('y', 'submitting', 'failed', { last_error: 'bad' });
    store.transition('a', 'pending', 'submitting');
    store.transition('a', 'submitting', 'uncertain', { last_error: 'stopped' });
    store.transition('a', 'uncertain', 'pending', { last_error: 'resubmitted' });
    expect(store.graph.drainRevived().sort()).toEqual(['b', 'c']);
    const s = states(store);
    expect([s.b, s.c, s.d]).toEqual(['pending', 'pending', 'skipped skipped because job y is failed: bad']);
  });
});

describe('a failed or expired job sent again (run --redo: Store.redo)', () => {
  it('its descendants skipped for it are pending again, one skipped for another failed parent stays skipped until that one is sent again too; its results and file rows are cleared, attempts kept', () => {
    const store = fresh();
    graph(store);
    store.transition('y', 'pending', 'submitting', { attemptsInc: 1 });
    store.transition('y', 'submitting', 'failed', { last_error: 'bad' });
    store.transition('a', 'pending', 'submitting', { attemptsInc: 1 });
    store.transition('a', 'submitting', 'submitted', { task_id: 'task-a' });
    store.transition('a', 'submitted', 'downloading', { result: '{"files":[]}' });
    store.addFiles('a', [{ idx: 0, name: 'a.png', url: 'http://x/a.png', type: 'image', content_type: null, expected_size: null, expires_at: null }]);
    store.transition('a', 'downloading', 'expired', { last_error: 'gone (410)' });
    // d was skipped when y failed (first): it names y.
    expect(store.graph.drainSkipped().map((s) => s.id).sort()).toEqual(['b', 'c', 'd']);
    store.redo('a', 'expired', 'sent again (--redo expired)');
    expect(store.graph.drainRevived().sort()).toEqual(['b', 'c']);
    expect(store.graph.drainSkipped()).toEqual([]);
    const a = store.getJob('a')!;
    expect([a.state, a.task_id, a.result, a.attempts, a.last_error]).toEqual(['pending', null, null, 1, 'sent again (--redo expired)']);
    expect(store.filesOf('a')).toEqual([]);
    const s = states(store);
    expect([s.b, s.c, s.d]).toEqual(['pending', 'pending', 'skipped skipped because job y is failed: bad']);
    // y sent again too: d, skipped for y now, comes back.
    store.redo('y', 'failed', 'sent again (--redo failed)');
    expect(store.graph.drainRevived()).toEqual(['d']);
    expect(states(store).d).toBe('pending');
  });
});
