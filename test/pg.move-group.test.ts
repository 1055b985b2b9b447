import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate } from '../src/store/pg/schema.js';
import { PgWorkStore } from '../src/store/pg/work-store.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

const got = (name: string) => [{ idx: 0, path: `${name}/0.png`, size: 3, sha256: 'cd'.repeat(32), content_type: 'image/png' }];
const file = (name: string) => [{ idx: 0, name: '0.png', url: `http://files.test/${name}.png`, type: 'image', content_type: 'image/png', expected_size: 3, expires_at: null }];

describe('PgWorkStore: a worker\'s moves grouped into shared transactions', () => {
  let db: TestDatabase;
  let admin: Pool;
  const pools: Pool[] = [];
  beforeAll(async () => {
    db = await testDatabase();
    admin = openPool(db.url);
    await migrate(admin);
  });
  afterAll(async () => {
    for (const p of [admin, ...pools]) await p.end();
    await db.drop();
  });

  let runs = 0;
  async function worker(ids: string[]): Promise<{ w: PgWorkStore; runId: number }> {
    const runId = await seedRun(admin, `/run${++runs}.yaml`, ids.map((id) => ({ id })));
    const pool = openPool(db.url, { max: 4 });
    pools.push(pool);
    const w = await PgWorkStore.open({ pool, runId, apiKey: 'k', worker: { id: `w${runs}`, hostname: 'host', pid: 1 } });
    await w.claimPending(ids.length);
    return { w, runId };
  }
  /** The transaction that last wrote each job's row (its xmin). */
  async function writers(runId: number): Promise<Map<string, string>> {
    const r = await admin.query<{ id: string; x: string }>('SELECT id, xmin::text AS x FROM jobs WHERE run_id = $1 ORDER BY id', [runId]);
    return new Map(r.rows.map((row) => [row.id, row.x]));
  }

  it('moves asked for in the same moment are written by one transaction; moves asked one after another by one each', async () => {
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
    const { w, runId } = await worker(ids);
    await Promise.all(ids.map((id) => w.transition(id, 'pending', 'submitting', { attemptsInc: 1 }, { durable: true })));
    expect(new Set((await writers(runId)).values()).size).toBe(1);
    for (const id of ids) await w.transition(id, 'submitting', 'submitted', { task_id: `task-${id}` }, { durable: true });
    expect(new Set((await writers(runId)).values()).size).toBe(ids.length);
    // Results with their file rows, then done with the files recorded: each group one transaction, every row written.
    await Promise.all(ids.map((id) => w.transition(id, 'submitted', 'downloading', { result: '{}' }, { addFiles: file(id) })));
    await Promise.all(ids.map((id) => w.transition(id, 'downloading', 'done', {}, { filesDone: got(id) })));
    expect(new Set((await writers(runId)).values()).size).toBe(1);
    const files = await admin.query('SELECT job_id, state, path FROM files WHERE run_id = $1 ORDER BY job_id', [runId]);
    expect(files.rows).toEqual(ids.map((id) => ({ job_id: id, state: 'done', path: `${id}/0.png` })));
    const states = await admin.query('SELECT DISTINCT state FROM jobs WHERE run_id = $1', [runId]);
    expect(states.rows).toEqual([{ state: 'done' }]);
  });

  it('a new result clears the job\'s mark in one statement, kept in its history; a job never marked gets no mark row', async () => {
    const { w, runId } = await worker(['m', 'n']);
    await admin.query(`INSERT INTO marks (run_id, job_id, n, mark, note, at) VALUES ($1, 'm', 1, 'rejected', 'too dark', 'then')`, [runId]);
    for (const id of ['m', 'n']) {
      await w.transition(id, 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
      await w.transition(id, 'submitting', 'submitted', { task_id: `task-${id}` }, { durable: true });
      await w.transition(id, 'submitted', 'downloading', { result: '{}' }, { addFiles: file(id) });
      await w.transition(id, 'downloading', 'done', {}, { filesDone: got(id) });
    }
    const marks = await admin.query('SELECT job_id, n, mark, note FROM marks WHERE run_id = $1 ORDER BY job_id, n', [runId]);
    expect(marks.rows).toEqual([
      { job_id: 'm', n: 1, mark: 'rejected', note: 'too dark' },
      { job_id: 'm', n: 2, mark: null, note: 'cleared: a new result replaced the one marked rejected' },
    ]);
  });
});
