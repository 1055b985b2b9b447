import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UsageError } from '../src/errors.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { leaseMsFromEnv } from '../src/store/pg/lease-env.js';
import { migrate } from '../src/store/pg/schema.js';
import { PgWorkStore } from '../src/store/pg/work-store.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

/** GENBATCH_LEASE_SECONDS: how long a worker's lease on a job lasts (the chaos test pauses a worker past a 2 s one). */

describe('GENBATCH_LEASE_SECONDS', () => {
  let db: TestDatabase;
  let pool: Pool;
  beforeAll(async () => {
    db = await testDatabase();
    pool = openPool(db.url);
    await migrate(pool);
  }, 120_000);
  afterAll(async () => {
    delete process.env.GENBATCH_LEASE_SECONDS;
    await pool?.end();
    await db?.drop();
  });

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

  it("sets a worker's lease: another worker claims the job once it ran out, and takeover and heartbeat follow it", async () => {
    const runId = await seedRun(pool, '/lease-env.yaml', [{ id: 'a' }]);
    process.env.GENBATCH_LEASE_SECONDS = '1';
    try {
      const one = await PgWorkStore.open({ pool, runId, apiKey: 'k' });
      const two = await PgWorkStore.open({ pool, runId, apiKey: 'k' });
      expect(one.heartbeatMs).toBe(333);
      expect(one.takeOverMs).toBe(500);
      expect((await one.claimPending(1)).jobs.map((j) => j.id)).toEqual(['a']);
      expect((await two.claimPending(1)).jobs).toEqual([]);
      await new Promise((r) => setTimeout(r, 1300));
      expect((await two.claimPending(1)).jobs.map((j) => j.id)).toEqual(['a']);
      expect((await one.transition('a', 'pending', 'submitting', {}, { durable: true })).moved).toBe(false);
    } finally {
      delete process.env.GENBATCH_LEASE_SECONDS;
    }
  });
});
