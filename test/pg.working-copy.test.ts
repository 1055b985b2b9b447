import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate } from '../src/store/pg/schema.js';
import { syncOnce } from '../src/store/pg/sync-lock.js';
import { PgWorkStore } from '../src/store/pg/work-store.js';
import { ensureRun, WorkingCopy, type WriteBack } from '../src/store/pg/working-copy.js';
import type { JobInput } from '../src/store/index.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';

const job = (id: string, spec = '{"p":1}', parents?: string[]): JobInput & { parents?: string[] } => ({
  id,
  model: 'm',
  kind: 'submit',
  where: `m.yaml:${id}`,
  specHash: `h-${spec}`,
  spec,
  estimatedCredits: 1,
  parents,
});

/** The manifest sync as `genbatch run` makes it (Store.beginSync ... skipRemoved), on a working copy, written back. */
async function syncManifest(pool: Pool, manifest: string, key: string, jobs: Array<JobInput & { parents?: string[] }>): Promise<{ outcome: string; wb: WriteBack | null }> {
  const runId = await ensureRun(pool, manifest, '/tmp/out');
  let wb: WriteBack | null = null;
  const outcome = await syncOnce(pool, runId, key, async (c) => {
    const copy = await WorkingCopy.load(c, runId);
    try {
      const s = copy.store;
      s.openRun(manifest, '/tmp/out', 'http://svc', false, false);
      s.beginSync();
      for (const j of jobs) s.syncJob(j);
      s.graph.setManifestLinks(new Map(jobs.filter((j) => j.parents).map((j) => [j.id, { parents: j.parents! }])));
      s.commitSync();
      s.skipRemoved();
      wb = await copy.writeBack(c);
    } finally {
      copy.close();
    }
  });
  return { outcome, wb };
}

