import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { pgSandbox } from './helpers/pg-fixture.js';
import { copyToPostgres } from './helpers/pg-copy.js';

/**
 * genbatch work: two worker processes join a run kept in PostgreSQL, without its manifest, and finish it
 * together against the sandbox (in this process, over real HTTP): every job done once, every file on disk
 * as its row says, each file row naming the worker that wrote it.
 */

const KEY = 'sk-work-test-0123456789abcdef';
const JOBS = 12;
const f = pgSandbox({ prefix: 'genbatch-work-pg-', key: KEY, sandbox: { allowLoopback: true } });
let out: string;

beforeAll(async () => {
  const manifest = imageManifest(join(f.dir, 'cats.yaml'), JOBS, 'cat');
  // The run's jobs, synced and left pending: none fits --max-credits 1 (exit 5).
  const made = await runCli(['run', manifest, '--sandbox', '--max-credits', '1']);
  expect(made.code, made.stderr).toBe(5);
  out = join(f.dir, 'genbatch-out', 'cats.sandbox');
  await copyToPostgres(join(out, 'state.db'), f.pool);
  rmSync(join(out, 'state.db'));
  // As if the run had been made against this sandbox: work uses the run's service by default.
  // (and made before services were recorded: the first worker's service is adopted).
  await f.pool.query('UPDATE runs SET base_url = $1, sandbox = 0', [f.sandbox.url]);
  await f.pool.query("DELETE FROM meta WHERE key LIKE 'service:%'");
}, 180_000);

describe('genbatch work on PostgreSQL', () => {
  it('two workers finish the run together with --until-empty: each job done once, files on disk, each file row naming its worker', async () => {
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_STATE: f.db.url };
    const args = ['work', '--until-empty', '--time-scale', '0.01', '--json'];
    const [a, b] = await Promise.all([runCli(args, env), runCli(args, env)]);
    for (const r of [a, b]) {
      expect(r.code, r.stderr + r.stdout.split('\n').filter((l) => !l.includes('"type":"job"')).join('\n')).toBe(0);
      expect(r.stdout + r.stderr).not.toContain(new URL(f.db.url).password);
    }
    const states = await f.pool.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM jobs GROUP BY state');
    expect(states.rows).toEqual([{ state: 'done', n: JOBS }]);
    expect((await f.sandbox.stats()).tasks_total).toBe(JOBS);
    const workers = (await f.pool.query<{ id: string }>('SELECT id FROM workers')).rows.map((r) => r.id);
    expect(workers).toHaveLength(2);
    const files = await f.pool.query<{ job_id: string; path: string; size: number; sha256: string; worker: string }>(`SELECT job_id, path, size, sha256, worker FROM files WHERE state = 'done'`);
    expect(new Set(files.rows.map((f) => f.job_id)).size).toBe(JOBS);
    for (const f of files.rows) {
      expect(workers).toContain(f.worker);
      const bytes = readFileSync(join(out, f.path));
      expect(bytes.length).toBe(f.size);
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(f.sha256);
    }
    // Each worker's events say which run it joined, from the database.
    const start = JSON.parse(a.stdout.split('\n')[0]!) as { type: string; manifest: string; out_dir: string; state: string };
    expect(start).toMatchObject({ type: 'start', manifest: join(f.dir, 'cats.yaml'), out_dir: out });
    expect(start.state).toContain(':***@');
    // The counts it found, marked as joined (nothing synced: no "0 new, 0 changed" line for a worker).
    const synced = JSON.parse(a.stdout.split('\n')[1]!) as { type: string; jobs: number; joined?: boolean };
    expect(synced).toMatchObject({ type: 'synced', jobs: JOBS, joined: true });
    const text = await runCli(['work', '--until-empty', '--time-scale', '0.01'], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`genbatch: joined a run of ${JOBS} jobs (${JOBS} done)`);
    expect(text.stdout).not.toContain('0 new');
  });

  it("takes over a dead worker's download: the temporary file it left is removed, the job done", async () => {
    const job = 'cat-0003';
    // A worker died while downloading cat-0003: its lease ran out, its partial file is left in the job's folder.
    await f.pool.query(`UPDATE jobs SET state = 'downloading', lease_owner = 'gone:1:dead', lease_expires = now() - interval '1 minute' WHERE id = $1`, [job]);
    mkdirSync(join(out, job), { recursive: true });
    const partial = join(out, job, '.image-1.png.0123456789ab.part');
    writeFileSync(partial, 'half of it');
    const r = await runCli(['work', '--until-empty', '--time-scale', '0.01'], { GENBATCH_API_KEY: KEY, GENBATCH_STATE: f.db.url });
    expect(r.code, r.stderr).toBe(0);
    expect((await f.pool.query<{ state: string }>('SELECT state FROM jobs WHERE id = $1', [job])).rows[0]!.state).toBe('done');
    expect(existsSync(partial)).toBe(false);
  });

  it('with --listen, a worker receives the callbacks of the tasks it sends (one token for the database)', async () => {
    await f.pool.query(`UPDATE jobs SET state = 'pending', task_id = NULL, submitted_at = NULL, finished_at = NULL, lease_owner = NULL, lease_expires = NULL WHERE id IN ('cat-0004', 'cat-0005')`);
    const before = (await f.sandbox.stats()).callbacks;
    const r = await runCli(['work', '--until-empty', '--time-scale', '0.01', '--listen', '127.0.0.1:0', '--json'], { GENBATCH_API_KEY: KEY, GENBATCH_STATE: f.db.url });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('"type":"listening"');
    expect((await f.pool.query(`SELECT 1 FROM jobs WHERE state = 'done' AND id IN ('cat-0004', 'cat-0005')`)).rowCount).toBe(2);
    const after = (await f.sandbox.stats()).callbacks;
    expect(after.delivered - before.delivered).toBeGreaterThanOrEqual(1);
    expect((await f.pool.query(`SELECT value FROM meta WHERE key = 'callback_token'`)).rowCount).toBe(1);
  });

  it('without --until-empty a worker waits for more work until stopped: SIGTERM ends it at once (exit 143, as a run stopped by SIGTERM)', async () => {
    const child = spawnCli(['work', '--time-scale', '0.01', '--json'], { GENBATCH_API_KEY: KEY, GENBATCH_STATE: f.db.url });
    let out = '';
    const started = new Promise<void>((r) => child.stdout!.on('data', (d: Buffer) => ((out += d.toString()), out.includes('"type":"synced"') && r())));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    await started;
    // Nothing to do: it keeps looking (a second passes with it still running), then stops on SIGTERM.
    await new Promise((r) => setTimeout(r, 1000));
    expect(child.exitCode).toBeNull();
    // Meanwhile it reads the run's counts for its progress every 2 s: the database's, every worker's jobs.
    await vi.waitFor(() => expect(out).toContain('"type":"counts"'), { timeout: 10_000 });
    const event = out
      .split('\n')
      .filter((l) => l.includes('"type":"counts"'))
      .map((l) => JSON.parse(l) as { counts: Record<string, number>; files: number })[0]!;
    const db = await f.pool.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM jobs GROUP BY state');
    for (const r of db.rows) expect(event.counts[r.state], r.state).toBe(r.n);
    const files = await f.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM files WHERE state = 'done'`);
    expect(event.files).toBe(files.rows[0]!.n);
    expect(event.files).toBeGreaterThan(0);
    const t0 = Date.now();
    child.kill('SIGTERM');
    expect(await exited).toBe(143);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(out).toContain('"type":"finish"');
  });
});
