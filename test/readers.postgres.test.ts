import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate, NOW_ISO } from '../src/store/pg/schema.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { copyToPostgres } from './helpers/pg-copy.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess } from './helpers/view.js';

/**
 * status, report, export and view with --state postgres://...: the run read from PostgreSQL (a copy in a
 * temporary SQLite state file), per-worker counts, the password never printed. The rows: a real run of the
 * sandbox (SQLite) copied into the PostgreSQL schema by SQL, then given workers as the pg backend records them
 * (jobs.lease_owner, files.worker, a workers row).
 */

const t = tempDir('genbatch-pg-readers-');
let db: TestDatabase;
let pool: Pool;
let manifest: string;
let out: string;
let password: string;
const A = 'hostA:11:aaaa';
const B = 'hostB:22:bbbb';

beforeAll(async () => {
  ensureBuilt();
  db = await testDatabase();
  password = new URL(db.url).password;
  pool = openPool(db.url);
  await migrate(pool);
  manifest = imageManifest(join(t.dir, 'cats.yaml'), 3, 'cat');
  // Two jobs sent (done), one left pending.
  const r = await runCli(['run', manifest, '--sandbox', '--time-scale', '0.002', '--limit', '2']);
  expect(r.code, r.stderr).toBe(7);
  out = join(t.dir, 'genbatch-out', 'cats.sandbox');
  await copyToPostgres(join(out, 'state.db'), pool);
  rmSync(join(out, 'state.db'));
  // Worker A wrote cat-0000's files (a done job is held by no one); worker B holds cat-0001, at the service again.
  await pool.query(`UPDATE jobs SET lease_owner = $1, state = 'submitted', finished_at = NULL WHERE id = 'cat-0001'`, [B]);
  await pool.query(`UPDATE files SET worker = $1 WHERE job_id = 'cat-0000'`, [A]);
  await pool.query(`INSERT INTO workers (id, hostname, pid) VALUES ($1, 'hostA', 11)`, [A]);
}, 180_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
  t.cleanup();
});

