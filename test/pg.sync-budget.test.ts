import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { PgLedger, budgetOf, releaseReservation, setBudgetCap } from '../src/store/pg/budget.js';
import { migrate } from '../src/store/pg/schema.js';
import { syncOnce } from '../src/store/pg/sync-lock.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

describe('PostgreSQL manifest sync lock and shared budget', () => {
  let db: TestDatabase;
  let pool: Pool;
  const workers: Pool[] = [];
  beforeAll(async () => {
    db = await testDatabase();
    pool = openPool(db.url);
    await migrate(pool);
    for (let i = 0; i < 4; i++) workers.push(openPool(db.url, { max: 2 }));
  });
  afterAll(async () => {
    for (const p of [pool, ...workers]) await p.end();
    await db.drop();
  });

  it('exactly one of 4 processes syncing a run at once writes its job rows; the others wait and join the synced run', async () => {
    const runId = await seedRun(pool, 'sync', []);
    const outcomes = await Promise.all(
      workers.map(async (p, w) => {
        const outcome = await syncOnce(p, runId, 'manifest-key-1', async (c) => {
          for (let i = 0; i < 200; i++) {
            await c.query(
              `INSERT INTO jobs (run_id, id, seq, model, kind, "where", spec_hash, spec, state, created_at, updated_at, generation)
               VALUES ($1, $2, $3, 'm', 'image', $4, 'h', '{}', 'pending', 'now', 'now', 1)`,
              [runId, `j${i}`, i, `written by worker ${w}`],
            );
          }
        });
        // Whoever returns sees the whole sync (the joiners waited for its commit).
        const n = await p.query<{ n: number }>('SELECT count(*)::int AS n FROM jobs WHERE run_id = $1', [runId]);
        return { outcome, seen: n.rows[0]!.n };
      }),
    );
    expect(outcomes.filter((o) => o.outcome === 'synced')).toHaveLength(1);
    expect(outcomes.filter((o) => o.outcome === 'joined')).toHaveLength(3);
    expect(outcomes.every((o) => o.seen === 200)).toBe(true);
    const writers = await pool.query<{ n: number }>(`SELECT count(DISTINCT "where")::int AS n FROM jobs WHERE run_id = $1`, [runId]);
    expect(writers.rows[0]!.n).toBe(1);
    // A changed manifest (another key) is synced again, by one process.
    expect(await syncOnce(pool, runId, 'manifest-key-2', async () => undefined)).toBe('synced');
  });

  it('4 workers sending at once never reserve past the run cap together; a job ended uncharged gives its credits back once', async () => {
    const runId = await seedRun(pool, 'budget', Array.from({ length: 100 }, (_, i) => ({ id: `b${i}`, credits: 1.5 })));
    await setBudgetCap(pool, runId, 30);
    let next = 0;
    const sent = await Promise.all(
      workers.map(async (p) => {
        const ledger = new PgLedger(p, runId);
        let mine = 0;
        for (;;) {
          const r = await ledger.reserve(`b${next++}`, 1.5, false);
          if (!r.ok) return mine;
          mine++;
        }
      }),
    );
    expect(sent.reduce((s, n) => s + n, 0)).toBe(20);
    expect(await budgetOf(pool, runId)).toEqual({ cap: 30, reserved: 30 });
    const one = await pool.query<{ id: string }>(`SELECT id FROM jobs WHERE run_id = $1 AND reserved_credits IS NOT NULL ORDER BY seq LIMIT 1`, [runId]);
    const id = one.rows[0]!.id;
    expect(await releaseReservation(pool, runId, id)).toBe(1.5);
    expect(await releaseReservation(pool, runId, id)).toBe(0);
    expect(await budgetOf(pool, runId)).toEqual({ cap: 30, reserved: 28.5 });
    // Room for exactly one more job; a job of unknown price fits while spent + reserved < cap.
    const ledger = new PgLedger(pool, runId);
    expect((await ledger.reserve('b90', 1.5, false)).ok).toBe(true);
    expect((await ledger.reserve('b91', 1.5, false)).ok).toBe(false);
    expect((await ledger.reserve('b91', 0, true)).ok).toBe(false);
    // A reading: the first sets the base, the next counts the drop as spent; a rise (a refund) gives room back.
    expect(await ledger.settle(1000, [])).toEqual({ spent: 0, reserved: 30 });
    expect(await ledger.settle(991, ['b90'])).toEqual({ spent: 9, reserved: 28.5 });
    expect(await ledger.settle(994, [])).toEqual({ spent: 6, reserved: 28.5 });
  });
});
