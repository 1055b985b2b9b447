import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate } from '../src/store/pg/schema.js';
import { PgWorkStore } from '../src/store/pg/work-store.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

/**
 * A job graph in a PostgreSQL state with a cycle in it (job_links rows written by another client or by hand: a
 * manifest never makes one). A move that skips a failed job's descendants walks them with one recursive query;
 * it went round the cycle for ever (each lap a new depth, so UNION kept every row), filling the server's temporary
 * files (1.5 GB in a minute here) while the worker waited on the move, heartbeat alive, its leases never running out.
 * The worker's connections get a statement timeout, so that the test fails in seconds instead of hanging.
 */

let db: TestDatabase;
let admin: Pool;
let pool: Pool;

beforeAll(async () => {
  db = await testDatabase();
  admin = openPool(db.url);
  await migrate(admin);
  const url = new URL(db.url);
  url.searchParams.set('options', '-c statement_timeout=5000');
  pool = openPool(url.toString(), { max: 3 });
});

afterAll(async () => {
  await pool?.end();
  await admin?.end();
  await db?.drop();
});

describe('a job graph with a cycle in the database', () => {
  it("a failed parent skips the jobs on the cycle below it, each once, and the move ends", async () => {
    // a needs p and c; b needs a; c needs b: a -> b -> c -> a below p.
    const runId = await seedRun(admin, '/cycle.yaml', [{ id: 'p' }, { id: 'a', needs: ['p', 'c'] }, { id: 'b', needs: ['a'] }, { id: 'c', needs: ['b'] }, { id: 'd', needs: ['b'] }]);
    const w = await PgWorkStore.open({ pool, runId, apiKey: 'k', worker: { id: 'w', hostname: 'host', pid: 1 } });
    expect((await w.claimPending(10)).jobs.map((j) => j.id)).toEqual(['p']);
    await w.transition('p', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    const moved = await w.transition('p', 'submitting', 'failed', { last_error: 'refused' });
    expect(moved.moved && moved.side.map((m) => [m.id, m.to])).toEqual([
      ['a', 'skipped'],
      ['b', 'skipped'],
      ['c', 'skipped'],
      ['d', 'skipped'],
    ]);
    const states = await admin.query('SELECT id, state FROM jobs WHERE run_id = $1 ORDER BY seq', [runId]);
    expect(states.rows.map((r: { id: string; state: string }) => `${r.id} ${r.state}`)).toEqual(['p failed', 'a skipped', 'b skipped', 'c skipped', 'd skipped']);
  }, 30_000);
});