describe('readers on a PostgreSQL state', () => {
  it('status shows the counts and each worker (text and --json workers), never the password', async () => {
    const json = await runCli(['status', '--state', db.url, '--json']);
    expect(json.stderr).toBe('');
    expect(json.code).toBe(0);
    const size = (await pool.query<{ s: number }>(`SELECT sum(size) AS s FROM files WHERE job_id = 'cat-0000' AND state = 'done'`)).rows[0]!.s;
    const files = (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM files WHERE job_id = 'cat-0000' AND state = 'done'`)).rows[0]!.n;
    const status = JSON.parse(json.stdout) as { manifest: string; counts: Record<string, number>; workers: unknown[] };
    expect(status.manifest).toBe(manifest);
    expect(status.counts).toMatchObject({ done: 1, submitted: 1, pending: 1 });
    expect(status.workers).toEqual([
      { id: A, jobs: {}, files, bytes: size, last_seen: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) },
      { id: B, jobs: { submitted: 1 }, files: 0, bytes: 0, last_seen: null },
    ]);
    const text = await runCli(['status'], { GENBATCH_STATE: db.url });
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('3 jobs: 1 pending, 1 submitted, 1 done');
    expect(text.stdout).toContain(`  workers (2):\n    ${A}\tholding none; ${files} file${files === 1 ? '' : 's'} (`);
    expect(text.stdout).toContain(`    ${B}\tholding 1 submitted; 0 files (0 B); last seen -\n`);
    for (const r of [json, text]) expect(r.stdout + r.stderr).not.toContain(password);
  });

  it('report writes the four reports into the run folder, with summary.workers in report.json', async () => {
    rmSync(join(out, 'report.json'), { force: true });
    const r = await runCli(['report', '--state', db.url]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { summary: { counts: Record<string, number>; workers: Array<{ id: string }> }; jobs: Array<{ id: string; state: string; files: unknown[] }> };
    expect(report.summary.counts).toMatchObject({ done: 1, submitted: 1, pending: 1 });
    expect(report.summary.workers.map((w) => w.id)).toEqual([A, B]);
    expect(report.jobs.map((j) => [j.id, j.state])).toEqual([['cat-0000', 'done'], ['cat-0001', 'submitted'], ['cat-0002', 'pending']]);
    expect(report.jobs[0]!.files.length).toBeGreaterThan(0);
    expect(readFileSync(join(out, 'report.md'), 'utf8') + readFileSync(join(out, 'report.html'), 'utf8') + r.stdout).not.toContain(password);
  });

  it('export copies the done results from the run folder', async () => {
    const to = join(t.dir, 'exported');
    const r = await runCli(['export', '--state', db.url, '--to', to]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^exported \d+ file\(s\) of 1 job\(s\)/);
    expect(existsSync(join(to, 'cat-0000'))).toBe(true);
  });

  it('view shows the run, brings a change made in the database to the page, and writes marks to the database', async () => {
    const view = await startViewProcess(['--state', db.url]);
    try {
      const first = JSON.parse((await rawRequest(view.port, '/api/jobs?since=&gen=0', { headers: { 'x-genbatch-token': view.token } })).body) as { since: string; gen: number; rows: unknown[][]; counts: Array<[string, number]> };
      expect(first.rows.map((row) => row[0])).toEqual(['cat-0000', 'cat-0001', 'cat-0002']);
      await pool.query(`UPDATE jobs SET state = 'failed', last_error = 'boom', updated_at = ${NOW_ISO} WHERE id = 'cat-0002'`);
      let seen: { rows: unknown[][]; counts?: Array<[string, number]> } = { rows: [] };
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline && !seen.rows.some((row) => row[0] === 'cat-0002')) {
        await new Promise((r) => setTimeout(r, 200));
        seen = JSON.parse((await rawRequest(view.port, `/api/jobs?since=${encodeURIComponent(first.since)}&gen=${first.gen}`, { headers: { 'x-genbatch-token': view.token } })).body) as typeof seen;
      }
      expect(seen.rows.map((row) => row[0])).toContain('cat-0002');
      expect(seen.counts).toContainEqual(['failed', 1]);
      const mark = await rawRequest(view.port, '/api/marks', {
        method: 'POST',
        headers: { 'x-genbatch-token': view.token, 'content-type': 'application/json' },
        body: JSON.stringify({ ids: ['cat-0000'], mark: 'rejected', note: 'blurry' }),
      });
      expect(mark.status, mark.body).toBe(200);
      // The mark is in the database: the next reader (another machine) sees it.
      const rows = await pool.query(`SELECT job_id, n, mark, note FROM marks ORDER BY job_id, n`);
      expect(rows.rows).toEqual([{ job_id: 'cat-0000', n: 1, mark: 'rejected', note: 'blurry' }]);
    } finally {
      expect(await view.stop()).toBe(0);
    }
    await pool.query(`UPDATE jobs SET state = 'pending', last_error = NULL, updated_at = ${NOW_ISO} WHERE id = 'cat-0002'`);
  });

  it("view: while a live worker holds a job of the run, the last invocation is running (no 'no closing balance' note); once its lease ends, the note is back", async () => {
    const run = (await pool.query<{ id: string }>('SELECT id FROM runs')).rows[0]!.id;
    const n = (await pool.query<{ n: number }>('SELECT max(n)::int AS n FROM invocations WHERE run_id = $1', [run])).rows[0]!.n + 1;
    await pool.query(`INSERT INTO invocations (run_id, n, started_at, balance_before, balance_before_at) VALUES ($1, $2, ${NOW_ISO}, 1000, ${NOW_ISO})`, [run, n]);
    await pool.query(`INSERT INTO workers (id, hostname, pid) VALUES ($1, 'hostB', 22) ON CONFLICT (id) DO UPDATE SET last_seen = now()`, [B]);
    await pool.query(`UPDATE jobs SET lease_expires = now() + interval '10 minutes', updated_at = ${NOW_ISO} WHERE id = 'cat-0001'`);
    type Head = { head: { time: { running: boolean }; notes: string[] } };
    const view = await startViewProcess(['--state', db.url]);
    const head = async () => JSON.parse((await rawRequest(view.port, '/api/jobs?since=&gen=0', { headers: { 'x-genbatch-token': view.token } })).body) as Head;
    try {
      const live = await head();
      expect(live.head.time.running).toBe(true);
      expect(live.head.notes.join('\n')).toContain(`Invocation ${n} is running`);
      expect(live.head.notes.join('\n')).not.toContain('no closing balance');
      await pool.query(`UPDATE jobs SET lease_expires = now() - interval '1 second', updated_at = ${NOW_ISO} WHERE id = 'cat-0001'`);
      let after = live;
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline && after.head.time.running) {
        await new Promise((r) => setTimeout(r, 200));
        after = await head();
      }
      expect(after.head.time.running).toBe(false);
      expect(after.head.notes.join('\n')).toContain(`Invocation ${n} has no closing balance reading`);
    } finally {
      expect(await view.stop()).toBe(0);
      await pool.query('DELETE FROM invocations WHERE run_id = $1 AND n = $2', [run, n]);
      await pool.query(`UPDATE jobs SET lease_expires = NULL WHERE id = 'cat-0001'`);
    }
  });

  it('mark writes the marks to the database, after those made elsewhere; the reports show them', async () => {
    const r = await runCli(['mark', 'cats', '--state', db.url, '--approve', 'cat-0000', '--note', 'sharp after all']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('marked 1 job(s) approved: cat-0000\n');
    const rows = await pool.query(`SELECT job_id, n, mark, note FROM marks ORDER BY job_id, n`);
    expect(rows.rows.slice(-1)).toEqual([{ job_id: 'cat-0000', n: rows.rows.length, mark: 'approved', note: 'sharp after all' }]);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; mark: unknown }> };
    expect(report.jobs[0]).toMatchObject({ id: 'cat-0000', mark: { state: 'approved', note: 'sharp after all' } });
    const status = await runCli(['export', 'cats', '--state', db.url, '--to', join(t.dir, 'approved'), '--only', 'approved']);
    expect(status.stdout).toMatch(/^exported \d+ file\(s\) of 1 job\(s\)/);
  });

  it('names a run by its name among several; a folder not on this machine needs --out', async () => {
    await pool.query(`INSERT INTO runs (id, manifest, out_dir, started_at) SELECT max(id) + 1, '/elsewhere/dogs.yaml', '/elsewhere/genbatch-out/dogs', ${NOW_ISO} FROM runs`);
    try {
      const all = await runCli(['status', '--state', db.url, '--json']);
      expect((JSON.parse(all.stdout) as Array<{ manifest: string }>).map((s) => s.manifest)).toEqual([manifest, '/elsewhere/dogs.yaml']);
      const cats = await runCli(['status', 'cats', '--state', db.url, '--json']);
      expect(JSON.parse(cats.stdout)).toMatchObject({ manifest, counts: { done: 1 } });
      const none = await runCli(['status', 'birds', '--state', db.url]);
      expect(none.code).toBe(2);
      expect(none.stderr).toContain(`holds no run named birds; its runs:\n  cats (${manifest})\n  dogs (/elsewhere/dogs.yaml)`);
      const away = await runCli(['report', 'dogs', '--state', db.url]);
      expect(away.code).toBe(2);
      expect(away.stderr).toContain('the output folder of dogs, /elsewhere/genbatch-out/dogs, is not on this machine; pass --out DIR');
      const here = join(t.dir, 'dogs-here');
      const moved = await runCli(['report', 'dogs', '--state', db.url, '--out', here]);
      expect(moved.stderr).toBe('');
      expect(JSON.parse(readFileSync(join(here, 'report.json'), 'utf8')).summary).toMatchObject({ manifest: '/elsewhere/dogs.yaml', out_dir: here, workers: [] });
      for (const r of [all, none, away, moved]) expect(r.stdout + r.stderr).not.toContain(password);
    } finally {
      await pool.query(`DELETE FROM runs WHERE manifest = '/elsewhere/dogs.yaml'`);
    }
  });

  it('a database without a genbatch state, or one not reachable, is exit 2 naming it without the password', async () => {
    const empty = await testDatabase();
    try {
      const r = await runCli(['status', '--state', empty.url]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`holds no genbatch state (no run has been made in it`);
      expect(r.stderr).toContain(':***@');
      expect(r.stderr).not.toContain(password);
    } finally {
      await empty.drop();
    }
    const closed = new URL(db.url);
    closed.port = '1';
    const refused = await runCli(['status', '--state', closed.toString()]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^genbatch: PostgreSQL state postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/\w+: .*ECONNREFUSED/);
    expect(refused.stderr).not.toContain(password);
  });
});
