import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { imageManifest, runCli } from './helpers/cli.js';
import { pgSandbox } from './helpers/pg-fixture.js';

/** genbatch run <manifest> --state postgres://...: the manifest synced once into the database, the run worked on by every run process. */

const KEY = 'sk-run-pg-test-0123456789abcdef';
const f = pgSandbox({ prefix: 'genbatch-run-pg-', key: KEY, migrate: false });

const states = async (manifest: string) =>
  (await f.pool.query<{ state: string; n: number }>('SELECT j.state, count(*)::int AS n FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.manifest = $1 GROUP BY j.state', [manifest])).rows;

describe('genbatch run on a PostgreSQL state', () => {
  it('two run processes on one manifest: synced once, every job done once, reports with the workers', async () => {
    const manifest = imageManifest(join(f.dir, 'pair.yaml'), 10, 'pair');
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: f.sandbox.url };
    const args = ['run', manifest, '--state', f.db.url, '--time-scale', '0.01'];
    const before = (await f.sandbox.stats()).tasks_total;
    const [a, b] = await Promise.all([runCli(args, env), runCli(args, env)]);
    for (const r of [a, b]) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout + r.stderr).not.toContain(new URL(f.db.url).password);
    }
    expect(await states(manifest)).toEqual([{ state: 'done', n: 10 }]);
    expect((await f.sandbox.stats()).tasks_total - before).toBe(10);
    const report = JSON.parse(readFileSync(join(f.dir, 'genbatch-out', 'pair', 'report.json'), 'utf8')) as { summary: { counts: Record<string, number>; workers: Array<{ files: number }> } };
    expect(report.summary.counts).toMatchObject({ done: 10 });
    // Every file written by one of the two (the other may have had nothing left to claim).
    const files = (await f.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM files WHERE state = 'done' AND worker IS NOT NULL AND job_id LIKE 'pair-%'`)).rows[0]!.n;
    expect(files).toBeGreaterThanOrEqual(10);
    expect(report.summary.workers.reduce((a, w) => a + w.files, 0)).toBe(files);
    expect((await f.pool.query('SELECT 1 FROM workers')).rowCount).toBeGreaterThanOrEqual(2);
    const st = JSON.parse((await runCli(['status', 'pair', '--json'], { GENBATCH_STATE: f.db.url })).stdout) as { finished_at: string | null; workers: unknown[] };
    expect(st.finished_at).toMatch(/^\d{4}-/);
    // Again: nothing to do.
    const again = await runCli(args, env);
    expect(again.code, again.stderr).toBe(0);
    expect((await f.sandbox.stats()).tasks_total - before).toBe(10);
  });

  it('a job removed from the manifest is left out of status and the reports (issue #23 item 3), its files kept; --include-removed shows it', async () => {
    const manifest = imageManifest(join(f.dir, 'gone.yaml'), 3, 'gone');
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: f.sandbox.url };
    const args = ['run', manifest, '--state', f.db.url, '--time-scale', '0.01'];
    expect((await runCli(args, env)).code).toBe(0);
    imageManifest(manifest, 2, 'gone');
    const tasks = (await f.sandbox.stats()).tasks_total;
    const r = await runCli(args, env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toContain('1 jobs no longer in the manifest (kept in the state, left out of the reports)');
    expect((await f.sandbox.stats()).tasks_total).toBe(tasks);
    const out = join(f.dir, 'genbatch-out', 'gone');
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string }> };
    expect(report.jobs.map((j) => j.id)).toEqual(['gone-0000', 'gone-0001']);
    expect(existsSync(join(out, 'gone-0002'))).toBe(true);
    const st = JSON.parse((await runCli(['status', 'gone', '--json', '--jobs'], { GENBATCH_STATE: f.db.url })).stdout) as { counts: Record<string, number>; jobs: Array<{ id: string }> };
    expect(st.jobs.map((j) => j.id)).toEqual(['gone-0000', 'gone-0001']);
    expect(st.counts.done).toBe(2);
    const all = JSON.parse((await runCli(['status', 'gone', '--json', '--jobs', '--include-removed'], { GENBATCH_STATE: f.db.url })).stdout) as typeof st;
    expect(all.jobs.map((j) => j.id)).toEqual(['gone-0000', 'gone-0001', 'gone-0002']);
  });

  it('a run refused by --max-credits writes nothing to the database (exit 5, the cap)', async () => {
    const manifest = imageManifest(join(f.dir, 'dear.yaml'), 3, 'dear');
    const r = await runCli(['run', manifest, '--state', f.db.url, '--max-credits', '1'], { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: f.sandbox.url });
    expect(r.code).toBe(5);
    expect((await f.pool.query('SELECT 1 FROM runs WHERE manifest = $1', [manifest])).rowCount).toBe(0);
  });

  it('--redo failed sends the failed jobs again: their earlier files go to previous-1/, the others stay done, one new task each', async () => {
    const manifest = imageManifest(join(f.dir, 'again.yaml'), 4, 'again');
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: f.sandbox.url };
    const args = ['run', manifest, '--state', f.db.url, '--time-scale', '0.01'];
    const first = await runCli(args, env);
    expect(first.code, first.stderr).toBe(0);
    // Two jobs ended failed (as a task failing at the service leaves them), with the files they had.
    await f.pool.query(`UPDATE jobs SET state = 'failed', last_error = 'failed at the service' WHERE id IN ('again-0001', 'again-0002')`);
    const before = (await f.sandbox.stats()).tasks_total;
    const r = await runCli([...args, '--redo', 'failed'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('--redo failed: 2 job(s) sent again');
    expect(await states(manifest)).toEqual([{ state: 'done', n: 4 }]);
    expect((await f.sandbox.stats()).tasks_total - before).toBe(2);
    const out = join(f.dir, 'genbatch-out', 'again');
    for (const id of ['again-0001', 'again-0002']) expect(readdirSync(join(out, id, 'previous-1')).sort()).toContain('result.json');
    for (const id of ['again-0000', 'again-0003']) expect(existsSync(join(out, id, 'previous-1'))).toBe(false);
  });

  it('--only, --limit and --learn-prices say they are not built on PostgreSQL yet (exit 2)', async () => {
    const manifest = imageManifest(join(f.dir, 'few.yaml'), 2, 'few');
    const r = await runCli(['run', manifest, '--state', f.db.url, '--limit', '1', '--only', 'few-*'], { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: f.sandbox.url });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--only, --limit with a PostgreSQL state (postgres://');
    expect(r.stderr).toContain(':***@');
  });
});
