import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { budgetOf, setBudgetCap } from '../src/store/pg/budget.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { claimPending } from '../src/store/pg/leases.js';
import { migrate } from '../src/store/pg/schema.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

/**
 * A pending job claimed again after its claimer's lease ran out (the worker killed or paused before sending
 * it) keeps the one reservation: found by the chaos test, where killed workers' claims were reserved twice
 * and the run's last jobs, held by the budget, were never sent.
 */
describe('shared budget and expired claims', () => {
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

  it('a job claimed again after the lease of a dead claimer ran out reserves nothing more; every job of a run capped at its estimate is claimed', async () => {
    const runId = await seedRun(pool, 'reclaim', Array.from({ length: 4 }, (_, i) => ({ id: `r${i}`, credits: 10 })));
    await setBudgetCap(pool, runId, 40);
    // A worker claims two jobs with a lease of 50 ms and dies before sending them.
    expect((await claimPending(pool, runId, 'dead', 50, 2)).jobs.map((j) => j.id)).toEqual(['r0', 'r1']);
    expect(await budgetOf(pool, runId)).toEqual({ cap: 40, reserved: 20 });
    await new Promise((r) => setTimeout(r, 120));
    // Another worker claims the whole run: the two jobs' reservations carry over; the cap is the estimate and holds all four.
    const c = await claimPending(pool, runId, 'live', 30_000, 10);
    expect(c.jobs.map((j) => j.id)).toEqual(['r0', 'r1', 'r2', 'r3']);
    expect(c.heldByBudget).toBe(false);
    expect(await budgetOf(pool, runId)).toEqual({ cap: 40, reserved: 40 });
    const rows = await pool.query<{ id: string; reserved_credits: number }>('SELECT id, reserved_credits FROM jobs WHERE run_id = $1 ORDER BY seq', [runId]);
    expect(rows.rows.map((r) => r.reserved_credits)).toEqual([10, 10, 10, 10]);
  });
});