describe('a PostgreSQL run changed through a SQLite working copy (the manifest sync)', () => {
  let db: TestDatabase;
  let pool: Pool;
  const pools: Pool[] = [];
  beforeAll(async () => {
    db = await testDatabase();
    pool = openPool(db.url);
    await migrate(pool);
  });
  afterAll(async () => {
    for (const p of [pool, ...pools]) await p.end();
    await db.drop();
  });

  const jobsOf = async (runId: number) =>
    (await pool.query<{ id: string; state: string; spec: string; seq: number }>('SELECT id, state, spec, seq FROM jobs WHERE run_id = $1 ORDER BY seq', [runId])).rows;

  it('a sync of 2,345 new jobs with links writes every row as the copy made it (new rows go many to a statement)', async () => {
    const jobs = Array.from({ length: 2345 }, (_, i) => job(`j${i}`, `{"p":${i}}`, i > 0 && i % 7 === 0 ? [`j${i - 1}`] : undefined));
    const { outcome, wb } = await syncManifest(pool, '/big.yaml', 'k-big', jobs);
    expect(outcome).toBe('synced');
    expect(wb!.inserted).toBeGreaterThanOrEqual(2345 + 334);
    const runId = await ensureRun(pool, '/big.yaml', '/tmp/out');
    const rows = await jobsOf(runId);
    expect(rows.map((r) => [r.id, r.spec, r.state])).toEqual(jobs.map((j) => [j.id, j.spec, 'pending']));
    expect(new Set(rows.map((r) => r.seq)).size).toBe(2345);
    expect(rows.map((r) => r.seq)).toEqual([...rows.map((r) => r.seq)].sort((a, b) => a - b));
    const links = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM job_links WHERE run_id = $1 AND kind = 'needs'`, [runId]);
    expect(links.rows[0]!.n).toBe(334);
  });

  it('3 processes syncing one manifest at once: one writes the jobs and links through its copy, the others join', async () => {
    const jobs = [job('a'), job('b', '{"p":2}', ['a']), job('c')];
    const results = await Promise.all([0, 1, 2].map(() => syncManifest(pool, '/sync/m.yaml', 'k1', jobs)));
    expect(results.map((r) => r.outcome).sort()).toEqual(['joined', 'joined', 'synced']);
    expect(results.find((r) => r.wb)?.wb).toMatchObject({ conflicts: 0, deleted: 0 });
    const runId = await ensureRun(pool, '/sync/m.yaml', '/tmp/out');
    expect((await jobsOf(runId)).map((j) => [j.id, j.state, j.seq])).toEqual([
      ['a', 'pending', 1],
      ['b', 'pending', 2],
      ['c', 'pending', 3],
    ]);
    const links = await pool.query('SELECT job_id, parent_id, kind FROM job_links WHERE run_id = $1', [runId]);
    expect(links.rows).toEqual([{ job_id: 'b', parent_id: 'a', kind: 'needs' }]);
    const run = await pool.query('SELECT generation, base_url FROM runs WHERE id = $1', [runId]);
    expect(run.rows).toEqual([{ generation: 1, base_url: 'http://svc' }]);
  });

  it('a changed manifest while a worker runs: a claimed pending job takes the new spec and its holder is refused; the job in flight keeps its worker; a removed job is skipped', async () => {
    await syncManifest(pool, '/change/m.yaml', 'v1', [job('a'), job('b'), job('c'), job('d')]);
    const runId = await ensureRun(pool, '/change/m.yaml', '/tmp/out');
    const wp = openPool(db.url, { max: 2 });
    pools.push(wp);
    const w = await PgWorkStore.open({ pool: wp, runId, apiKey: 'k', worker: { id: 'w', hostname: 'h', pid: 1 } });
    expect((await w.claimPending(2)).jobs.map((j) => j.id)).toEqual(['a', 'b']);
    await w.transition('a', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await w.transition('a', 'submitting', 'submitted', { task_id: 'task-a' });
    const v2 = await syncManifest(pool, '/change/m.yaml', 'v2', [job('a', '{"p":9}'), job('b', '{"p":9}'), job('d'), job('e')]);
    expect(v2.outcome).toBe('synced');
    expect(v2.wb?.conflicts).toBe(0);
    expect((await jobsOf(runId)).map((j) => [j.id, j.state, j.spec])).toEqual([
      ['a', 'submitted', '{"p":1}'],
      ['b', 'pending', '{"p":9}'],
      ['c', 'skipped', '{"p":1}'],
      ['d', 'pending', '{"p":1}'],
      ['e', 'pending', '{"p":1}'],
    ]);
    // b's holder read the old spec: its intent is refused, and b is free for any worker (with the new spec).
    expect(await w.transition('b', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true })).toEqual({ moved: false });
    expect(await w.transition('a', 'submitted', 'downloading', { result: '{}' })).toEqual({ moved: true, side: [] });
    expect((await w.claimPending(10)).jobs.map((j) => [j.id, j.spec])).toEqual([
      ['b', '{"p":9}'],
      ['d', '{"p":1}'],
      ['e', '{"p":1}'],
    ]);
  });

  it('a job a worker moved after the copy was made is left as the worker made it, counted as a conflict; the sync keeps no key, so the next one runs again', async () => {
    await syncManifest(pool, '/race/m.yaml', 'v1', [job('a'), job('b')]);
    const runId = await ensureRun(pool, '/race/m.yaml', '/tmp/out');
    const wp = openPool(db.url, { max: 2 });
    pools.push(wp);
    const w = await PgWorkStore.open({ pool: wp, runId, apiKey: 'k', worker: { id: 'w2', hostname: 'h', pid: 1 } });
    await w.claimPending(1);
    let wb: WriteBack | null = null;
    const outcome = await syncOnce(pool, runId, 'v2', async (c) => {
      const copy = await WorkingCopy.load(c, runId);
      try {
        copy.store.openRun('/race/m.yaml', '/tmp/out', 'http://svc', false, false);
        copy.store.transition('a', 'pending', 'skipped', { last_error: 'removed' });
        copy.store.transition('b', 'pending', 'skipped', { last_error: 'removed' });
        copy.store.setMeta('sync-key:test', 'recorded by the sync');
        // Meanwhile the worker sends a.
        await w.transition('a', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
        wb = await copy.writeBack(c);
      } finally {
        copy.close();
      }
    });
    expect(outcome).toBe('synced');
    expect(wb!.conflicts).toBe(1);
    expect((await jobsOf(runId)).map((j) => [j.id, j.state])).toEqual([
      ['a', 'submitting'],
      ['b', 'skipped'],
    ]);
    // Neither the sync's own meta nor its key: the same manifest is synced again next time.
    expect((await pool.query(`SELECT key, value FROM meta WHERE key IN ('sync-key:test', $1)`, [`pg-sync:${runId}`])).rows).toEqual([{ key: `pg-sync:${runId}`, value: 'v1' }]);
    expect(await syncOnce(pool, runId, 'v2', async () => undefined)).toBe('synced');
    expect(await syncOnce(pool, runId, 'v2', async () => undefined)).toBe('joined');
  });

  it("the copy's recovery of submits (as after a crash) moves only those of dead workers: a live worker's submit stays its own", async () => {
    await syncManifest(pool, '/recover/m.yaml', 'v1', [job('live'), job('dead')]);
    const runId = await ensureRun(pool, '/recover/m.yaml', '/tmp/out');
    const lp = openPool(db.url, { max: 2 });
    const dp = openPool(db.url, { max: 2 });
    pools.push(lp, dp);
    const live = await PgWorkStore.open({ pool: lp, runId, apiKey: 'k', worker: { id: 'live', hostname: 'h', pid: 1 } });
    const dead = await PgWorkStore.open({ pool: dp, runId, apiKey: 'k', worker: { id: 'dead', hostname: 'h', pid: 2 }, leaseMs: 200 });
    await live.claimPending(1, { only: new Set(['live']) });
    await dead.claimPending(1, { only: new Set(['dead']) });
    await live.transition('live', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await dead.transition('dead', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await new Promise((r) => setTimeout(r, 300));
    const copy = await WorkingCopy.load(pool, runId);
    let wb: WriteBack;
    try {
      copy.store.openRun('/recover/m.yaml', '/tmp/out', 'http://svc', false, false);
      expect(copy.store.recoverSubmitting().sort()).toEqual(['dead', 'live']);
      wb = await copy.writeBack(pool);
    } finally {
      copy.close();
    }
    expect(wb).toMatchObject({ held: 1, conflicts: 0 });
    expect((await jobsOf(runId)).map((j) => [j.id, j.state])).toEqual([
      ['live', 'submitting'],
      ['dead', 'uncertain'],
    ]);
    expect(await live.transition('live', 'submitting', 'submitted', { task_id: 'task-live' })).toEqual({ moved: true, side: [] });
  });
});
