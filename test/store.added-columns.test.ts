import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

/**
 * jobs.permanent and jobs.uncertain_at (src/store/schema.ts ADDED_JOB_COLUMNS) on a state file written before
 * them: the next open adds them (status and run alike), old rows read permanent 0 and no uncertain time, and the
 * moves write them. The same columns on PostgreSQL: test/helpers/workstore-cases.ts.
 */
const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

/** A state file with one failed and one pending job, then the two columns dropped, as a genbatch before them wrote it. */
function oldFile(): string {
  const t = tempDir('genbatch-added-columns-');
  cleanups.push(t.cleanup);
  const path = join(t.dir, 'state.db');
  const store = Store.openForWrite(path);
  store.openRun(join(t.dir, 'm.yaml'), join(t.dir, 'out'), 'http://svc', false, false);
  store.beginSync();
  for (const id of ['a', 'b']) store.syncJob({ id, model: 'm', kind: 'submit', where: `m.yaml:${id}`, specHash: `h-${id}`, spec: '{}', estimatedCredits: 1 });
  store.commitSync();
  store.transition('a', 'pending', 'failed', { last_error: 'HTTP 400', permanent: 1 });
  store.close();
  const db = new Database(path);
  db.exec('ALTER TABLE jobs DROP COLUMN permanent; ALTER TABLE jobs DROP COLUMN uncertain_at');
  db.close();
  return path;
}

const columns = (path: string) => {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(`SELECT name FROM pragma_table_info('jobs')`).pluck().all() as string[];
  } finally {
    db.close();
  }
};

describe('columns added to jobs', () => {
  it('a state file without them gets them at its next open for reading (status): old rows read permanent 0', () => {
    const path = oldFile();
    expect(columns(path)).not.toContain('permanent');
    const reader = Store.openForRead(path);
    try {
      reader.useRun(reader.runs()[0]!);
      expect(reader.getJob('a')).toMatchObject({ state: 'failed', permanent: 0, uncertain_at: null });
      expect(reader.permanentFailedIds()).toEqual([]);
    } finally {
      reader.close();
    }
    expect(columns(path)).toEqual(expect.arrayContaining(['permanent', 'uncertain_at']));
  });

  it('a writer opening such a file adds them, and its moves write them', () => {
    const path = oldFile();
    const store = Store.openForWrite(path);
    try {
      store.useRun(store.runs()[0]!);
      store.transition('a', 'failed', 'pending', { last_error: 'sent again' });
      store.transition('a', 'pending', 'failed', { last_error: 'HTTP 400 content_moderation_error', permanent: 1 });
      store.transition('b', 'pending', 'submitting', { attemptsInc: 1 });
      store.transition('b', 'submitting', 'uncertain', { last_error: 'lost' });
      expect(store.permanentFailedIds()).toEqual(['a']);
      expect(store.getJob('b')?.uncertain_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    } finally {
      store.close();
    }
  });
});
