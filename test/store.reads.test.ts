import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { TransitionError } from '../src/errors.js';
import { JOB_STATES, Store, nowIso, type JobInput } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The store's reads build row objects from raw (array) rows, and its
 * transactions use statements prepared once: both must give exactly what
 * better-sqlite3's named rows (`SELECT *`) and db.transaction gave.
 */

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

const job = (id: string, i: number): JobInput => ({
  id,
  model: i % 2 ? 'alpha-image-2' : 'm',
  kind: i % 5 === 0 ? 'chat' : 'submit',
  where: `m.yaml:${i}`,
  specHash: `h${i}`,
  spec: JSON.stringify({ model: 'm', input: { prompt: `p ${i} \u00e9\u{1F600}` }, refs: [] }),
  estimatedCredits: i % 3 === 0 ? null : i * 0.1,
});

/** 30 jobs spread over the states, with and without task ids, results, errors, expiry times, files. */
function populated(): Store {
  const store = fresh();
  store.beginSync();
  const ids = Array.from({ length: 30 }, (_, i) => `j${(i * 7) % 30}`);
  ids.forEach((id, i) => store.syncJob(job(id, i)));
  store.commitSync();
  ids.forEach((id, i) => {
    const k = i % 6;
    if (k === 0) return;
    store.transition(id, 'pending', 'submitting', { attemptsInc: 1, submitted_input: `{"prompt":"p ${i}"}`, submitted_at: `2026-01-01T00:00:${String(i).padStart(2, '0')}.000Z`, last_error: null });
    if (k === 1) return;
    if (k === 2) return store.transition(id, 'submitting', 'failed', { last_error: `bad ${i} \u00fc` });
    store.transition(id, 'submitting', 'submitted', { task_id: `t${i}` });
    if (k === 3) return;
    store.transition(id, 'submitted', 'downloading', { result: JSON.stringify({ status: 'finished', n: i }), finished_at: '2026-01-01T00:01:00.000Z', expires_at: 1_700_000_000_000 + i }, () =>
      store.addFiles(id, [
        { idx: 0, name: `a${i}.png`, url: `http://x/a${i}.png`, type: 'image', content_type: 'image/png', expected_size: 100 + i, expires_at: 5 },
        { idx: 1, name: 'lyrics-1.txt', url: null, type: 'text', content_type: 'text/plain', expected_size: null, expires_at: null },
      ]),
    );
    if (k === 4) return;
    store.transition(id, 'downloading', 'done', {}, () => store.fileDone(id, 0, { path: `${id}/a${i}.png`, size: 100 + i, sha256: 'f'.repeat(64), content_type: null }));
  });
  return store;
}

/** Same values, same keys in the same order. */
function same(a: unknown, b: unknown): void {
  expect(a).toStrictEqual(b);
  expect(JSON.stringify(a)).toBe(JSON.stringify(b));
}

describe('store reads (raw rows made objects)', () => {
  it('getJob, nextPending, jobsIn, allJobs, summaryRows, filesOf and resultOf equal the named rows of SELECT *', () => {
    const store = populated();
    const db = store.db;
    const run = store.currentRunId;
    const ids = db.prepare('SELECT id FROM jobs WHERE run_id = ? ORDER BY seq').pluck().all(run) as string[];
    expect(ids).toHaveLength(30);
    for (const id of [...ids, 'missing']) {
      same(store.getJob(id), db.prepare('SELECT * FROM jobs WHERE run_id = ? AND id = ?').get(run, id));
      same(store.filesOf(id), db.prepare('SELECT job_id, idx, name, url, type, content_type, expected_size, path, size, sha256, expires_at, state FROM files WHERE run_id = ? AND job_id = ? ORDER BY idx').all(run, id));
      const named = db.prepare('SELECT result FROM jobs WHERE run_id = ? AND id = ?').get(run, id) as { result: string | null } | undefined;
      expect(store.resultOf(id)).toBe(named?.result ?? null);
    }
    expect(store.filesOf(ids[4]!).length).toBe(2);
    for (const state of JOB_STATES) same([...store.jobsIn(state)], db.prepare('SELECT * FROM jobs WHERE run_id = ? AND state = ? ORDER BY seq').all(run, state));
    expect([...store.jobsIn('done')].length).toBeGreaterThan(0);
    same([...store.allJobs()], db.prepare('SELECT * FROM jobs WHERE run_id = ? ORDER BY seq').all(run));
    same(
      [...store.summaryRows()],
      db.prepare('SELECT id, model, kind, "where", state, task_id, attempts, submitted_at, finished_at, last_error, estimated_credits, permanent FROM jobs WHERE run_id = ? ORDER BY seq').all(run),
    );
    const pendingAll = db.prepare(`SELECT * FROM jobs WHERE run_id = ? AND state = 'pending' ORDER BY seq`).all(run) as { seq: number }[];
    expect(pendingAll.length).toBe(5);
    same(store.nextPending(0, 100), pendingAll);
    same(store.nextPending(pendingAll[1]!.seq, 2), pendingAll.slice(2, 4));
  });

  it('an iteration ended early releases its statement; reads inside an iteration work', () => {
    const store = populated();
    for (const row of store.jobsIn('done')) {
      expect(store.getJob(row.id)!.state).toBe('done');
      break;
    }
    const it = store.allJobs();
    expect(it.next().done).toBe(false);
    it.return?.();
    // The store can write again (no statement left busy) and iterate again.
    const first = [...store.jobsIn('pending')][0]!;
    store.transition(first.id, 'pending', 'submitting');
    expect([...store.summaryRows()].find((r) => r.id === first.id)!.state).toBe('submitting');
  });
});

