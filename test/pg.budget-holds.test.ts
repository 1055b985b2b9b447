import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_JOBS } from '../src/store/pg/budget-holds.js';
import { PgLedger, budgetRow, setBudgetCap } from '../src/store/pg/budget.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate } from '../src/store/pg/schema.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

/**
 * Credits a worker takes from the budget row for its next sends (src/store/pg/budget-holds.ts), on a real
 * PostgreSQL: most sends leave the shared row alone, the cap is never crossed by the workers together, a
 * worker at the cap holds nothing, and a dead worker's hold goes back to the others.
 */
describe('budget holds: credits taken in batches by each worker', () => {
  let db: TestDatabase;
  let pool: Pool;
  beforeAll(async () => {
    db = await testDatabase();
    pool = openPool(db.url, { max: 12 });
    await migrate(pool);
  }, 120_000);
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  const seed = (name: string, n: number): Promise<number> => seedRun(pool, name, Array.from({ length: n }, (_, i) => ({ id: `j${String(i).padStart(3, '0')}` })));
  const live = async (...ids: string[]) => {
    for (const id of ids) {
      await pool.query(`INSERT INTO workers (id, hostname, pid, lease_expires) VALUES ($1, 'host', 1, now() + interval '1 hour') ON CONFLICT (id) DO UPDATE SET lease_expires = EXCLUDED.lease_expires`, [id]);
    }
  };
  const budgetXmin = async (runId: number) => (await pool.query<{ x: string }>('SELECT xmin::text AS x FROM budget WHERE run_id = $1', [runId])).rows[0]!.x;
  const jobsReserved = async (runId: number) => Number((await pool.query<{ s: number | null }>('SELECT sum(reserved_credits) AS s FROM jobs WHERE run_id = $1', [runId])).rows[0]!.s ?? 0);
  const holds = async (runId: number) => (await pool.query<{ worker: string; credits: number }>('SELECT worker, credits FROM budget_holds WHERE run_id = $1 ORDER BY worker', [runId])).rows;

  it('the first send takes a batch; the next ones come from the hold without writing the budget row; the totals count the jobs alone', async () => {
    const runId = await seed('batch', 40);
    await setBudgetCap(pool, runId, 100);
    await live('w1');
    const ledger = new PgLedger(pool, runId, 'w1');
    expect(await ledger.reserve('j000', 2, false)).toEqual({ ok: true, spent: 0, reserved: 2 });
    // 2 for the job, and the batch: 15 more jobs' worth (30) or a quarter of the 98 left (24.5), the less.
    expect(await budgetRow(pool, runId)).toMatchObject({ reserved: 26.5 });
    expect(await holds(runId)).toEqual([{ worker: 'w1', credits: 24.5 }]);
    const xmin = await budgetXmin(runId);
    for (let i = 1; i <= 12; i++) expect(await ledger.reserve(`j${String(i).padStart(3, '0')}`, 2, false)).toEqual({ ok: true, spent: 0, reserved: 2 * (i + 1) });
    expect(await budgetXmin(runId)).toBe(xmin);
    expect(await holds(runId)).toEqual([{ worker: 'w1', credits: 0.5 }]);
    // The hold no longer covers a job: the row again.
    expect((await ledger.reserve('j013', 2, false)).ok).toBe(true);
    expect(await budgetXmin(runId)).not.toBe(xmin);
    expect(await jobsReserved(runId)).toBe(28);
    await ledger.close();
    expect(await holds(runId)).toEqual([]);
    expect(await budgetRow(pool, runId)).toMatchObject({ reserved: 28 });
    expect(BATCH_JOBS).toBe(15);
  });

  it('four workers sending at once never reserve past the cap together, and between them use all of it', async () => {
    const runId = await seed('race', 200);
    await setBudgetCap(pool, runId, 50);
    const workers = ['r1', 'r2', 'r3', 'r4'];
    await live(...workers);
    let next = 0;
    const sent = await Promise.all(
      workers.map(async (w) => {
        const ledger = new PgLedger(pool, runId, w);
        let n = 0;
        for (;;) {
          const id = `j${String(next++).padStart(3, '0')}`;
          const r = await ledger.reserve(id, 1, false);
          expect(r.spent + r.reserved).toBeLessThanOrEqual(50 + 1e-9);
          if (!r.ok) break;
          n++;
        }
        await ledger.close();
        return n;
      }),
    );
    expect(sent.reduce((a, b) => a + b, 0)).toBe(50);
    expect(await jobsReserved(runId)).toBe(50);
    expect(await holds(runId)).toEqual([]);
    expect(await budgetRow(pool, runId)).toMatchObject({ reserved: 50 });
  });

  it('a send that does not fit gives the whole hold back: a worker at the cap holds nothing', async () => {
    const runId = await seed('full', 10);
    await setBudgetCap(pool, runId, 10);
    await live('a', 'b');
    const a = new PgLedger(pool, runId, 'a');
    const b = new PgLedger(pool, runId, 'b');
    expect((await a.reserve('j000', 4, false)).ok).toBe(true);
    // a holds a quarter of the 6 left after its job (1.5): b's 5 does not fit the 4.5 free, and b holds nothing.
    expect(await holds(runId)).toEqual([{ worker: 'a', credits: 1.5 }]);
    expect(await b.reserve('j001', 5, false)).toEqual({ ok: false, spent: 0, reserved: 4 });
    // a's next job of 6.5 does not fit its hold and the room (1.5 + 4.5): a gives its hold back.
    expect(await a.reserve('j002', 6.5, false)).toEqual({ ok: false, spent: 0, reserved: 4 });
    expect(await holds(runId)).toEqual([]);
    expect(await budgetRow(pool, runId)).toMatchObject({ reserved: 4 });
    // Now b's 5 fits in the 6 left.
    expect((await b.reserve('j001', 5, false)).ok).toBe(true);
  });

  it("a dead worker's hold goes back to the run at another worker's next take; the dead one can no longer send from it", async () => {
    const runId = await seed('dead', 10);
    await setBudgetCap(pool, runId, 10);
    await live('gone', 'alive');
    const gone = new PgLedger(pool, runId, 'gone');
    expect((await gone.reserve('j000', 2, false)).ok).toBe(true);
    expect(await holds(runId)).toEqual([{ worker: 'gone', credits: 2 }]);
    await pool.query(`UPDATE workers SET lease_expires = now() - interval '1 second' WHERE id = 'gone'`);
    const alive = new PgLedger(pool, runId, 'alive');
    // 8 fits only with the dead worker's 2 back: 10 - 2 (its job) = 8.
    expect(await alive.reserve('j001', 8, false)).toEqual({ ok: true, spent: 0, reserved: 10 });
    expect(await holds(runId)).toEqual([{ worker: 'alive', credits: 0 }]);
    // Woken, the dead worker's cached hold is not trusted: its row is gone, so the send goes to the row, and does not fit.
    expect(await gone.reserve('j002', 2, false)).toEqual({ ok: false, spent: 0, reserved: 10 });
    expect(await budgetRow(pool, runId)).toMatchObject({ reserved: 10 });
  });

  it('a reading neither waits for a job being written nor releases it: that one is released by the next reading', async () => {
    const runId = await seed('skip-locked', 3);
    await setBudgetCap(pool, runId, 100);
    const ledger = new PgLedger(pool, runId);
    await ledger.reserve('j000', 2, false);
    await ledger.reserve('j001', 3, false);
    await ledger.settle(1000, []);
    // A worker moving j000 to done holds its row.
    const mover = await pool.connect();
    try {
      await mover.query('BEGIN');
      await mover.query(`SELECT 1 FROM jobs WHERE run_id = $1 AND id = 'j000' FOR UPDATE`, [runId]);
      expect(await ledger.settle(995, ['j000', 'j001'])).toEqual({ spent: 5, reserved: 2 });
      await mover.query('COMMIT');
    } finally {
      mover.release();
    }
    expect(await ledger.settle(995, ['j000'])).toEqual({ spent: 5, reserved: 0 });
  });

  it('a reading counts the jobs released, not the holds', async () => {
    const runId = await seed('reading', 10);
    await setBudgetCap(pool, runId, 100);
    await live('s');
    const ledger = new PgLedger(pool, runId, 's');
    await ledger.reserve('j000', 2, false);
    await ledger.reserve('j001', 2, false);
    expect(await ledger.settle(1000, [])).toEqual({ spent: 0, reserved: 4 });
    expect(await ledger.settle(998, ['j000'])).toEqual({ spent: 2, reserved: 2 });
    // The hold is still counted in the row: spent + reserved + holds never pass the cap.
    const row = (await budgetRow(pool, runId))!;
    expect(row.reserved).toBeGreaterThan(2);
  });
});
