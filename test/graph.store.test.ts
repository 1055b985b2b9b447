import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TransitionError } from '../src/errors.js';
import { Store, type ChildInput, type JobInput } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function fresh(): Store {
  const t = tempDir('genbatch-graph-store-');
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  cleanups.push(t.cleanup);
  cleanups.push(() => store.close());
  store.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', true, false);
  return store;
}

const job = (id: string, kind = 'submit'): JobInput => ({ id, model: 'm', kind, where: `m.yaml:${id}`, specHash: 'h', spec: '{}', estimatedCredits: 2 });
const child = (id: string, parents: string[]): ChildInput => ({ ...job(id), parents });

/** a <- b <- c, a <- t (for_each), x alone. */
function chain(store: Store): void {
  store.beginSync();
  for (const id of ['a', 'b', 'c', 'x']) store.syncJob(job(id));
  store.syncJob({ ...job('t', 'fanout'), estimatedCredits: 4 });
  store.graph.setManifestLinks(
    new Map([
      ['b', { parents: ['a'] }],
      ['c', { parents: ['b'] }],
      ['t', { parents: ['a'] }],
    ]),
  );
  store.commitSync();
}

function finish(store: Store, id: string): void {
  store.transition(id, 'pending', 'submitting');
  store.transition(id, 'submitting', 'submitted', { task_id: `task-${id}` });
  store.transition(id, 'submitted', 'downloading');
  store.transition(id, 'downloading', 'done');
}

const ready = (store: Store) => store.nextPending(0, 100).map((r) => r.id);

describe('job graph in the store', () => {
  it('hands out a job only when every parent is done', () => {
    const store = fresh();
    chain(store);
    expect(ready(store)).toEqual(['a', 'x']);
    finish(store, 'a');
    expect(ready(store)).toEqual(['b', 'x', 't']);
    expect(store.graph.firstPendingChild('a')).toBe(2);
    finish(store, 'b');
    expect(ready(store)).toEqual(['c', 'x', 't']);
  });

  it('a failed parent skips exactly its pending descendants, in the same transition, naming the first job', () => {
    const store = fresh();
    chain(store);
    finish(store, 'x');
    store.transition('a', 'pending', 'submitting');
    store.transition('a', 'submitting', 'failed', { last_error: 'content policy violation' });
    const states = Object.fromEntries([...store.allJobs()].map((r) => [r.id, [r.state, r.last_error]]));
    expect(states).toEqual({
      a: ['failed', 'content policy violation'],
      b: ['skipped', 'skipped because job a is failed: content policy violation'],
      c: ['skipped', 'skipped because job a is failed: content policy violation'],
      x: ['done', null],
      t: ['skipped', 'skipped because job a is failed: content policy violation'],
    });
    expect(store.graph.drainSkipped().map((s) => s.id)).toEqual(['b', 't', 'c']);
    expect(store.graph.drainSkipped()).toEqual([]);
  });

  it('settle skips pending jobs under a parent that ended without results (a resumed run)', () => {
    const store = fresh();
    chain(store);
    store.transition('a', 'pending', 'submitting');
    store.transition('a', 'submitting', 'exists', { last_error: 'HTTP 409 conflict_error: a persona already exists' });
    // A sync brings graph-skipped jobs back to pending; settle skips them again.
    store.beginSync();
    for (const id of ['b', 'c', 't']) store.syncJob(job(id, id === 't' ? 'fanout' : 'submit'));
    store.commitSync();
    store.graph.settle();
    expect(store.getJob('c')!.state).toBe('skipped');
    expect(store.getJob('c')!.last_error).toBe('skipped because job a is exists: HTTP 409 conflict_error: a persona already exists');
  });

  it('makes for_each children once: inserted with the for_each job moving to done, never twice', () => {
    const store = fresh();
    chain(store);
    finish(store, 'a');
    const made = store.graph.expand('t', [child('t.0', ['a']), child('t.1', ['a'])], '2 job(s)');
    expect(made).toEqual(['t.0', 't.1']);
    expect(store.getJob('t')!.state).toBe('done');
    expect(() => store.graph.expand('t', [child('t.0', ['a']), child('t.2', ['a'])], 'again')).toThrow(TransitionError);
    expect(store.getJob('t.2')).toBeUndefined();
    expect(ready(store)).toEqual(['b', 'x', 't.0', 't.1']);
    // The done for_each row leaves the estimate; its children count.
    expect(store.estimate().known).toBe(2 * 6);
    // Children are not "removed from the manifest" while their for_each job is in it.
    store.beginSync();
    for (const id of ['a', 'b', 'c', 'x', 't']) store.syncJob(id === 't' ? { ...job('t', 'fanout'), estimatedCredits: 4 } : job(id));
    store.commitSync();
    expect(store.skipRemoved()).toBe(0);
    store.beginSync();
    for (const id of ['a', 'b', 'c', 'x']) store.syncJob(job(id));
    store.commitSync();
    expect(store.skipRemoved()).toBe(2);
    expect(store.getJob('t.0')!.state).toBe('skipped');
  });

  it('a finished job whose spec changed makes its descendants again: finished ones reset, for_each children removed', () => {
    const store = fresh();
    chain(store);
    for (const id of ['a', 'b', 'c']) finish(store, id);
    store.graph.expand('t', [child('t.0', ['a']), child('t.1', ['a'])], '2 job(s)');
    finish(store, 't.0');
    store.transition('t.1', 'pending', 'submitting');
    store.transition('t.1', 'submitting', 'submitted', { task_id: 'in-flight' });
    store.beginSync();
    expect(store.syncJob({ ...job('a'), specHash: 'h2' })).toBe('changed');
    for (const id of ['b', 'c', 'x']) expect(store.syncJob(job(id))).toBe('unchanged');
    store.commitSync();
    const rows = Object.fromEntries([...store.allJobs()].map((r) => [r.id, [r.state, r.task_id, r.last_error]]));
    expect(rows).toEqual({
      a: ['pending', null, null],
      b: ['pending', null, 'made again: job a changed'],
      c: ['pending', null, 'made again: job a changed'],
      x: ['pending', null, null],
      // A child in flight: the for_each job and its children stay as they are (the new children would take their ids),
      // and a later sync makes them again from the new list (the hash no longer matches the manifest's).
      t: ['done', null, null],
      't.0': ['done', 'task-t.0', null],
      't.1': ['submitted', 'in-flight', null],
    });
    expect(store.getJob('t')!.spec_hash).toBe('rerun:h');
    expect(store.graph.drainDeferred()).toBe(1);
    // Once the child in flight is finished, the next sync makes the for_each job again: every old child removed.
    store.transition('t.1', 'submitted', 'downloading');
    store.transition('t.1', 'downloading', 'done');
    store.beginSync();
    expect(store.syncJob({ ...job('t', 'fanout'), estimatedCredits: 4 })).toBe('changed');
    store.commitSync();
    expect(store.getJob('t')).toMatchObject({ state: 'pending', spec_hash: 'h' });
    expect(store.getJob('t.0')).toBeUndefined();
    expect(store.getJob('t.1')).toBeUndefined();
  });
});
