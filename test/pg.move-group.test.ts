import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate } from '../src/store/pg/schema.js';
import { MoveGroup } from '../src/store/pg/move-group.js';
import { PgWorkStore } from '../src/store/pg/work-store.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

const got = (name: string) => [{ idx: 0, path: `${name}/0.png`, size: 3, sha256: 'cd'.repeat(32), content_type: 'image/png' }];
const file = (name: string) => [{ idx: 0, name: '0.png', url: `http://files.test/${name}.png`, type: 'image', content_type: 'image/png', expected_size: 3, expires_at: null }];
const turn = () => new Promise((r) => setImmediate(r));

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

  it('file rows written by the moves carry every field: url, sizes, expiry, the content type found on disk, the sha256', async () => {
    const { w, runId } = await worker(['f']);
    await w.transition('f', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await w.transition('f', 'submitting', 'submitted', { task_id: 'task-f' }, { durable: true });
    const files = [
      { idx: 0, name: 'a.png', url: 'http://files.test/a.png', type: 'image', content_type: 'image/png', expected_size: 1234, expires_at: 1_900_000_000_123 },
      { idx: 1, name: 'b.png', url: 'http://files.test/b.png', type: 'image', content_type: null, expected_size: null, expires_at: null },
    ];
    await w.transition('f', 'submitted', 'downloading', { result: '{}' }, { addFiles: files });
    const gotten = [
      { idx: 0, path: 'f/a.png', size: 1234, sha256: 'a1'.repeat(32), content_type: null },
      { idx: 1, path: 'f/b.webp', size: 77, sha256: 'b2'.repeat(32), content_type: 'image/webp' },
    ];
    await w.transition('f', 'downloading', 'done', {}, { filesDone: gotten });
    const rows = await admin.query('SELECT idx, name, url, type, content_type, expected_size, expires_at, path, size, sha256, state, worker FROM files WHERE run_id = $1 ORDER BY idx', [runId]);
    expect(rows.rows).toEqual([
      { ...files[0], path: 'f/a.png', size: 1234, sha256: 'a1'.repeat(32), state: 'done', worker: 'w' + runs },
      { ...files[1], content_type: 'image/webp', path: 'f/b.webp', size: 77, sha256: 'b2'.repeat(32), state: 'done', worker: 'w' + runs },
    ]);
  });

  it('moves asked for one by one while a group waits on a lock form one next group when it ends', async () => {
    const { w, runId } = await worker(['a', 'b1', 'b2', 'b3', 'b4', 'b5']);
    const holder = await admin.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM jobs WHERE run_id = $1 AND id = 'a' FOR UPDATE`, [runId]);
      const first = w.transition('a', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
      // The group of a waits for the row lock.
      for (let i = 0; ; i++) {
        const r = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
        if (r.rows[0]!.n > 0) break;
        if (i > 500) throw new Error('the move never waited for the lock');
        await new Promise((r) => setTimeout(r, 10));
      }
      const rest: Array<Promise<unknown>> = [];
      for (const id of ['b1', 'b2', 'b3', 'b4', 'b5']) {
        rest.push(w.transition(id, 'pending', 'submitting', { attemptsInc: 1 }, { durable: true }));
        await turn();
      }
      await holder.query('COMMIT');
      await Promise.all([first, ...rest]);
    } finally {
      holder.release();
    }
    const x = await writers(runId);
    expect(new Set(['b1', 'b2', 'b3', 'b4', 'b5'].map((id) => x.get(id))).size).toBe(1);
    expect(x.get('a')).not.toBe(x.get('b1'));
  });

  it('a group commits durably when one of its moves is durable; a move alone that is one statement runs without a transaction', async () => {
    // A session whose default is synchronous_commit = on (the test server's is off), so a transaction's own setting shows.
    const url = new URL(db.url);
    url.searchParams.set('options', '-c synchronous_commit=on');
    const pool = openPool(url.toString(), { max: 4 });
    pools.push(pool);
    const g = new MoveGroup(pool);
    // now() is the transaction's start: equal to the statement's only when the statement is its own transaction.
    const probe = (q: { query: Pool['query'] }) =>
      q.query<{ sc: string; own: boolean }>(`SELECT current_setting('synchronous_commit') AS sc, now() = statement_timestamp() AS own`).then((r) => r.rows[0]!);
    expect(await g.run(probe, { durable: true, alone: true })).toEqual({ sc: 'on', own: true });
    expect(await g.run(probe, { durable: true, alone: false })).toEqual({ sc: 'on', own: false });
    expect(await g.run(probe, { durable: false, alone: false })).toEqual({ sc: 'off', own: false });
    expect(await Promise.all([g.run(probe, { durable: false, alone: false }), g.run(probe, { durable: false, alone: true })])).toEqual([
      { sc: 'off', own: false },
      { sc: 'off', own: false },
    ]);
    expect(await Promise.all([g.run(probe, { durable: false, alone: false }), g.run(probe, { durable: true, alone: true })])).toEqual([
      { sc: 'on', own: false },
      { sc: 'on', own: false },
    ]);
    // The same for a group sent in one go (moves of their own jobs).
    expect(await Promise.all([g.run(probe, { durable: false, alone: false, own: true }), g.run(probe, { durable: false, alone: true, own: true })])).toEqual([
      { sc: 'off', own: false },
      { sc: 'off', own: false },
    ]);
    expect(await Promise.all([g.run(probe, { durable: true, alone: false, own: true }), g.run(probe, { durable: true, alone: true, own: true })])).toEqual([
      { sc: 'on', own: false },
      { sc: 'on', own: false },
    ]);
    // A move of its own job that need not wait for the disk never joins a durable group: each commits as it asks.
    expect(await Promise.all([g.run(probe, { durable: false, alone: false, own: true }), g.run(probe, { durable: true, alone: true, own: true })])).toEqual([
      { sc: 'off', own: false },
      { sc: 'on', own: true },
    ]);
  });
});

describe('MoveGroup: moves of their own jobs sent together on the connection\'s pipeline', () => {
  let db: TestDatabase;
  let pool: Pool;
  beforeAll(async () => {
    db = await testDatabase();
    pool = openPool(db.url, { max: 4 });
    await pool.query('CREATE TABLE t (id TEXT PRIMARY KEY, n INT NOT NULL)');
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  /** A move writing row `id`; `log` records when it was called and when its answer came. */
  const writer = (id: string, log: string[], sql = `INSERT INTO t (id, n) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET n = t.n + 1`) => async (q: { query: Pool['query'] }) => {
    log.push(`call ${id}`);
    const r = await q.query(sql, [id]);
    log.push(`answer ${id}`);
    return r.rowCount;
  };
  const rows = async () => (await pool.query<{ id: string; n: number }>('SELECT id, n FROM t ORDER BY id')).rows;

  it('a pool\'s connections pipeline their statements', async () => {
    const c = await pool.connect();
    try {
      expect((c as unknown as { pipeline: boolean }).pipeline).toBe(true);
    } finally {
      c.release();
    }
  });

  it('every move of a group of own moves is sent before the first answer comes, and one transaction commits them all', async () => {
    await pool.query('TRUNCATE t');
    const g = new MoveGroup(pool);
    const log: string[] = [];
    const ids = ['a', 'b', 'c', 'd'];
    await Promise.all(ids.map((id) => g.run(writer(id, log), { durable: false, alone: false, own: true })));
    expect(log.slice(0, 4)).toEqual(ids.map((id) => `call ${id}`));
    const x = await pool.query<{ x: string }>('SELECT DISTINCT xmin::text AS x FROM t');
    expect(x.rows).toHaveLength(1);
    expect(await rows()).toEqual(ids.map((id) => ({ id, n: 1 })));
  });

  it('a group with a move that is not its job\'s own runs its moves one after another, in the order asked', async () => {
    await pool.query('TRUNCATE t');
    const g = new MoveGroup(pool);
    const log: string[] = [];
    await Promise.all([
      g.run(writer('a', log), { durable: true, alone: false, own: true }),
      g.run(writer('b', log), { durable: false, alone: false, own: false }),
      g.run(writer('c', log), { durable: true, alone: false, own: true }),
    ]);
    expect(log).toEqual(['call a', 'answer a', 'call b', 'answer b', 'call c', 'answer c']);
    expect(await rows()).toEqual(['a', 'b', 'c'].map((id) => ({ id, n: 1 })));
  });

  it('a move of its own job that need not wait for the disk is committed while a durable group still waits', async () => {
    await pool.query('TRUNCATE t');
    await pool.query(`INSERT INTO t (id, n) VALUES ('held', 0)`);
    const g = new MoveGroup(pool);
    const log: string[] = [];
    // Another session holds row 'held': the durable group writing it waits until that session ends.
    const other = await pool.connect();
    let durable: Promise<unknown> = Promise.resolve();
    try {
      await other.query('BEGIN');
      await other.query(`SELECT * FROM t WHERE id = 'held' FOR UPDATE`);
      durable = Promise.all(['held', 'd2'].map((id) => g.run(writer(id, log), { durable: true, alone: false, own: true })));
      // The same in the other lane: a result or a done, of other jobs. (Behind the durable group they would wait for ever.)
      const quick = Promise.all(['q1', 'q2'].map((id) => g.run(writer(id, log), { durable: false, alone: false, own: true })));
      const late = new Promise((_, fail) => setTimeout(() => fail(new Error('the moves that need not wait for the disk waited behind the durable group')), 10_000).unref());
      await Promise.race([quick, late]);
      expect(log).not.toContain('answer held');
      expect((await rows()).map((r) => r.id)).toEqual(['held', 'q1', 'q2']);
    } finally {
      await other.query('COMMIT');
      other.release();
    }
    await durable;
    expect(await rows()).toEqual([
      { id: 'd2', n: 1 },
      { id: 'held', n: 1 },
      { id: 'q1', n: 1 },
      { id: 'q2', n: 1 },
    ]);
  });

  it('one failing move of a pipelined group commits nothing of the group; each move is made again alone, the failure its own caller\'s', async () => {
    await pool.query('TRUNCATE t');
    const g = new MoveGroup(pool);
    const log: string[] = [];
    const results = await Promise.allSettled([
      g.run(writer('a', log), { durable: true, alone: false, own: true }),
      g.run(writer('bad', log, 'INSERT INTO t (id, n) VALUES ($1, 1 / 0)'), { durable: true, alone: false, own: true }),
      g.run(writer('c', log), { durable: true, alone: false, own: true }),
      g.run(async () => {
        throw new Error('thrown before any statement');
      }, { durable: true, alone: false, own: true }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected']);
    expect(String((results[1] as PromiseRejectedResult).reason)).toMatch(/division by zero/);
    expect(String((results[3] as PromiseRejectedResult).reason)).toMatch(/thrown before any statement/);
    // Written once each: the group's writes were rolled back before each move was made alone.
    expect(await rows()).toEqual([
      { id: 'a', n: 1 },
      { id: 'c', n: 1 },
    ]);
    // The connections are clean afterwards: a next group commits.
    await Promise.all(['d', 'e'].map((id) => g.run(writer(id, []), { durable: false, alone: false, own: true })));
    expect((await rows()).map((r) => r.id)).toEqual(['a', 'c', 'd', 'e']);
  });
});
