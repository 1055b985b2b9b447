import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { openDatabase } from '../src/store/schema.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { MIRRORED_TABLES, migrate } from '../src/store/pg/schema.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';
import { tempDir } from './helpers/tmp.js';

describe('PostgreSQL schema', () => {
  let db: TestDatabase;
  const pools: Pool[] = [];
  beforeAll(async () => {
    db = await testDatabase();
  });
  afterAll(async () => {
    for (const p of pools) await p.end();
    await db.drop();
  });

  it('is created once when several workers start at the same moment (advisory lock), and again is a no-op', async () => {
    for (let i = 0; i < 4; i++) pools.push(openPool(db.url, { max: 2 }));
    await Promise.all(pools.map((p) => migrate(p)));
    await migrate(pools[0]!);
    const r = await pools[0]!.query<{ value: string }>(`SELECT value FROM meta WHERE key = 'schema_version'`);
    expect(r.rows).toEqual([{ value: '1' }]);
  });

  it("once complete, a worker's start takes no lock: it does not wait for another worker's open write to the jobs; a missing column is still added", async () => {
    const pool = pools[0]!;
    await migrate(pool);
    const writer = await pool.connect();
    try {
      // Another worker mid-transaction (paused, say) after writing to jobs: its lock on the table stays until it ends.
      await writer.query('BEGIN');
      await writer.query('UPDATE jobs SET attempts = attempts WHERE run_id = -1');
      const started = Date.now();
      // CREATE INDEX IF NOT EXISTS would wait here for the writer (a SHARE lock on jobs) as long as it stays open.
      await Promise.race([migrate(pools[1]!), new Promise((_, reject) => setTimeout(() => reject(new Error('migrate waited for the open write')), 5_000))]);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await writer.query('ROLLBACK');
      writer.release();
    }
    await pool.query('ALTER TABLE budget DROP COLUMN stopped');
    await migrate(pool);
    const col = await pool.query(`SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'budget' AND column_name = 'stopped'`);
    expect(col.rowCount).toBe(1);
  });

  it('has every table and column of the SQLite state file, plus the lease columns, files.worker and the shared tables', async () => {
    const { dir, cleanup } = tempDir();
    const lite = openDatabase(join(dir, 'state.db'));
    try {
      const cols = await pools[0]!.query<{ table_name: string; column_name: string }>(
        `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`,
      );
      const pgCols = new Map<string, Set<string>>();
      for (const r of cols.rows) (pgCols.get(r.table_name) ?? pgCols.set(r.table_name, new Set()).get(r.table_name)!).add(r.column_name);
      for (const table of MIRRORED_TABLES) {
        const liteCols = (lite.prepare(`SELECT name FROM pragma_table_info(?)`).pluck().all(table) as string[]).sort();
        expect(liteCols.length, table).toBeGreaterThan(0);
        expect([...(pgCols.get(table) ?? [])].filter((c) => liteCols.includes(c)).sort(), table).toEqual(liteCols);
      }
      expect([...pgCols.get('jobs')!]).toEqual(expect.arrayContaining(['lease_owner', 'lease_expires', 'lease_epoch']));
      expect([...pgCols.get('files')!]).toContain('worker');
      for (const t of ['workers', 'upload_slots', 'budget']) expect(pgCols.has(t), t).toBe(true);
    } finally {
      lite.close();
      cleanup();
    }
  });
});
