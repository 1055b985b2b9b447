import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idleInTransactionMs, inTx, openPool, type Pool } from '../src/store/pg/db.js';
import { claimPending } from '../src/store/pg/leases.js';
import { migrate } from '../src/store/pg/schema.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

/**
 * A worker paused in the middle of a transaction (SIGSTOP, a suspended VM) holds its row locks; the others'
 * FOR UPDATE SKIP LOCKED passed over those jobs for as long as it slept (found by the chaos test: four
 * downloading jobs of the paused worker never taken over). A worker's pool asks the server to end a session
 * idle in a transaction (half the lease, at least 5 s); the paused worker's transaction then fails, without
 * ending its process.
 */
describe('a session idle in a transaction', () => {
  let db: TestDatabase;
  let admin: Pool;
  beforeAll(async () => {
    db = await testDatabase();
    admin = openPool(db.url);
    await migrate(admin);
  }, 120_000);
  afterAll(async () => {
    await admin?.end();
    await db?.drop();
  });

  it('is ended by the server, so its row locks go and another worker claims the job; the sleeper\'s transaction is tried once more, then fails, its process lives', async () => {
    const runId = await seedRun(admin, 'idle', [{ id: 'x' }]);
    const sleeper = openPool(db.url, { max: 1, idleInTransactionMs: 300 });
    const other = openPool(db.url, { max: 1 });
    try {
      // The sleeper locks the job's row in a transaction, then stops for 2 s (as a paused process would).
      let attempts = 0;
      const paused = inTx(sleeper, async (c) => {
        attempts++;
        await c.query('SELECT 1 FROM jobs WHERE run_id = $1 AND id = $2 FOR UPDATE', [runId, 'x']);
        await new Promise((r) => setTimeout(r, 2000));
        await c.query('SELECT 1');
      });
      const settled = paused.then(
        () => 'committed',
        (err: Error) => `failed: ${err.message}`,
      );
      await new Promise((r) => setTimeout(r, 100));
      expect((await claimPending(other, runId, 'live', 30_000, 1)).jobs).toEqual([]);
      await new Promise((r) => setTimeout(r, 600));
      expect((await claimPending(other, runId, 'live', 30_000, 1)).jobs.map((j) => j.id)).toEqual(['x']);
      // The sleeper's transaction is made once more on a new connection (nothing of it was committed): it
      // sleeps again, is ended again, and fails then.
      expect(await settled).toMatch(/^failed: /);
      expect(attempts).toBe(2);
      // The pool goes on with a new connection.
      expect((await sleeper.query<{ n: number }>('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
    } finally {
      await sleeper.end();
      await other.end();
    }
  });

  it('a transaction whose session was ended before its commit is made again on a new connection, once', async () => {
    const pool = openPool(db.url, { max: 1, idleInTransactionMs: 200 });
    try {
      let attempts = 0;
      const out = await inTx(pool, async (c) => {
        attempts++;
        // The first attempt sleeps past the limit (a worker paused mid-transaction); the second does not.
        if (attempts === 1) await new Promise((r) => setTimeout(r, 600));
        return (await c.query<{ n: number }>('SELECT 2 AS n')).rows[0]!.n;
      });
      expect(out).toBe(2);
      expect(attempts).toBe(2);
    } finally {
      await pool.end();
    }
  });

  it('a transaction whose session ended after its last statement, before its COMMIT was sent, is made again: the first wrote nothing', async () => {
    const pool = openPool(db.url, { max: 1, idleInTransactionMs: 200 });
    try {
      let attempts = 0;
      const out = await inTx(pool, async (c) => {
        attempts++;
        await c.query(`INSERT INTO meta (key, value) VALUES ('after-last-statement', $1)`, [String(attempts)]);
        // The first attempt sleeps past the limit after its last statement (a worker paused just before its COMMIT).
        if (attempts === 1) await new Promise((r) => setTimeout(r, 600));
        return attempts;
      });
      expect(out).toBe(2);
      expect((await admin.query(`SELECT value FROM meta WHERE key = 'after-last-statement'`)).rows).toEqual([{ value: '2' }]);
    } finally {
      await pool.end();
    }
  });

  it("is half a worker's lease, at least 5 s", () => {
    expect(idleInTransactionMs(30_000)).toBe(15_000);
    expect(idleInTransactionMs(2_000)).toBe(5_000);
  });
});
