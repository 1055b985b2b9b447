import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgLedger, budgetOf, budgetRow, pgCap, releaseReservation, setBudgetCap } from '../src/store/pg/budget.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate } from '../src/store/pg/schema.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

/**
 * The budget row of a run shared by its workers (src/store/pg/budget.ts), on a real PostgreSQL: the cap as set
 * by each invocation, what a reservation holds (a job reserved again holds its new price, not both), readings
 * that count the charge, and the cap as a worker sees it (pgCap) with the note the readers get.
 */
describe('the budget row on PostgreSQL', () => {
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

  const seed = (name: string, n = 3, credits = 2): Promise<number> => seedRun(pool, name, Array.from({ length: n }, (_, i) => ({ id: `j${i}`, credits })));
  const balanceOf = async (runId: number): Promise<number | null> => (await pool.query<{ balance: number | null }>('SELECT balance FROM budget WHERE run_id = $1', [runId])).rows[0]!.balance;

  it('a new invocation sets the cap, keeps the name unless given, clears the stop, and keeps the last reading (the base is set by PgLedger.rebase)', async () => {
    const runId = await seed('cap-set');
    const other = await seed('cap-other');
    await setBudgetCap(pool, other, 99, '--max-credits 99');
    expect(await budgetRow(pool, runId)).toBeNull();
    expect(await budgetOf(pool, runId)).toBeNull();
    await setBudgetCap(pool, runId, 10, '--max-credits 10');
    expect(await budgetRow(pool, runId)).toEqual({ cap: 10, reserved: 0, spent: 0, name: '--max-credits 10', stopped: false });
    const cap = (await pgCap(pool, runId))!;
    await cap.ledger.settle(500, []);
    await cap.note(true);
    expect(await budgetRow(pool, runId)).toMatchObject({ stopped: true });
    await setBudgetCap(pool, runId, 12);
    expect(await budgetRow(pool, runId)).toEqual({ cap: 12, reserved: 0, spent: 0, name: '--max-credits 10', stopped: false });
    expect(await balanceOf(runId)).toBe(500);
    await pool.query(`UPDATE jobs SET state = 'submitted' WHERE run_id = $1 AND id = 'j0'`, [runId]);
    await setBudgetCap(pool, runId, 14, 'the manifest budget of 14');
    expect(await balanceOf(runId)).toBe(500);
    expect(await budgetRow(pool, runId)).toMatchObject({ cap: 14, name: 'the manifest budget of 14' });
    await setBudgetCap(pool, runId, null);
    expect(await budgetRow(pool, runId)).toBeNull();
    expect(await pgCap(pool, runId)).toBeNull();
    // Another run's row is left alone.
    expect(await budgetRow(pool, other)).toMatchObject({ cap: 99, name: '--max-credits 99' });
  });

  it('without a budget row every reservation fits and nothing is counted', async () => {
    const runId = await seed('no-row');
    const ledger = new PgLedger(pool, runId);
    expect(await ledger.reserve('j0', 1_000_000, false)).toEqual({ ok: true, spent: 0, reserved: 0 });
    expect(await ledger.settle(100, ['j0'])).toEqual({ spent: 0, reserved: 0 });
  });

  it('a job reserved again holds its new price only; an unknown price fits while spent + reserved is under the cap', async () => {
    const runId = await seed('again');
    await setBudgetCap(pool, runId, 5);
    const ledger = new PgLedger(pool, runId);
    expect(await ledger.reserve('j0', 3, false)).toEqual({ ok: true, spent: 0, reserved: 3 });
    // Reserved again (sent again after an uncertain end): 4 replaces 3, so 4 <= 5 fits.
    expect(await ledger.reserve('j0', 4, false)).toEqual({ ok: true, spent: 0, reserved: 4 });
    expect(await ledger.reserve('j1', 1.5, false)).toEqual({ ok: false, spent: 0, reserved: 4 });
    expect(await ledger.reserve('j1', 1, false)).toEqual({ ok: true, spent: 0, reserved: 5 });
    expect(await ledger.reserve('j2', 0, true)).toEqual({ ok: false, spent: 0, reserved: 5 });
    await ledger.unreserve('j1');
    expect(await ledger.reserve('j2', 0, true)).toEqual({ ok: true, spent: 0, reserved: 4 });
    expect((await pool.query('SELECT id, reserved_credits AS c FROM jobs WHERE run_id = $1 ORDER BY id', [runId])).rows).toEqual([
      { id: 'j0', c: 4 },
      { id: 'j1', c: null },
      { id: 'j2', c: 0 },
    ]);
  });

  it('float sums within 1e-9 of the cap fit', async () => {
    const runId = await seed('float');
    await setBudgetCap(pool, runId, 0.3);
    const ledger = new PgLedger(pool, runId);
    expect((await ledger.reserve('j0', 0.1, false)).ok).toBe(true);
    expect((await ledger.reserve('j1', 0.2, false)).ok).toBe(true);
    expect((await ledger.reserve('j2', 0.000001, false)).ok).toBe(false);
  });

  it('a release of a job holding nothing changes nothing, and a reading releases only the jobs named', async () => {
    const runId = await seed('release');
    await setBudgetCap(pool, runId, 10);
    const ledger = new PgLedger(pool, runId);
    await ledger.reserve('j0', 2, false);
    await ledger.reserve('j1', 3, false);
    expect(await releaseReservation(pool, runId, 'j2')).toBe(0);
    expect(await budgetOf(pool, runId)).toEqual({ cap: 10, reserved: 5 });
    expect(await ledger.settle(100, ['j1', 'j2'])).toEqual({ spent: 0, reserved: 2 });
    expect(await ledger.settle(99.25, [])).toEqual({ spent: 0.75, reserved: 2 });
  });

  it('releasable: the jobs named, and jobs holding a reservation that are neither at the service nor pending in a live lease', async () => {
    const runId = await seed('releasable', 5);
    await setBudgetCap(pool, runId, 100);
    const ledger = new PgLedger(pool, runId);
    for (const id of ['j0', 'j1', 'j2', 'j3']) await ledger.reserve(id, 1, false);
    await pool.query(`UPDATE jobs SET state = 'submitting' WHERE run_id = $1 AND id = 'j0'`, [runId]);
    await pool.query(`UPDATE jobs SET state = 'pending', lease_expires = now() + interval '1 hour' WHERE run_id = $1 AND id = 'j1'`, [runId]);
    await pool.query(`UPDATE jobs SET state = 'failed' WHERE run_id = $1 AND id = 'j2'`, [runId]);
    await pool.query(`UPDATE jobs SET state = 'pending', lease_expires = now() - interval '1 second' WHERE run_id = $1 AND id = 'j3'`, [runId]);
    expect((await ledger.releasable([])).sort()).toEqual(['j2', 'j3']);
    expect((await ledger.releasable(['j0', 'j4'])).sort()).toEqual(['j0', 'j2', 'j3']);
  });

  it('pgCap: the cap as a worker uses it, its default name, the charge so far, and the note for status and report', async () => {
    const runId = await seed('pgcap');
    await setBudgetCap(pool, runId, 20);
    const cap = (await pgCap(pool, runId))!;
    expect([cap.credits, cap.name]).toEqual([20, "the run's credit cap of 20"]);
    await cap.ledger.settle(50, []);
    await cap.ledger.settle(46.5, []);
    expect(await cap.spent()).toBe(3.5);
    const meta = async (): Promise<unknown> => JSON.parse((await pool.query<{ value: string }>('SELECT value FROM meta WHERE key = $1', [`credit_cap:${runId}`])).rows[0]!.value);
    await cap.note(false);
    expect(await meta()).toEqual({ credits: 20, name: "the run's credit cap of 20", stopped: false, charged: 3.5 });
    await cap.note(true);
    expect(await meta()).toEqual({ credits: 20, name: "the run's credit cap of 20", stopped: true, charged: 3.5 });
    const named = await seed('pgcap-named');
    await setBudgetCap(pool, named, 8, '--max-credits 8');
    const namedCap = (await pgCap(pool, named))!;
    expect(namedCap.name).toBe('--max-credits 8');
    // The row removed under a worker (the cap taken off): nothing charged to read, nothing noted.
    await setBudgetCap(pool, named, null);
    expect(await namedCap.spent()).toBe(0);
    await namedCap.note(true);
    expect((await pool.query('SELECT key FROM meta WHERE key = $1', [`credit_cap:${named}`])).rows).toEqual([]);
  });
});
