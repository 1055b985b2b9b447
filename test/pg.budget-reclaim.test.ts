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
});
