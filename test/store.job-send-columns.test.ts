import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { buildReportData } from '../src/engine/finish/report-data.js';
import { Store, type JobInput } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

/**
 * jobs.sent_by and jobs.expected_credits (src/store/schema.ts JOB_SEND_COLUMNS): stamped on the submit intent
 * with the invocation this process started; a state file written before them is read as it is (the reports give
 * null) and gets them when a writer opens it.
 */

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

const job = (id: string, credits: number | null): JobInput => ({ id, model: 'm', kind: 'submit', where: 'm.yaml:1', specHash: 'h', spec: '{}', estimatedCredits: credits });

function columns(path: string): string[] {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(`SELECT name FROM pragma_table_info('jobs') WHERE name IN ('sent_by', 'expected_credits') ORDER BY name`).pluck().all() as string[];
  } finally {
    db.close();
  }
}

describe('the invocation that sent a job', () => {
  it('is stamped with the expected price on the submit intent, counted per invocation, and an older state file gets the columns, empty, from the first command that opens it (a reader too)', () => {
    const t = tempDir('genbatch-sendcols-');
    cleanups.push(t.cleanup);
    const path = join(t.dir, 'state.db');
    const manifest = join(t.dir, 'm.yaml');
    let store = Store.openForWrite(path);
    store.openRun(manifest, t.dir, 'http://x', false, false);
    store.syncJob(job('a', 2));
    store.syncJob(job('b', null));
    store.syncJob(job('c', 3));
    store.syncJob(job('d', 3));
    // Sent without an invocation (none started in this process): nothing stamped.
    store.transition('c', 'pending', 'submitting', { attemptsInc: 1 });
    const n = store.startInvocation(100, new Date().toISOString());
    store.transition('a', 'pending', 'submitting', { attemptsInc: 1 });
    store.transition('b', 'pending', 'submitting', { attemptsInc: 1 });
    // The pipeline's intent under a credit cap names the price observed for the class: it wins over the estimate.
    store.transition('d', 'pending', 'submitting', { attemptsInc: 1, expected_credits: 1.5 });
    store.transition('a', 'submitting', 'submitted', { task_id: 't1' });
    store.transition('b', 'submitting', 'failed', { last_error: 'no' });
    store.finishInvocation(n, 98, new Date().toISOString(), 2);
    const sent = store.db.prepare('SELECT id, sent_by, expected_credits FROM jobs ORDER BY id').raw(true).all();
    expect(sent).toEqual([
      ['a', 1, 2],
      ['b', 1, null],
      ['c', null, null],
      ['d', 1, 1.5],
    ]);
    expect(buildReportData(store).summary.credits.invocations[0]).toMatchObject({ n: 1, charged: 2, charged_source: 'measured', jobs: { sent: 3, done: 0, failed: 1 } });
    store.close();

    // An older state file: without the columns.
    const db = new Database(path);
    db.exec('ALTER TABLE jobs DROP COLUMN sent_by; ALTER TABLE jobs DROP COLUMN expected_credits;');
    db.close();
    const reader = Store.openForRead(path);
    reader.useRun(reader.findRun(manifest)!);
    const data = buildReportData(reader);
    expect(data.summary.credits.invocations[0]!.jobs).toEqual({ sent: 0, done: 0, failed: 0 });
    expect([...data.jobs()].map((j) => [j.id, j.sent_by, j.expected_credits])).toEqual([
      ['a', null, null],
      ['b', null, null],
      ['c', null, null],
      ['d', null, null],
    ]);
    reader.close();
    expect(columns(path)).toEqual(['expected_credits', 'sent_by']);
    store = Store.openForWrite(path);
    store.close();
    expect(columns(path)).toEqual(['expected_credits', 'sent_by']);
  });

  it('is stamped by the same UPDATE that moves the job to submitting (one row change per intent, the estimate read as set by it)', () => {
    const t = tempDir('genbatch-sendcols-');
    cleanups.push(t.cleanup);
    const store = Store.openForWrite(join(t.dir, 'state.db'));
    store.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', false, false);
    for (const [id, credits] of [['a', 2], ['b', 4], ['c', null]] as const) store.syncJob(job(id, credits));
    store.startInvocation(100, new Date().toISOString());
    const changes = store.db.prepare('SELECT total_changes()').pluck();
    const before = changes.get() as number;
    store.transition('a', 'pending', 'submitting', { attemptsInc: 1 });
    store.transition('b', 'pending', 'submitting', { attemptsInc: 1, expected_credits: 1.5 });
    expect((changes.get() as number) - before).toBe(2);
    // A patch that sets the estimate too: the expected price is the new estimate.
    store.transition('c', 'pending', 'submitting', { attemptsInc: 1, estimated_credits: 7 });
    const rows = store.db.prepare("SELECT id, state, attempts, sent_by, expected_credits FROM jobs WHERE id IN ('a', 'b', 'c') ORDER BY id").raw(true).all();
    expect(rows).toEqual([
      ['a', 'submitting', 1, 1, 2],
      ['b', 'submitting', 1, 1, 1.5],
      ['c', 'submitting', 1, 1, 7],
    ]);
    store.close();
  });
});
