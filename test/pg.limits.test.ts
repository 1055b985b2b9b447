import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { PgWorkStore } from '../src/store/pg/work-store.js';
import { migrate } from '../src/store/pg/schema.js';
import { coolDownUploads, endUploadSlot, takeUploadSlot, tryUploadSlot, type SlotOptions } from '../src/store/pg/upload-slots.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Transactions committed in this database so far (pg_stat_database; the server's own counter). */
let statements: () => Promise<number>;
/** Sequential and index scans of upload_slots so far (pg_stat_user_tables). */
let slotScans: () => Promise<number>;

/** The most intervals [start, end] that any window [t, t + w) meets (the uploads the service can count in one window). */
function mostInOneWindow(spans: Array<{ start: number; end: number }>, w: number): number {
  const starts = [...spans.map((s) => s.end), ...spans.map((s) => s.start - w + 1)];
  let most = 0;
  for (const t of starts) most = Math.max(most, spans.filter((s) => s.start < t + w && s.end >= t).length);
  return most;
}

describe('PostgreSQL shared limits: upload slots and status-read permits', () => {
  let db: TestDatabase;
  const workers: Pool[] = [];
  beforeAll(async () => {
    db = await testDatabase();
    for (let i = 0; i < 4; i++) workers.push(openPool(db.url, { max: 2 }));
    await migrate(workers[0]!);
    statements = async () => {
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        // A fresh connection each time: pg_stat_database is a snapshot per transaction of the asking session.
        return (await c.query<{ n: number }>('SELECT xact_commit::int AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0]!.n;
      } finally {
        await c.end();
      }
    };
    slotScans = async () => {
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        return (await c.query<{ n: number }>(`SELECT (COALESCE(seq_scan, 0) + COALESCE(idx_scan, 0))::int AS n FROM pg_stat_user_tables WHERE relname = 'upload_slots'`)).rows[0]!.n;
      } finally {
        await c.end();
      }
    };
  });
  afterAll(async () => {
    for (const p of workers) await p.end();
    await db.drop();
  });

  it('4 workers, 20 uploads of mixed length: never more than 5 in any window, measured from the slots\' own start and end stamps', async () => {
    // The service's 60 s window scaled to 400 ms; some uploads last most of a window.
    const windowMs = 400;
    const durations = Array.from({ length: 20 }, (_, i) => [20, 60, 150, 320][i % 4]!);
    const spans: Array<{ start: number; end: number }> = [];
    let next = 0;
    await Promise.all(
      workers.map(async (p, w) => {
        const o: SlotOptions = { key: 'fp-upload', worker: `w${w}`, limit: 5, windowMs, holdMs: 30_000 };
        for (let i = next++; i < durations.length; i = next++) {
          const held = await takeUploadSlot(p, o, undefined, 25);
          await sleep(durations[i]!);
          const end = await endUploadSlot(p, o.key, held.slot, o.worker);
          spans.push({ start: held.startedAt, end: end! });
        }
      }),
    );
    expect(spans).toHaveLength(20);
    expect(mostInOneWindow(spans, windowMs)).toBeLessThanOrEqual(5);
    // The slots were the limit, not luck: 20 uploads took at least three windows.
    expect(Math.max(...spans.map((s) => s.end)) - Math.min(...spans.map((s) => s.start))).toBeGreaterThanOrEqual(3 * windowMs);
  });

  it('a 429 cools every worker down; a dead holder\'s slot frees a window after its hold expired', async () => {
    const o: SlotOptions = { key: 'fp-cool', worker: 'a', limit: 1, windowMs: 200, holdMs: 150 };
    await coolDownUploads(workers[0]!, o.key, 300);
    const refused = await tryUploadSlot(workers[1]!, { ...o, worker: 'b' });
    expect('waitMs' in refused && refused.waitMs).toBeGreaterThan(150);
    await sleep(320);
    const held = await tryUploadSlot(workers[1]!, { ...o, worker: 'b' });
    expect('slot' in held).toBe(true);
    // Worker b dies holding it: after its hold (150 ms) no one may take it for a whole window.
    await sleep(250);
    expect('waitMs' in (await tryUploadSlot(workers[2]!, { ...o, worker: 'c' }))).toBe(true);
    await sleep(200);
    expect('slot' in (await tryUploadSlot(workers[2]!, { ...o, worker: 'c' }))).toBe(true);
    // The dead holder's late end is refused.
    expect(await endUploadSlot(workers[1]!, o.key, 0, 'b')).toBeNull();
  });

  it('status reads are shared without a statement each: 4 workers together read at the rate of one key, not four times it', async () => {
    const runId = await seedRun(workers[0]!, '/status-share.yaml', [{ id: 'a' }]);
    const stores = await Promise.all(workers.map((pool, i) => PgWorkStore.open({ pool, runId, apiKey: 'sk-status-share', worker: { id: `reader-${i}`, hostname: 'host', pid: i }, statusRatePerSec: 40 })));
    // Each counts the live workers at its heartbeat (the first opened counted only itself when it opened).
    for (const s of stores) await s.heartbeat();
    const before = await statements();
    const t0 = Date.now();
    const stopAt = t0 + 1000;
    const counts = await Promise.all(
      stores.map(async (s) => {
        let n = 0;
        for (;;) {
          await s.acquireStatusRead();
          if (Date.now() > stopAt) return n;
          n++;
        }
      }),
    );
    const total = counts.reduce((a, b) => a + b, 0);
    // 40 a second shared by 4: each reads every 100 ms. At most the rate over the second, plus one read each.
    expect(total).toBeLessThanOrEqual(40 + 4);
    expect(total).toBeGreaterThanOrEqual(20);
    for (const n of counts) expect(n).toBeLessThanOrEqual(11);
    // And no statement per read: the reads above made none. (A backend reports its counts at most once a
    // second, when idle: read them after that.)
    await sleep(1500);
    // A statement per read would be at least `total`; the few counted are the stores' own (opens, heartbeats)
    // and this count's connections, reported late (a full CI run counted 6).
    expect((await statements()) - before).toBeLessThan(total / 2);
  });

  it('a heartbeat renews upload slots only while the worker holds one: a run without uploads makes no statement on them', async () => {
    const runId = await seedRun(workers[0]!, '/slots-beat.yaml', [{ id: 'a' }]);
    /** Scans of upload_slots made by one heartbeat of a worker (holding a slot or not), on its own connection. */
    const beat = async (name: string, holding: boolean) => {
      const pool = openPool(db.url, { max: 1 });
      // A backend reports its counters when it ends (an idle one, up to 10 s later): the pool closes its
      // connection 50 ms after each use, so every step's counts are in before the next is read.
      pool.options.idleTimeoutMillis = 50;
      const store = await PgWorkStore.open({ pool, runId, apiKey: 'sk-slots-beat', worker: { id: name, hostname: 'host', pid: 9 }, uploads: { limit: 5, windowMs: 400 } });
      if (holding) await store.acquireUploadSlot();
      await sleep(300);
      const before = await slotScans();
      await store.heartbeat();
      await sleep(300);
      const scans = (await slotScans()) - before;
      await pool.end();
      return scans;
    };
    expect(await beat('idle-beater', false)).toBe(0);
    expect(await beat('holding-beater', true)).toBeGreaterThan(0);
  }, 30_000);
});
