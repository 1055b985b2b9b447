import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgLedger, budgetOf, setBudgetCap } from '../src/store/pg/budget.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { claimPending } from '../src/store/pg/leases.js';
import { migrate } from '../src/store/pg/schema.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

/**
 * Reservations a dead worker left behind do not hold the cap for ever: a reading of any worker ends the
 * reservation of every job no longer at the service (ended, or pending with no live lease), and keeps those
 * still at the service or pending in a live worker's hands. A claim reserves nothing (only sending does).
 */
describe('shared cap and the reservations of dead workers', () => {
  let db: TestDatabase;
  let pool: Pool;
  beforeAll(async () => {
    db = await testDatabase();
    pool = openPool(db.url);
    await migrate(pool);
  }, 120_000);
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('a reading ends the reservations of jobs no longer at the service, whoever reserved them; claims reserve nothing', async () => {
    const runId = await seedRun(pool, 'reclaim', Array.from({ length: 4 }, (_, i) => ({ id: `r${i}`, credits: 10 })));
    await setBudgetCap(pool, runId, 40);
    const dead = new PgLedger(pool, runId);
    // A worker claims all four (nothing reserved), reserves r0..r2 as it sends them, and dies: r0 finished, r1 is at the service, r2 was never sent.
    expect((await claimPending(pool, runId, 'dead', 50, 4)).jobs.map((j) => j.id)).toEqual(['r0', 'r1', 'r2', 'r3']);
    expect(await budgetOf(pool, runId)).toEqual({ cap: 40, reserved: 0 });
    for (const id of ['r0', 'r1', 'r2']) expect((await dead.reserve(id, 10, false)).ok).toBe(true);
    await pool.query(`UPDATE jobs SET state = 'downloading' WHERE run_id = $1 AND id = 'r0'`, [runId]);
    await pool.query(`UPDATE jobs SET state = 'submitted' WHERE run_id = $1 AND id = 'r1'`, [runId]);
    await new Promise((r) => setTimeout(r, 120));
    // Another worker's reading: r0 (ended) and r2 (pending, its claimer's lease over) are released; r1 is kept.
    const live = new PgLedger(pool, runId);
    const release = await live.releasable([]);
    expect(release.sort()).toEqual(['r0', 'r2']);
    expect(await live.settle(500, release)).toEqual({ spent: 0, reserved: 10 });
    expect((await live.reserve('r3', 10, false)).ok).toBe(true);
  });

  it('two workers\' balance readings that cross on the way: the one begun earlier, applied last, does not take spent back', async () => {
    const runId = await seedRun(pool, 'crossing', [{ id: 'c0', credits: 10 }]);
    await setBudgetCap(pool, runId, 100);
    const a = new PgLedger(pool, runId);
    const b = new PgLedger(pool, runId);
    await a.releasable([]);
    expect(await a.settle(1000, [])).toEqual({ spent: 0, reserved: 0 }); // the base
    // Worker a begins a reading (its ticket), then worker b begins one; b's answer (990) is applied first, then
    // a's, read earlier (995): spent stays at 10, the balance at 990.
    const ra = await a.releasable([]);
    const rb = await b.releasable([]);
    expect(await b.settle(990, rb)).toEqual({ spent: 10, reserved: 0 });
    expect(await a.settle(995, ra)).toEqual({ spent: 10, reserved: 0 });
    expect((await pool.query('SELECT balance, spent FROM budget WHERE run_id = $1', [runId])).rows[0]).toEqual({ balance: 990, spent: 10 });
    // The next reading counts from 990.
    await a.releasable([]);
    expect(await a.settle(985, [])).toEqual({ spent: 15, reserved: 0 });
  });

  it('a job both crossing readings release ends its reservation once, and spent counts its charge once', async () => {
    const runId = await seedRun(pool, 'crossing-release', [{ id: 'x0', credits: 10 }]);
    await setBudgetCap(pool, runId, 100);
    const a = new PgLedger(pool, runId);
    const b = new PgLedger(pool, runId);
    await a.releasable([]);
    await a.settle(1000, []);
    expect((await a.reserve('x0', 10, false)).ok).toBe(true);
    await pool.query(`UPDATE jobs SET state = 'done' WHERE run_id = $1 AND id = 'x0'`, [runId]);
    const ra = await a.releasable([]);
    expect(ra).toEqual(['x0']);
    const rb = await b.releasable([]);
    expect(await b.settle(990, rb)).toEqual({ spent: 10, reserved: 0 });
    expect(await a.settle(1000, ra)).toEqual({ spent: 10, reserved: 0 });
  });

  it("a new invocation's base is a reading taken before it sends: never while a job of the run may hold an uncounted charge, never over a later reading", async () => {
    const runId = await seedRun(pool, 'joining', [{ id: 'j0', credits: 10 }]);
    await setBudgetCap(pool, runId, 100);
    const first = new PgLedger(pool, runId);
    await first.releasable([]);
    expect(await first.rebase(1000)).toBe(true);
    // The first worker sends j0 (reserved); it is charged and ends before any reading counts it.
    expect((await first.reserve('j0', 10, false)).ok).toBe(true);
    await pool.query(`UPDATE jobs SET state = 'done' WHERE run_id = $1 AND id = 'j0'`, [runId]);
    // A second worker of the same night starts: the cap is set again; its reading (990) is not a new base, j0's charge would be lost.
    await setBudgetCap(pool, runId, 100);
    const second = new PgLedger(pool, runId);
    await second.releasable([]);
    expect(await second.rebase(990)).toBe(false);
    const release = await second.releasable([]);
    expect(release).toEqual(['j0']);
    expect(await second.settle(990, release)).toEqual({ spent: 10, reserved: 0 });
    // Another night, nothing reserved or at the service: the key's use in between (90) is not the run's.
    await setBudgetCap(pool, runId, 100);
    const night = new PgLedger(pool, runId);
    await night.releasable([]);
    expect(await night.rebase(900)).toBe(true);
    await night.releasable([]);
    expect(await night.settle(890, [])).toEqual({ spent: 20, reserved: 0 });
    // A base begun before a reading that was applied first is refused (it would take spent back in time).
    const early = new PgLedger(pool, runId);
    await early.releasable([]);
    const late = new PgLedger(pool, runId);
    await late.releasable([]);
    expect(await late.settle(880, [])).toEqual({ spent: 30, reserved: 0 });
    expect(await early.rebase(950)).toBe(false);
    expect((await pool.query('SELECT balance FROM budget WHERE run_id = $1', [runId])).rows[0]).toEqual({ balance: 880 });
  });
});
