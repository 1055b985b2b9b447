import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { PgLedger } from '../src/store/pg/budget.js';
import { migrate } from '../src/store/pg/schema.js';
import { keyFingerprint, PgWorkStore, type PgWorkStoreOptions } from '../src/store/pg/work-store.js';
import { seedRun, testDatabase, type SeedJob, type TestDatabase } from './helpers/pg.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const KEY = 'sk-secret-key-never-stored';
const got = (idx: number) => ({ idx, path: `a/${idx}.png`, size: 3, sha256: 'cd'.repeat(32), content_type: 'image/png' });
const file = (idx: number) => ({ idx, name: `${idx}.png`, url: `http://files.test/${idx}.png`, type: 'image', content_type: 'image/png', expected_size: 3, expires_at: null });

describe('PgWorkStore: several workers on one run', () => {
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
  async function run(jobs: SeedJob[]): Promise<number> {
    return seedRun(admin, `/run${++runs}.yaml`, jobs);
  }
  async function worker(runId: number, name: string, o: Partial<PgWorkStoreOptions> = {}): Promise<PgWorkStore> {
    const pool = openPool(db.url, { max: 3 });
    pools.push(pool);
    return PgWorkStore.open({ pool, runId, apiKey: KEY, worker: { id: name, hostname: 'host', pid: 1 }, slotPollMs: 20, ...o });
  }

  it('a worker whose pipeline stopped for lost leases lets go of them: its next pass takes its in-flight jobs over, the heartbeat renews nothing', async () => {
    const runId = await run([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
    const w = await worker(runId, 'restarted', { leaseMs: 300 });
    expect((await w.claimPending(3)).jobs.map((j) => j.id)).toEqual(['a', 'b', 'c']);
    await w.transition('a', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await w.transition('a', 'submitting', 'submitted', { task_id: 'task-a' }, { durable: true });
    await w.transition('b', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    // Paused past its lease, nobody took over: without dropLeases the heartbeat would renew all three for good.
    await sleep(400);
    await w.dropLeases();
    await w.heartbeat();
    const owners = await admin.query('SELECT id, lease_owner FROM jobs WHERE run_id = $1 ORDER BY id', [runId]);
    expect(owners.rows).toEqual([
      { id: 'a', lease_owner: null },
      { id: 'b', lease_owner: null },
      { id: 'c', lease_owner: null },
    ]);
    const t = await w.takeOver();
    expect(t.submitted.map((j) => j.id)).toEqual(['a']);
    expect(t.moves.map((m) => [m.id, m.to])).toEqual([['b', 'uncertain']]);
    expect((await w.claimPending(3)).jobs.map((j) => j.id)).toEqual(['c']);
  });

  it('a callback reaching another worker adopts the submitted job from its live holder: the holder\'s writes are refused, the adopter finishes it', async () => {
    const runId = await run([{ id: 'a' }, { id: 'b' }]);
    const holder = await worker(runId, 'holder');
    const other = await worker(runId, 'other');
    expect((await holder.claimPending(1)).jobs.map((j) => j.id)).toEqual(['a']);
    await holder.transition('a', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await holder.transition('a', 'submitting', 'submitted', { task_id: 'task-a' }, { durable: true });
    // Another task's callback, or a job not submitted, adopts nothing.
    expect(await other.adoptWaiting('a', 'task-x')).toBeNull();
    expect(await other.adoptWaiting('b', 'task-a')).toBeNull();
    const taken = await other.adoptWaiting('a', 'task-a');
    expect(taken).toMatchObject({ id: 'a', state: 'submitted', task_id: 'task-a' });
    // Adopted once: the same callback again (already this worker's) adopts nothing more.
    expect(await other.adoptWaiting('a', 'task-a')).toBeNull();
    expect(await holder.transition('a', 'submitted', 'downloading', { result: '{}' }, { addFiles: [file(0)] })).toEqual({ moved: false });
    expect(await other.transition('a', 'submitted', 'downloading', { result: '{}' }, { addFiles: [file(0)] })).toEqual({ moved: true, side: [] });
    expect(await other.transition('a', 'downloading', 'done', {}, { filesDone: [got(0)] })).toEqual({ moved: true, side: [] });
    const w = await admin.query('SELECT worker FROM files WHERE run_id = $1 AND job_id = $2', [runId, 'a']);
    expect(w.rows).toEqual([{ worker: 'other' }]);
  });

  it('a worker paused past its lease writes nothing once another took its job over: transitions, files and for_each children refused', async () => {
    const runId = await run([{ id: 'a' }, { id: 't', kind: 'fanout' }]);
    const slow = await worker(runId, 'slow', { leaseMs: 300 });
    const live = await worker(runId, 'live', { leaseMs: 30_000 });
    expect((await slow.claimPending(10)).jobs.map((j) => j.id)).toEqual(['a', 't']);
    await slow.transition('a', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await slow.transition('a', 'submitting', 'submitted', { task_id: 'task-a' }, { durable: true });
    await slow.transition('a', 'submitted', 'downloading', { result: '{}' }, { addFiles: [file(0)] });
    // slow is paused (no heartbeat) past its lease; live takes over.
    await sleep(400);
    const t = await live.takeOver();
    expect(t.downloading.map((j) => j.id)).toEqual(['a']);
    expect(await slow.recordFiles('a', [got(0)])).toBe(false);
    expect(await slow.transition('a', 'downloading', 'done', {}, { filesDone: [got(0)] })).toEqual({ moved: false });
    const child = { id: 't.0', model: 'm', kind: 'submit', where: 't, item 0', specHash: 'h', spec: '{}', estimatedCredits: 1, parents: [] };
    expect(await slow.expand('t', [child], 'late')).toBeNull();
    expect((await live.filesOf('a')).map((f) => f.state)).toEqual(['pending']);
    // The new holder finishes it; the file row records it.
    expect(await live.transition('a', 'downloading', 'done', {}, { filesDone: [got(0)] })).toEqual({ moved: true, side: [] });
    const w = await admin.query('SELECT worker FROM files WHERE run_id = $1 AND job_id = $2', [runId, 'a']);
    expect(w.rows).toEqual([{ worker: 'live' }]);
    // The pending for_each job slow had claimed is free again for live.
    expect((await live.claimPending(10)).jobs.map((j) => j.id)).toEqual(['t']);
    expect(await live.expand('t', [child], '1 job(s)')).toEqual(['t.0']);
  });

  it("takeOver moves a dead worker's submitting job to uncertain, skipping what waits for it; a late callback adopts it and brings them back", async () => {
    const runId = await run([{ id: 'a' }, { id: 'b', needs: ['a'] }, { id: 'c', needs: ['b'] }]);
    const dead = await worker(runId, 'dead', { leaseMs: 200 });
    const live = await worker(runId, 'live');
    await dead.claimPending(10);
    await dead.transition('a', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await sleep(300);
    const t = await live.takeOver();
    expect(t.moves.map((m) => [m.id, m.from, m.to])).toEqual([
      ['a', 'submitting', 'uncertain'],
      ['b', 'pending', 'skipped'],
      ['c', 'pending', 'skipped'],
    ]);
    expect((await live.takeOver()).moves).toEqual([]);
    const errors = await admin.query('SELECT state, error FROM job_errors WHERE run_id = $1 AND job_id = $2', [runId, 'a']);
    expect(errors.rows).toEqual([{ state: 'uncertain', error: expect.stringContaining('lease expired') }]);
    // A callback names its task: live adopts it, the skipped descendants come back.
    const adopted = await live.transition('a', 'uncertain', 'submitted', { task_id: 'task-a' });
    expect(adopted.moved && adopted.side.map((m) => [m.id, m.to])).toEqual([
      ['b', 'pending'],
      ['c', 'pending'],
    ]);
    // Now live's job: the dead worker's late answer is refused, live's own moves go through.
    expect(await dead.transition('a', 'submitting', 'submitted', { task_id: 'task-a' })).toEqual({ moved: false });
    expect(await live.transition('a', 'submitted', 'downloading', { result: '{}' })).toEqual({ moved: true, side: [] });
  });

  it('under a run cap claims reserve nothing; a sent job reserves its price, and one refused before it was charged (or given back unsent) returns it', async () => {
    const runId = await run(Array.from({ length: 6 }, (_, i) => ({ id: `j${i}`, credits: 2 })));
    const one = await worker(runId, 'one', { creditCap: 7 });
    const two = await worker(runId, 'two');
    const ledger = new PgLedger(admin, runId);
    expect((await one.claimPending(2)).jobs.map((j) => j.id)).toEqual(['j0', 'j1']);
    const second = await two.claimPending(10);
    expect(second.jobs.map((j) => j.id)).toEqual(['j2', 'j3', 'j4', 'j5']);
    expect(second.overBudget).toBe(false);
    for (const id of ['j0', 'j1', 'j2']) expect((await ledger.reserve(id, 2, false)).ok).toBe(true);
    expect((await ledger.reserve('j3', 2, false)).ok).toBe(false);
    // j0 is refused (400): nothing charged, its 2 credits go back; j1 is created (charged): kept.
    await one.transition('j0', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await one.transition('j0', 'submitting', 'failed', { last_error: 'refused: 400' });
    await one.transition('j1', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await one.transition('j1', 'submitting', 'submitted', { task_id: 'task-j1' });
    expect((await admin.query('SELECT cap, reserved FROM budget WHERE run_id = $1', [runId])).rows).toEqual([{ cap: 7, reserved: 4 }]);
    // A job reserved and given back unsent (released) returns its credits too; another worker may take it.
    await two.release(['j2']);
    expect((await admin.query('SELECT reserved FROM budget WHERE run_id = $1', [runId])).rows).toEqual([{ reserved: 2 }]);
    expect((await one.claimPending(1)).jobs.map((j) => j.id)).toEqual(['j2']);
  });

  it('a 429 on one worker holds every worker of the key for at least a window; the key itself is never stored', async () => {
    const runId = await run([{ id: 'a' }]);
    const uploads = { limit: 5, windowMs: 300 };
    const one = await worker(runId, 'one', { uploads });
    const two = await worker(runId, 'two', { uploads });
    const release = await one.acquireUploadSlot();
    await release({ rateLimited: true, retryAfterMs: null });
    const t0 = Date.now();
    const r2 = await two.acquireUploadSlot();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    await r2({ rateLimited: false, retryAfterMs: null });
    await two.acquireStatusRead();
    const keys = await admin.query<{ key: string }>('SELECT DISTINCT key FROM upload_slots');
    expect(keys.rows.map((r) => r.key)).toEqual([keyFingerprint(KEY)]);
    const dump = await admin.query<{ t: string }>(
      `SELECT string_agg(t::text, ' ') AS t FROM (SELECT row_to_json(x) AS t FROM upload_slots x UNION ALL SELECT row_to_json(w) FROM workers w) s`,
    );
    expect(dump.rows[0]!.t).not.toContain(KEY);
  });

  it('heartbeats keep the leases of a worker whose jobs run longer than a lease', async () => {
    const runId = await run([{ id: 'a' }]);
    const busy = await worker(runId, 'busy', { leaseMs: 300 });
    const other = await worker(runId, 'other');
    await busy.claimPending(1);
    await busy.transition('a', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await busy.transition('a', 'submitting', 'submitted', { task_id: 'task-a' });
    for (let i = 0; i < 4; i++) {
      await sleep(150);
      await busy.heartbeat();
    }
    expect(busy.leaseLost).toBe(false);
    expect(await other.workLeft()).toEqual({ pending: 0, inFlight: 1 });
    const t = await other.takeOver();
    expect([...t.submitted, ...t.downloading]).toEqual([]);
    expect(await busy.transition('a', 'submitted', 'downloading', { result: '{}' })).toEqual({ moved: true, side: [] });
  });

  it('a worker beating in the background keeps its jobs while its loop never calls heartbeat(); once stopped, they are taken over', async () => {
    const runId = await run([{ id: 'a' }, { id: 'b' }]);
    const busy = await worker(runId, 'background', { leaseMs: 300 });
    const other = await worker(runId, 'other-bg');
    expect(busy.heartbeatMs).toBe(100);
    const stop = busy.beatInBackground();
    // The pipeline does not beat while the store does.
    expect(busy.heartbeatMs).toBeNull();
    await busy.claimPending(2);
    await busy.transition('a', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await busy.transition('a', 'submitting', 'submitted', { task_id: 'task-bg' });
    // Three leases long, no call from the loop: the timer's beats hold both jobs.
    await sleep(900);
    expect(busy.leaseLost).toBe(false);
    expect((await other.claimPending(2)).jobs).toEqual([]);
    expect((await other.takeOver()).submitted).toEqual([]);
    await stop();
    expect(busy.heartbeatMs).toBe(100);
    await sleep(450);
    expect((await other.takeOver()).submitted.map((j) => j.id)).toEqual(['a']);
    expect((await other.claimPending(2)).jobs.map((j) => j.id)).toEqual(['b']);
  });

  it('the lease is lost only when heartbeats fail for a whole lease, not after a long preparation', async () => {
    const runId = await run([{ id: 'a' }]);
    const pool = openPool(db.url, { max: 2 });
    const w = await PgWorkStore.open({ pool, runId, apiKey: KEY, worker: { id: 'cut', hostname: 'host', pid: 1 }, leaseMs: 200 });
    await sleep(250);
    expect(w.leaseLost).toBe(false);
    await w.heartbeat();
    await pool.end();
    await expect(w.heartbeat()).rejects.toThrow();
    expect(w.leaseLost).toBe(false);
    await sleep(250);
    await expect(w.heartbeat()).rejects.toThrow();
    expect(w.leaseLost).toBe(true);
  });
});
