import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Store, type JobInput } from '../src/store/index.js';
import { StoreConn } from '../src/store/conn.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Reads over every job of a run (counts, the estimate, file totals) are kept while no jobs or files row changes,
 * and a kept count of zero answers the reads of that state without reading (a resume with nothing to do read the
 * whole table a dozen times). Whatever changes the rows, through the store, through its connection by any
 * statement, or through another connection, the next read sees it.
 */

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function fresh(): { store: Store; path: string } {
  const t = tempDir();
  const path = join(t.dir, 'state.db');
  const store = Store.openForWrite(path);
  cleanups.push(t.cleanup);
  cleanups.push(() => store.close());
  store.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', true, false);
  return { store, path };
}

const job = (id: string, credits: number | null = 2): JobInput => ({ id, model: 'alpha-image-2', kind: 'submit', where: `m.yaml:${id}`, specHash: `h-${id}`, spec: '{}', estimatedCredits: credits });

function withJobs(ids: string[]): { store: Store; path: string } {
  const s = fresh();
  s.store.beginSync();
  for (const id of ids) s.store.syncJob(job(id));
  s.store.commitSync();
  return s;
}

/** Another connection to the same file (as `genbatch mark` or a test would open it). */
function other(path: string): Database.Database {
  const db = new Database(path);
  cleanups.push(() => db.close());
  return db;
}

