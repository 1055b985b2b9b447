import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransitionError } from '../src/errors.js';
import { inTx, openPool, type Pool } from '../src/store/pg/db.js';
import { claimPending, guardedMove, takeOver, type LeasedJob } from '../src/store/pg/leases.js';
import { migrate } from '../src/store/pg/schema.js';
import { heartbeat } from '../src/store/pg/workers.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('PostgreSQL job leases (src/store/pg/leases.ts)', () => {
  let db: TestDatabase;
  let pool: Pool;
  const others: Pool[] = [];
  beforeAll(async () => {
    db = await testDatabase();
    pool = openPool(db.url);
    await migrate(pool);
    for (let i = 0; i < 4; i++) others.push(openPool(db.url, { max: 2 }));
  });
  afterAll(async () => {
    for (const p of [pool, ...others]) await p.end();
    await db.drop();
  });

  const claim = (p: Pool, runId: number, owner: string, n: number, leaseMs = 30_000) => inTx(p, (c) => claimPending(c, runId, owner, leaseMs, n));
  const stateOf = async (runId: number, id: string) =>
    (await pool.query<{ state: string; lease_owner: string | null; lease_epoch: number }>('SELECT state, lease_owner, lease_epoch FROM jobs WHERE run_id = $1 AND id = $2', [runId, id])).rows[0]!;

  it('4 workers claiming at once get every pending job exactly once, each worker in manifest order, leased with epoch 1', async () => {
    const runId = await seedRun(pool, 'claims', Array.from({ length: 300 }, (_, i) => ({ id: `j${String(i).padStart(3, '0')}` })));
    const got = await Promise.all(
      others.map(async (p, w) => {
        const mine: LeasedJob[] = [];
        for (;;) {
          const c = await claim(p, runId, `w${w}`, 7);
          if (c.jobs.length === 0) return mine;
          mine.push(...c.jobs);
        }
      }),
    );
    const all = got.flat();
    expect(all).toHaveLength(300);
    expect(new Set(all.map((j) => j.id)).size).toBe(300);
    for (const mine of got) expect(mine.map((j) => j.seq)).toEqual([...mine.map((j) => j.seq)].sort((a, b) => a - b));
    expect(all.every((j) => j.lease_epoch === 1 && j.state === 'pending')).toBe(true);
    const owners = await pool.query<{ n: number }>(`SELECT count(DISTINCT lease_owner)::int AS n FROM jobs WHERE run_id = $1`, [runId]);
    expect(owners.rows[0]!.n).toBeGreaterThan(1);
  });

  it('claims a job only once every job it needs is done, and never one leased by a live worker', async () => {
    const runId = await seedRun(pool, 'graph', [{ id: 'a' }, { id: 'b', needs: ['a'] }, { id: 'c' }]);
    const first = await claim(pool, runId, 'w1', 10);
    expect(first.jobs.map((j) => j.id)).toEqual(['a', 'c']);
    expect((await claim(pool, runId, 'w2', 10)).jobs).toEqual([]);
    const lease = { owner: 'w1', epoch: first.jobs[0]!.lease_epoch };
    expect(await guardedMove(pool, runId, 'a', lease, 'pending', 'done', {}, 30_000)).toBe('moved');
    expect((await claim(pool, runId, 'w2', 10)).jobs.map((j) => j.id)).toEqual(['b']);
  });

  it('a worker whose lease expired and was taken over writes nothing; the new holder does', async () => {
    const runId = await seedRun(pool, 'takeover', [{ id: 'x' }]);
    const [job] = (await claim(pool, runId, 'old', 1, 300)).jobs;
    const old = { owner: 'old', epoch: job!.lease_epoch };
    expect(await guardedMove(pool, runId, 'x', old, 'pending', 'submitting', { attemptsInc: 1 }, 300)).toBe('moved');
    expect(await guardedMove(pool, runId, 'x', old, 'submitting', 'submitted', { task_id: 't1' }, 300)).toBe('moved');
    // Still leased: nobody takes it over.
    expect((await inTx(pool, (c) => takeOver(c, runId, 'new', 30_000, 10))).adopted).toEqual([]);
    await sleep(400);
    const t = await inTx(pool, (c) => takeOver(c, runId, 'new', 30_000, 10));
    expect(t.adopted.map((j) => [j.id, j.state, j.task_id, j.lease_epoch])).toEqual([['x', 'submitted', 't1', 2]]);
    expect(await guardedMove(pool, runId, 'x', old, 'submitted', 'downloading', { result: 'late' }, 300)).toBe('lost');
    expect(await stateOf(runId, 'x')).toEqual({ state: 'submitted', lease_owner: 'new', lease_epoch: 2 });
    expect(await guardedMove(pool, runId, 'x', { owner: 'new', epoch: 2 }, 'submitted', 'downloading', {}, 30_000)).toBe('moved');
    expect(await guardedMove(pool, runId, 'x', { owner: 'new', epoch: 2 }, 'downloading', 'done', {}, 30_000)).toBe('moved');
    // Done: the lease ends.
    expect(await stateOf(runId, 'x')).toEqual({ state: 'done', lease_owner: null, lease_epoch: 2 });
  });

  it('a worker paused past its lease writes nothing even before another takes the job over', async () => {
    const runId = await seedRun(pool, 'paused', [{ id: 'p' }]);
    const [job] = (await claim(pool, runId, 'slow', 1, 200)).jobs;
    await sleep(300);
    expect(await guardedMove(pool, runId, 'p', { owner: 'slow', epoch: job!.lease_epoch }, 'pending', 'submitting', {}, 200)).toBe('lost');
    expect((await stateOf(runId, 'p')).state).toBe('pending');
    // Free again: another worker claims it (epoch 2).
    expect((await claim(pool, runId, 'other', 1)).jobs.map((j) => [j.id, j.lease_epoch])).toEqual([['p', 2]]);
  });

  it("takeover: a dead worker's submitting job becomes uncertain (never claimed or sent again), a chat call goes back to pending", async () => {
    const runId = await seedRun(pool, 'dead', [{ id: 's' }, { id: 'chat', kind: 'chat' }, { id: 'd' }]);
    const jobs = (await claim(pool, runId, 'dead', 3, 200)).jobs;
    for (const j of jobs) expect(await guardedMove(pool, runId, j.id, { owner: 'dead', epoch: j.lease_epoch }, 'pending', 'submitting', {}, 200)).toBe('moved');
    const d = jobs.find((j) => j.id === 'd')!;
    expect(await guardedMove(pool, runId, 'd', { owner: 'dead', epoch: d.lease_epoch }, 'submitting', 'submitted', { task_id: 'td' }, 200)).toBe('moved');
    await sleep(300);
    const t = await inTx(pool, (c) => takeOver(c, runId, 'live', 30_000, 10));
    expect(t.uncertain).toEqual(['s']);
    expect(t.pending).toEqual(['chat']);
    expect(t.adopted.map((j) => j.id)).toEqual(['d']);
    expect(await stateOf(runId, 's')).toEqual({ state: 'uncertain', lease_owner: null, lease_epoch: 2 });
    // The dead worker's answer, arriving late, is refused.
    const s = jobs.find((j) => j.id === 's')!;
    expect(await guardedMove(pool, runId, 's', { owner: 'dead', epoch: s.lease_epoch }, 'submitting', 'submitted', { task_id: 'ts' }, 200)).toBe('lost');
    // Only the chat job is claimable again.
    expect((await claim(pool, runId, 'live', 10)).jobs.map((j) => j.id)).toEqual(['chat']);
  });

  it('a move refused because the lease had run out, renewed by the heartbeat before the refusal is looked into, is made again', async () => {
    const runId = await seedRun(pool, 'renewed-between', [{ id: 'r' }]);
    // The worker's row has run out too (a paused worker): nothing holds the job at the UPDATE.
    await pool.query(`INSERT INTO workers (id, hostname, pid, lease_expires) VALUES ('racer', 'host', 1, now() - interval '1 second')`);
    const [job] = (await claim(pool, runId, 'racer', 1, 200)).jobs;
    await sleep(300);
    // The heartbeat lands between the refused UPDATE and the read that says why it was refused.
    let statements = 0;
    const q = {
      query: async (...args: Parameters<Pool['query']>) => {
        const r = await (pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
        if (++statements === 1) await heartbeat(pool, 'racer', 30_000);
        return r;
      },
    } as unknown as Pool;
    expect(await guardedMove(q, runId, 'r', { owner: 'racer', epoch: job!.lease_epoch }, 'pending', 'submitting', {}, 30_000)).toBe('moved');
    expect(statements).toBe(3);
    expect((await stateOf(runId, 'r')).state).toBe('submitting');
  });

  it("a heartbeat keeps the leases of a live worker past their first expiry, writing the worker's row alone", async () => {
    const runId = await seedRun(pool, 'heartbeat', [{ id: 'h' }]);
    await pool.query(`INSERT INTO workers (id, hostname, pid) VALUES ('beating', 'host', 1)`);
    const [job] = (await claim(pool, runId, 'beating', 1, 400)).jobs;
    const jobRow = async () => (await pool.query(`SELECT lease_expires::text AS e, xmin::text AS x FROM jobs WHERE run_id = $1 AND id = 'h'`, [runId])).rows[0];
    const before = await jobRow();
    for (let i = 0; i < 4; i++) {
      await sleep(200);
      expect(await heartbeat(pool, 'beating', 400)).toBe(true);
    }
    // The job's own lease has run out, its row untouched since the claim: the worker's row holds it.
    expect(await jobRow()).toEqual(before);
    expect((await inTx(pool, (c) => takeOver(c, runId, 'thief', 30_000, 10))).adopted).toEqual([]);
    expect((await claim(pool, runId, 'thief', 1)).jobs).toEqual([]);
    expect(await guardedMove(pool, runId, 'h', { owner: 'beating', epoch: job!.lease_epoch }, 'pending', 'submitting', {}, 400)).toBe('moved');
    // No heartbeat for a whole lease: the job's own lease (renewed by that move) and the row run out; another takes it over.
    await sleep(500);
    expect((await inTx(pool, (c) => takeOver(c, runId, 'thief', 30_000, 10))).uncertain).toEqual(['h']);
  });

  it("a job whose own lease ran out stays held while its worker's row is live, and is taken over once the row runs out too", async () => {
    const runId = await seedRun(pool, 'row-holds', [{ id: 'w1' }, { id: 'w2' }]);
    await pool.query(`INSERT INTO workers (id, hostname, pid, lease_expires) VALUES ('rowed', 'host', 1, now() + interval '600 milliseconds')`);
    const jobs = (await claim(pool, runId, 'rowed', 2, 100)).jobs;
    for (const j of jobs) {
      const lease = { owner: 'rowed', epoch: j.lease_epoch };
      expect(await guardedMove(pool, runId, j.id, lease, 'pending', 'submitting', {}, 100)).toBe('moved');
      expect(await guardedMove(pool, runId, j.id, lease, 'submitting', 'submitted', { task_id: `t-${j.id}` }, 100)).toBe('moved');
    }
    await sleep(200);
    // Own leases (100 ms) over, the row live: nobody takes them, and the holder still moves them.
    expect((await inTx(pool, (c) => takeOver(c, runId, 'thief', 30_000, 10))).adopted).toEqual([]);
    expect(await guardedMove(pool, runId, 'w1', { owner: 'rowed', epoch: jobs[0]!.lease_epoch }, 'submitted', 'downloading', {}, 100)).toBe('moved');
    await sleep(600);
    const t = await inTx(pool, (c) => takeOver(c, runId, 'thief', 30_000, 10));
    expect(t.adopted.map((j) => [j.id, j.state])).toEqual([
      ['w1', 'downloading'],
      ['w2', 'submitted'],
    ]);
    expect(await guardedMove(pool, runId, 'w2', { owner: 'rowed', epoch: jobs[1]!.lease_epoch }, 'submitted', 'downloading', {}, 100)).toBe('lost');
  });

  it('refuses a change that TRANSITIONS does not list, and a wrong from-state while holding the lease', async () => {
    const runId = await seedRun(pool, 'rules', [{ id: 'r' }]);
    const [job] = (await claim(pool, runId, 'w', 1)).jobs;
    const lease = { owner: 'w', epoch: job!.lease_epoch };
    await expect(guardedMove(pool, runId, 'r', lease, 'pending', 'downloading', {}, 30_000)).rejects.toThrow(TransitionError);
    await expect(guardedMove(pool, runId, 'r', lease, 'submitted', 'downloading', {}, 30_000)).rejects.toThrow(/expected state submitted .* found pending/);
  });
});
