import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workLeaseMs } from '../src/api/lease.js';
import { UsageError } from '../src/errors.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { leaseMsFromEnv } from '../src/store/pg/lease-env.js';
import { migrate, NOW_ISO } from '../src/store/pg/schema.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';
import { tempDir } from './helpers/tmp.js';

/** GENBATCH_LEASE_SECONDS: how long a worker's lease on a job lasts (the chaos test pauses a worker past a 2 s one). */

describe('GENBATCH_LEASE_SECONDS', () => {
  it('reads seconds, unset or empty is the default, anything else outside 0.3-86400 is a usage error naming the variable', () => {
    expect(leaseMsFromEnv({ GENBATCH_LEASE_SECONDS: '2' })).toBe(2000);
    expect(leaseMsFromEnv({ GENBATCH_LEASE_SECONDS: '0.5' })).toBe(500);
    expect(leaseMsFromEnv({})).toBeUndefined();
    expect(leaseMsFromEnv({ GENBATCH_LEASE_SECONDS: ' ' })).toBeUndefined();
    for (const bad of ['0', '-1', 'soon', '1e9', 'Infinity']) {
      expect(() => leaseMsFromEnv({ GENBATCH_LEASE_SECONDS: bad })).toThrow(UsageError);
      expect(() => leaseMsFromEnv({ GENBATCH_LEASE_SECONDS: bad })).toThrow(`GENBATCH_LEASE_SECONDS expects a number of seconds from 0.3 to 86400, got ${bad}`);
    }
  });

  it("is the lease of run's and work's workers, in place of 30 s scaled by --time-scale (at least 5 s)", () => {
    expect(workLeaseMs(1, {})).toBe(30_000);
    expect(workLeaseMs(0.01, {})).toBe(5_000);
    expect(workLeaseMs(0.01, { GENBATCH_LEASE_SECONDS: '2' })).toBe(2_000);
    expect(workLeaseMs(1, { GENBATCH_LEASE_SECONDS: '120' })).toBe(120_000);
  });

  describe('on the command line', () => {
    const t = tempDir('genbatch-lease-env-');
    let db: TestDatabase;
    let pool: Pool;
    beforeAll(async () => {
      ensureBuilt();
      db = await testDatabase();
      pool = openPool(db.url);
      await migrate(pool);
      mkdirSync(join(t.dir, 'out'));
      await pool.query(`INSERT INTO runs (manifest, out_dir, started_at) VALUES ($1, $2, ${NOW_ISO})`, [join(t.dir, 'cats.yaml'), join(t.dir, 'out')]);
    }, 120_000);
    afterAll(async () => {
      await pool?.end();
      await db?.drop();
      t.cleanup();
    });

    it('a bad value stops genbatch work with exit 2 naming the variable', async () => {
      const r = await runCli(['work', '--state', db.url, '--base-url', 'http://127.0.0.1:9', '--until-empty'], { GENBATCH_API_KEY: 'k', GENBATCH_LEASE_SECONDS: 'soon' });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain('GENBATCH_LEASE_SECONDS expects a number of seconds from 0.3 to 86400, got soon');
    });
  });
});