describe('reads kept until the rows change', () => {
  it('the rows stamp changes with every write to jobs or files through the connection, also a rolled back one, and with another connection’s commit; not otherwise', () => {
    const { store, path } = withJobs(['a']);
    const conn = new StoreConn(store.db, path);
    const s0 = conn.rowsStamp();
    expect(s0).not.toBeNull();
    expect(conn.rowsStamp()).toEqual(s0);
    store.setMeta('k', 'v'); // another table: no change of the stamp
    expect(conn.rowsStamp()).toEqual(s0);
    store.db.prepare(`UPDATE jobs SET last_error = 'x' WHERE id = 'a'`).run();
    const s1 = conn.rowsStamp();
    expect(s1).not.toEqual(s0);
    expect(() =>
      store.db.transaction(() => {
        store.db.prepare(`DELETE FROM jobs WHERE id = 'a'`).run();
        throw new Error('rolled back');
      })(),
    ).toThrow('rolled back');
    const s2 = conn.rowsStamp();
    expect(s2).not.toEqual(s1);
    store.addFiles('a', [{ idx: 0, name: 'a.png', url: 'http://x/a.png', type: 'image', content_type: null, expected_size: null, expires_at: null }]);
    const s3 = conn.rowsStamp();
    expect(s3).not.toEqual(s2);
    other(path).prepare(`UPDATE jobs SET last_error = 'y' WHERE id = 'a'`).run();
    expect(conn.rowsStamp()).not.toEqual(s3);
  });

  it('counts and the estimate follow transitions, raw statements, rollbacks and other connections', () => {
    const { store, path } = withJobs(['a', 'b', 'c']);
    expect(store.counts()).toMatchObject({ pending: 3, done: 0 });
    expect(store.estimate()).toEqual({ known: 6, unknown: 0 });
    store.transition('a', 'pending', 'skipped');
    expect(store.counts()).toMatchObject({ pending: 2, skipped: 1 });
    expect(store.estimate()).toEqual({ known: 4, unknown: 0 });
    store.db.prepare(`UPDATE jobs SET estimated_credits = NULL WHERE id = 'b'`).run();
    expect(store.estimate()).toEqual({ known: 2, unknown: 1 });
    try {
      store.commitNormal(() => {
        store.transition('c', 'pending', 'skipped');
        expect(store.counts()).toMatchObject({ pending: 1, skipped: 2 });
        throw new Error('rolled back');
      });
    } catch {
      // the transaction is rolled back: c is pending again
    }
    expect(store.counts()).toMatchObject({ pending: 2, skipped: 1 });
    other(path).prepare(`UPDATE jobs SET state = 'done' WHERE id = 'c'`).run();
    expect(store.counts()).toMatchObject({ pending: 1, skipped: 1, done: 1 });
  });

  it('a kept count of zero answers the reads of that state, and a change seen only by another connection is read', () => {
    const { store, path } = withJobs(['a', 'b']);
    expect(store.counts().failed).toBe(0);
    expect([...store.jobsIn('failed')]).toEqual([]);
    expect(store.permanentFailedIds()).toEqual([]);
    expect(store.takenJobs('submitted')).toEqual([]);
    expect(store.recoverSubmitting()).toEqual([]);
    const db = other(path);
    db.prepare(`UPDATE jobs SET state = 'failed', permanent = 1 WHERE id = 'a'`).run();
    db.prepare(`UPDATE jobs SET state = 'submitted', task_id = 't-b' WHERE id = 'b'`).run();
    expect([...store.jobsIn('failed')].map((r) => r.id)).toEqual(['a']);
    expect(store.permanentFailedIds()).toEqual(['a']);
    expect(store.takenJobs('submitted').map((r) => r.task_id)).toEqual(['t-b']);
    expect(store.counts()).toMatchObject({ failed: 1, submitted: 1, pending: 0 });
    expect(store.pendingEstimate()).toEqual({ known: 0, unknown: 0 });
    store.db.prepare(`UPDATE jobs SET state = 'submitting' WHERE id = 'b'`).run();
    expect(store.recoverSubmitting()).toEqual(['b']);
  });

  it('file totals follow file rows and the state of their jobs', () => {
    const { store } = withJobs(['a', 'b']);
    expect(store.fileTotals()).toEqual({ count: 0, bytes: 0 });
    expect(store.filesDone()).toBe(0);
    for (const id of ['a', 'b']) {
      store.addFiles(id, [{ idx: 0, name: `${id}.png`, url: `http://x/${id}.png`, type: 'image', content_type: null, expected_size: null, expires_at: null }]);
      store.fileDone(id, 0, { path: `${id}/${id}.png`, size: 10, sha256: 'f'.repeat(64), content_type: null });
    }
    expect(store.fileTotals()).toEqual({ count: 2, bytes: 20 });
    expect(store.filesDone()).toBe(2);
    store.transition('b', 'pending', 'skipped');
    expect(store.fileTotals()).toEqual({ count: 1, bytes: 10 });
    expect(store.filesDone()).toBe(1);
    store.dropFile('a', 'a/a.png');
    expect(store.fileTotals()).toEqual({ count: 0, bytes: 0 });
  });

  it('counts and the estimate come from one scan with exactly the numbers of their own queries; a state outside the known ones is still counted', () => {
    const ids = Array.from({ length: 40 }, (_, i) => `j${i}`);
    const s = fresh();
    s.store.beginSync();
    ids.forEach((id, i) => s.store.syncJob(job(id, i % 7 === 0 ? null : i * 0.1 + 0.07)));
    s.store.commitSync();
    ids.forEach((id, i) => {
      if (i % 3 === 0) s.store.transition(id, 'pending', 'skipped');
      if (i % 3 === 1) s.store.transition(id, 'pending', 'submitting');
    });
    const own = s.store.db
      .prepare(`SELECT COALESCE(SUM(estimated_credits), 0) AS known, SUM(CASE WHEN estimated_credits IS NULL THEN 1 ELSE 0 END) AS unknown FROM jobs WHERE run_id = ? AND state != 'skipped' AND NOT (kind = 'fanout' AND state = 'done')`)
      .get(s.store.currentRunId) as { known: number; unknown: number };
    expect(s.store.estimate()).toEqual({ known: own.known, unknown: own.unknown });
    const byState = Object.fromEntries((s.store.db.prepare('SELECT state, COUNT(*) AS n FROM jobs GROUP BY state').all() as { state: string; n: number }[]).map((r) => [r.state, r.n]));
    expect(s.store.counts()).toMatchObject(byState);
    other(s.path).prepare(`UPDATE jobs SET state = 'odd' WHERE id = 'j1'`).run();
    expect(s.store.counts()).toMatchObject({ odd: 1, submitting: byState.submitting! - 1 });
  });

  it('the ids of every job, in manifest order', () => {
    const { store } = withJobs(['z', 'a', 'm']);
    expect([...store.jobIds()]).toEqual(['z', 'a', 'm']);
    expect([...store.jobIds()]).toEqual([...store.allJobs()].map((r) => r.id));
  });
});
