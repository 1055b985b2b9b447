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