describe('store transactions', () => {
  it('a throw inside a transition rolls back the move and what `also` wrote, and rethrows the same error', () => {
    const store = populated();
    const id = [...store.jobsIn('pending')][0]!.id;
    const before = store.getJob(id);
    const boom = new Error('boom');
    expect(() =>
      store.transition(id, 'pending', 'submitting', { attemptsInc: 1 }, () => {
        store.noteError(id, 'written inside');
        throw boom;
      }),
    ).toThrow(boom);
    expect(store.db.inTransaction).toBe(false);
    expect(store.getJob(id)).toStrictEqual(before);
    // A failed guard: nothing changed, no transaction left open.
    expect(() => store.transition(id, 'submitted', 'downloading')).toThrow(TransitionError);
    expect(store.db.inTransaction).toBe(false);
    expect(store.getJob(id)).toStrictEqual(before);
  });

  it('commitNormal: one transaction, its result returned; a promise is refused and rolled back; inside a transaction it is a savepoint', () => {
    const store = populated();
    const [a, b] = [...store.jobsIn('pending')].map((r) => r.id);
    expect(store.commitNormal(() => (store.transition(a!, 'pending', 'submitting'), 42))).toBe(42);
    expect(store.getJob(a!)!.state).toBe('submitting');
    expect(() => store.commitNormal(() => (store.transition(b!, 'pending', 'submitting'), Promise.resolve()))).toThrow('Transaction function cannot return a promise');
    expect(store.getJob(b!)!.state).toBe('pending');
    expect(store.db.inTransaction).toBe(false);
    // Nested in an outer transaction (a sync): the inner failure undoes only its own part.
    store.beginSync();
    store.noteError(b!, 'outer');
    expect(() =>
      store.commitNormal(() => {
        store.transition(b!, 'pending', 'submitting');
        throw new Error('inner');
      }),
    ).toThrow('inner');
    expect(store.db.inTransaction).toBe(true);
    store.commitSync();
    expect(store.getJob(b!)!.state).toBe('pending');
    expect(store.getJob(b!)!.last_error).toBe('outer');
  });

  it('durable: committed with synchronous=FULL, back to NORMAL after, also after a throw', () => {
    const store = populated();
    const [a, b] = [...store.jobsIn('pending')].map((r) => r.id);
    store.durable(() => store.transition(a!, 'pending', 'submitting'));
    expect(store.getJob(a!)!.state).toBe('submitting');
    expect(store.db.pragma('synchronous', { simple: true })).toBe(1);
    expect(() => store.durable(() => store.transition(b!, 'submitting', 'submitted'))).toThrow(TransitionError);
    expect(store.db.pragma('synchronous', { simple: true })).toBe(1);
    expect(store.db.inTransaction).toBe(false);
  });

  it('the guarded UPDATE per set of columns: each patch writes exactly its columns, whatever was prepared before', () => {
    const store = populated();
    const [a, b] = [...store.jobsIn('pending')].map((r) => r.id);
    store.transition(a!, 'pending', 'submitting', { attemptsInc: 2, submitted_input: 'x', last_error: null });
    store.transition(b!, 'pending', 'submitting', { submitted_input: 'y' }); // same SQL without attempts
    store.transition(b!, 'submitting', 'submitted', { task_id: 'tb' });
    store.transition(a!, 'submitting', 'submitted', { task_id: 'ta', attemptsInc: 0 }); // 0: attempts not touched
    const ra = store.getJob(a!)!;
    const rb = store.getJob(b!)!;
    expect([ra.attempts, ra.submitted_input, ra.task_id, ra.state]).toEqual([2, 'x', 'ta', 'submitted']);
    expect([rb.attempts, rb.submitted_input, rb.task_id, rb.state]).toEqual([0, 'y', 'tb', 'submitted']);
  });
});

describe('nowIso (the text made once per millisecond)', () => {
  it('is always the toISOString of the current millisecond', () => {
    let checked = 0;
    const seen = new Set<string>();
    // Until 200 checks over at least 6 distinct milliseconds (bounded at 10 s): a loaded machine gives fewer
    // checks per millisecond, never a weaker test.
    const end = Date.now() + 10_000;
    while ((checked < 200 || seen.size <= 5) && Date.now() < end) {
      const before = new Date().toISOString();
      const t = nowIso();
      const after = new Date().toISOString();
      expect(t >= before && t <= after, `${before} <= ${t} <= ${after}`).toBe(true);
      expect(new Date(t).toISOString()).toBe(t);
      seen.add(t);
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(200);
    expect(seen.size).toBeGreaterThan(5); // moved on with the clock
  });
});
