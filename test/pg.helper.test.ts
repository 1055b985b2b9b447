import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { testDatabase, type TestDatabase } from './helpers/pg.js';

describe('test PostgreSQL (test/helpers/pg.ts)', () => {
  const dbs: TestDatabase[] = [];
  afterAll(async () => {
    for (const db of dbs) await db.drop();
  });

  it('gives each call its own empty database on a real PostgreSQL server', async () => {
    const a = await testDatabase();
    const b = await testDatabase();
    dbs.push(a, b);
    expect(a.url).not.toBe(b.url);
    const ca = new pg.Client({ connectionString: a.url });
    const cb = new pg.Client({ connectionString: b.url });
    await ca.connect();
    await cb.connect();
    try {
      const v = await ca.query<{ v: string }>("SELECT current_setting('server_version_num') AS v");
      expect(Number(v.rows[0]!.v)).toBeGreaterThanOrEqual(130000);
      await ca.query('CREATE TABLE t (x INT)');
      const seen = await cb.query(`SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 't'`);
      expect(seen.rows[0].n).toBe(0);
    } finally {
      await ca.end();
      await cb.end();
    }
  });

  it('drop removes the database', async () => {
    const a = await testDatabase();
    await a.drop();
    const c = new pg.Client({ connectionString: a.url });
    await expect(c.connect()).rejects.toThrow(/does not exist/);
  });
});
