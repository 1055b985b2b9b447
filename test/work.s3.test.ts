import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';
import { startS3, type TestS3 } from './helpers/s3.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Results in a bucket with the state in PostgreSQL: `genbatch run --state postgres://... --out s3://...` and a
 * `genbatch work` joining it (the bucket is the run's recorded output: nothing to mount), against the sandbox
 * and s3rver in this process. Every done file's row and its object agree (path, size, sha256 in the metadata).
 */

const KEY = 'sk-work-s3-0123456789abcdef';
const JOBS = 16;
const t = tempDir('genbatch-work-s3-');
let db: TestDatabase;
let pool: Pool;
let sb: Sandbox;
let s3: TestS3;

beforeAll(async () => {
  ensureBuilt();
  db = await testDatabase();
  pool = openPool(db.url);
  s3 = await startS3();
  // Every submit answered after 100 ms: the run is still going when the worker joins.
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.01, faults: [{ endpoint: 'submit', kind: 'slow', rate: 1, delayMs: 100 }] });
}, 180_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
  await sb?.close();
  await s3?.stop();
  t.cleanup();
});

describe('results in a bucket, state in PostgreSQL', () => {
  it('run and a joining worker put every result in the bucket, each object with its row\'s path, size and sha256', async () => {
    const manifest = imageManifest(join(t.dir, 'm.yaml'), JOBS, 'pic');
    const env = { ...s3.env, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY };
    const run = spawnCli(['run', manifest, '--state', db.url, '--out', s3.url('pg'), '--time-scale', '0.01', '--concurrency', '2'], env, t.dir);
    let runErr = '';
    run.stderr!.on('data', (d: Buffer) => (runErr += d.toString()));
    const runDone = new Promise<number | null>((resolve) => run.on('close', (code) => resolve(code)));
    // The worker joins once the run is in the database (it finds the bucket as the run's output).
    const deadline = Date.now() + 30_000;
    for (;;) {
      const rows = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM jobs WHERE state = 'done' OR state = 'submitted'`).catch(() => ({ rows: [{ n: 0 }] }));
      if ((rows.rows[0]?.n ?? 0) > 0 || Date.now() > deadline || run.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const worker = await runCli(['work', '--state', db.url, '--until-empty', '--time-scale', '0.01'], env, t.dir);
    expect(worker.code, worker.stderr).toBe(0);
    expect(await runDone, runErr).toBe(0);

    const jobs = await pool.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM jobs GROUP BY state');
    expect(jobs.rows).toEqual([{ state: 'done', n: JOBS }]);
    const files = await pool.query<{ job_id: string; path: string; size: number; sha256: string; worker: string | null }>(`SELECT job_id, path, size, sha256, worker FROM files WHERE state = 'done'`);
    expect(files.rows).toHaveLength(JOBS);
    const objects = new Map((await s3.objects('pg/')).map((o) => [o.key, o]));
    for (const f of files.rows) {
      const o = objects.get(`pg/${f.path}`);
      expect(o, f.path).toBeDefined();
      expect(o!.metadata.sha256).toBe(f.sha256);
      expect(o!.size).toBe(Number(f.size));
      expect(objects.has(`pg/${f.job_id}/result.json`)).toBe(true);
    }
    expect([...objects.keys()].filter((k) => k.includes('.genbatch-partial'))).toEqual([]);
    expect(s3.pendingUploads().filter((u) => u.key.startsWith('pg/'))).toEqual([]);

    // The readers on this state reach the bucket from here as the workers did: a bucket is no folder that must be
    // on this machine (report and export said "the output folder of m, s3://bucket/pg, is not on this machine").
    const readers = { ...env, GENBATCH_STATE: db.url };
    const report = await runCli(['report', 'm'], readers, t.dir);
    expect(report.code, report.stderr).toBe(0);
    expect(report.stdout).toContain(`${s3.url('pg')}/report.json`);
    const exported = await runCli(['export', 'm', '--to', join(t.dir, 'exported')], readers, t.dir);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout).toContain(`exported ${JOBS} file(s) of ${JOBS} job(s)`);
    const marked = await runCli(['mark', 'm', '--approve', 'pic-0000'], readers, t.dir);
    expect(marked.code, marked.stderr).toBe(0);
  }, 120_000);
});
