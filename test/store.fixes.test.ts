import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store, type JobInput } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

/** Audit fixes in the store (issue 4): every state change a sync makes goes through transition(). */
const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function fresh(): Store {
  const t = tempDir();
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  cleanups.push(t.cleanup);
  cleanups.push(() => store.close());
  store.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', true, false);
  return store;
}

const job = (id: string, hash = 'h1'): JobInput => ({ id, model: 'm', kind: 'submit', where: 'm.yaml:1', specHash: hash, spec: '{}', estimatedCredits: 2 });

function sync(store: Store, jobs: JobInput[]): number {
  store.beginSync();
  for (const j of jobs) store.syncJob(j);
  store.commitSync();
  return store.skipRemoved();
}

describe('manifest sync state changes', () => {
  it('a removed `exists` job becomes skipped like failed and expired ones; done and in-flight ones stay', () => {
    const store = fresh();
    sync(store, ['a', 'b', 'c', 'd', 'e'].map((id) => job(id)));
    store.drainSyncMoves();
    for (const id of ['a', 'b', 'c', 'd']) store.transition(id, 'pending', 'submitting');
    store.transition('a', 'submitting', 'exists', { last_error: '409' });
    store.transition('b', 'submitting', 'failed', { last_error: '400' });
    store.transition('c', 'submitting', 'uncertain');
    store.transition('d', 'submitting', 'done');
    expect(sync(store, [])).toBe(3);
    expect(['a', 'b', 'c', 'd', 'e'].map((id) => store.getJob(id)!.state)).toEqual(['skipped', 'skipped', 'uncertain', 'done', 'skipped']);
    expect(store.drainSyncMoves().map((m) => `${m.id}:${m.from}->${m.to}`)).toEqual(['a:exists->skipped', 'b:failed->skipped', 'e:pending->skipped']);
  });

  it('back into the manifest and changed specs are recorded moves; a rolled-back sync records none', () => {
    const store = fresh();
    sync(store, [job('a'), job('b')]);
    store.transition('b', 'pending', 'failed', { last_error: 'x' });
    sync(store, [job('b')]); // a removed
    store.drainSyncMoves();
    sync(store, [job('a'), job('b', 'h2')]);
    expect(store.drainSyncMoves().map((m) => `${m.id}:${m.from}->${m.to}`)).toEqual(['a:skipped->pending', 'b:failed->pending']);
    expect(store.getJob('b')!.spec_hash).toBe('h2');
    expect(store.getJob('b')!.last_error).toBeNull();
    store.beginSync();
    store.transition('a', 'pending', 'failed');
    store.syncJob(job('a', 'h3'));
    store.rollbackSync();
    expect(store.drainSyncMoves()).toEqual([]);
    expect(store.getJob('a')!.state).toBe('pending');
  });
});
