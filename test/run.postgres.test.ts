import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';
import { tempDir } from './helpers/tmp.js';

/** genbatch run <manifest> --state postgres://...: the manifest synced once into the database, the run worked on by every run process. */

const KEY = 'sk-run-pg-test-0123456789abcdef';
const t = tempDir('genbatch-run-pg-');
let db: TestDatabase;
let pool: Pool;
let sandbox: Sandbox;

beforeAll(async () => {
  ensureBuilt();
  db = await testDatabase();
  pool = openPool(db.url);
  sandbox = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.01 });
}, 120_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
  await sandbox?.close();
  t.cleanup();
});

const states = async (manifest: string) =>
  (await pool.query<{ state: string; n: number }>('SELECT j.state, count(*)::int AS n FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.manifest = $1 GROUP BY j.state', [manifest])).rows;

describe('genbatch run on a PostgreSQL state', () => {
  it('two run processes on one manifest: synced once, every job done once, reports with the workers', async () => {
    const manifest = imageManifest(join(t.dir, 'pair.yaml'), 10, 'pair');
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sandbox.url };
    const args = ['run', manifest, '--state', db.url, '--time-scale', '0.01'];
    const before = (await sandbox.stats()).tasks_total;
    const [a, b] = await Promise.all([runCli(args, env), runCli(args, env)]);
    for (const r of [a, b]) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout + r.stderr).not.toContain(new URL(db.url).password);
    }
    expect(await states(manifest)).toEqual([{ state: 'done', n: 10 }]);
    expect((await sandbox.stats()).tasks_total - before).toBe(10);
    const report = JSON.parse(readFileSync(join(t.dir, 'genbatch-out', 'pair', 'report.json'), 'utf8')) as { summary: { counts: Record<string, number>; workers: Array<{ files: number }> } };
    expect(report.summary.counts).toMatchObject({ done: 10 });
    // Every file written by one of the two (the other may have had nothing left to claim).
    const files = (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM files WHERE state = 'done' AND worker IS NOT NULL AND job_id LIKE 'pair-%'`)).rows[0]!.n;
    expect(files).toBeGreaterThanOrEqual(10);
    expect(report.summary.workers.reduce((a, w) => a + w.files, 0)).toBe(files);
    expect((await pool.query('SELECT 1 FROM workers')).rowCount).toBeGreaterThanOrEqual(2);
    const st = JSON.parse((await runCli(['status', 'pair', '--json'], { GENBATCH_STATE: db.url })).stdout) as { finished_at: string | null; workers: unknown[] };
    expect(st.finished_at).toMatch(/^\d{4}-/);
    // Again: nothing to do.
    const again = await runCli(args, env);
    expect(again.code, again.stderr).toBe(0);
    expect((await sandbox.stats()).tasks_total - before).toBe(10);
  });

  it('a run refused by --max-credits writes nothing to the database (exit 3)', async () => {
    const manifest = imageManifest(join(t.dir, 'dear.yaml'), 3, 'dear');
    const r = await runCli(['run', manifest, '--state', db.url, '--max-credits', '1'], { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sandbox.url });
    expect(r.code).toBe(3);
    expect((await pool.query('SELECT 1 FROM runs WHERE manifest = $1', [manifest])).rowCount).toBe(0);
  });

  it('--redo, --only, --limit and --learn-prices say they are not built on PostgreSQL yet (exit 2)', async () => {
    const manifest = imageManifest(join(t.dir, 'few.yaml'), 2, 'few');
    const r = await runCli(['run', manifest, '--state', db.url, '--limit', '1', '--only', 'few-*'], { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sandbox.url });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--only, --limit with a PostgreSQL state (postgres://');
    expect(r.stderr).toContain(':***@');
  });
});
