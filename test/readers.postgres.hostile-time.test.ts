import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { PgReader } from '../src/store/pg/snapshot.js';
import { migrate, NOW_ISO } from '../src/store/pg/schema.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';
import { tempDir } from './helpers/tmp.js';

/**
 * A job row whose updated_at is not an ISO time (edited by hand: 'yesterday', which also sorts after every ISO
 * time, so it is the run's latest). The readers' copy of the run keeps the latest change time for its next,
 * incremental copy; new Date(NaN).toISOString() threw, and status, report, export, mark and view of the whole run
 * each ended 'PostgreSQL state ...: Invalid time value' (exit 2). And one far in the future: the view's next copies
 * took only the rows changed since it, so no change made after it was ever shown.
 */

const t = tempDir('genbatch-pg-hostile-time-');
let db: TestDatabase;
let pool: Pool;
let runId: number;

beforeAll(async () => {
  ensureBuilt();
  db = await testDatabase();
  pool = openPool(db.url);
  await migrate(pool);
  runId = await seedRun(pool, join(t.dir, 'm.yaml'), [{ id: 'a', state: 'done' }, { id: 'b', state: 'pending' }]);
  const out = join(t.dir, 'out');
  mkdirSync(out);
  await pool.query('UPDATE runs SET out_dir = $1 WHERE id = $2', [out, runId]);
  await pool.query(`UPDATE jobs SET created_at = ${NOW_ISO}, updated_at = ${NOW_ISO}`);
  await pool.query(`UPDATE jobs SET updated_at = 'yesterday' WHERE id = 'a'`);
  await pool.query(`INSERT INTO marks (run_id, job_id, n, mark, note, at) VALUES ($1, 'a', 1, 'approved', NULL, 'a while ago')`, [runId]);
}, 120_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
  t.cleanup();
});

describe('readers on a PostgreSQL run with a change time that is not a time', () => {
  it('status and report read the run', async () => {
    const status = await runCli(['status', '--state', db.url, '--json']);
    expect(status.stderr).toBe('');
    expect(status.code).toBe(0);
    expect((JSON.parse(status.stdout) as { counts: Record<string, number> }).counts).toMatchObject({ done: 1, pending: 1 });
    const report = await runCli(['report', '--state', db.url]);
    expect(report.stderr).toBe('');
    expect(report.code).toBe(0);
  });

  it("a row changed after one dated in the future is in the view's next copy", async () => {
    await pool.query(`UPDATE jobs SET updated_at = '9999-01-01T00:00:00.000Z' WHERE id = 'a'`);
    await pool.query(`UPDATE marks SET at = ${NOW_ISO}`);
    const reader = await PgReader.open(db.url, 'db');
    const snap = await reader.snapshot([runId]);
    try {
      await pool.query(`UPDATE jobs SET state = 'failed', updated_at = ${NOW_ISO} WHERE id = 'b'`);
      expect(await snap.refresh()).toBe(true);
      const copy = new Database(snap.path, { readonly: true });
      const b = copy.prepare(`SELECT state FROM jobs WHERE id = 'b'`).get() as { state: string };
      copy.close();
      expect(b.state).toBe('failed');
    } finally {
      snap.close();
      await reader.close();
    }
  });
});
