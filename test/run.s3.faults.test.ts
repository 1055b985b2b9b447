import { createHash } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { mixedManifest } from './helpers/mixed-manifest.js';
import { startS3, type TestS3 } from './helpers/s3.js';
import { tempDir } from './helpers/tmp.js';
import { integrity, readJobs } from './helpers/verify.js';

/**
 * 150 mixed jobs (images, edits of local PNGs, dream-4 n: 2, music, video) run to `--out s3://bucket/prefix`
 * while the sandbox injects faults on every endpoint the run uses: 5xx, 429 and dropped connections on status,
 * detail, file, upload and balance; truncated bodies on file downloads (full Content-Length, then the socket
 * closes); 503 and 429 on submit (nothing created: retried). Submit 500/502 (the ambiguous kinds, whose jobs
 * become uncertain) are left to run.faults.test.ts: here every job must end done in one run.
 * Asserted: exit 0, every job done; every recorded file is an object under the prefix whose x-amz-meta-sha256,
 * size and body equal the state's and the server's bytes; the four reports are there; no temporary object and
 * no multipart upload is left.
 */
const SCALE = '0.005';
const KEY = 'sk-s3-faults-0123456789';
const JOBS = 150;
const common = (ep: string) => [`${ep}:500=0.05`, `${ep}:502=0.05`, `${ep}:503=0.05`, `${ep}:429=0.1`, `${ep}:drop=0.05`];
const FAULTS = [...['status', 'detail', 'file', 'upload', 'balance'].flatMap(common), 'file:truncate=0.05', 'submit:503=0.05', 'submit:429=0.1'].join(',');

let sb: Sandbox;
let s3: TestS3;
const t = tempDir('genbatch-s3-faults-');

beforeAll(async () => {
  ensureBuilt();
  s3 = await startS3();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 10_000_000 }, timeScale: Number(SCALE), faults: FAULTS, seed: 14 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  await s3?.stop();
  t.cleanup();
});

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** The server's whole body at `url`, with faults switched off for this one request. */
async function fetchWhole(url: string): Promise<Buffer> {
  sb.script('file', ['ok']);
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return Buffer.from(await res.arrayBuffer());
}

describe('run to a bucket under injected service faults', () => {
  it(`${JOBS} mixed jobs all done; every object's sha256 metadata, size and bytes equal the state's and the server's; four reports; nothing partial left`, async () => {
    const { path: manifest, kinds } = mixedManifest(t.dir, 'f', JOBS, 30);
    const state = join(t.dir, 'state.db');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', s3.url('runs/faults'), '--state', state, '--concurrency', '16', '--yes'], {
      ...s3.env,
      GENBATCH_API_KEY: KEY,
    });
    expect(r.code, r.stderr).toBe(0);
    const jobs = readJobs(state);
    expect(jobs).toHaveLength(JOBS);
    expect(jobs.filter((j) => j.state !== 'done')).toEqual([]);
    expect(sb.stats().tasks_total).toBe(JOBS);

    const db = new Database(state, { readonly: true });
    const files = db.prepare(`SELECT job_id, path, size, sha256, url FROM files WHERE state = 'done' ORDER BY job_id, idx`).all() as Array<{ job_id: string; path: string; size: number; sha256: string; url: string | null }>;
    db.close();
    expect(files.length).toBeGreaterThanOrEqual(kinds.image! + kinds.edit! + 2 * kinds.multi! + 4 * kinds.music! + kinds.video!);
    const objects = new Map((await s3.objects('runs/faults/')).map((o) => [o.key, o]));
    for (const f of files) {
      const o = objects.get(`runs/faults/${f.path}`);
      expect(o, `${f.path} in the bucket`).toBeDefined();
      expect(o!.metadata.sha256, f.path).toBe(f.sha256);
      expect(o!.size, f.path).toBe(f.size);
      expect(sha256(await s3.get(`runs/faults/${f.path}`)), f.path).toBe(f.sha256);
      if (f.url !== null) expect(sha256(await fetchWhole(f.url)), `${f.path}: the server's bytes`).toBe(f.sha256);
    }
    for (const name of ['report.json', 'report.csv', 'report.md', 'report.html']) expect(objects.has(`runs/faults/${name}`), name).toBe(true);
    const report = JSON.parse((await s3.get('runs/faults/report.json')).toString('utf8')) as { summary: { counts: Record<string, number> } };
    expect(Object.entries(report.summary.counts).filter(([, n]) => n > 0)).toEqual([['done', JOBS]]);
    expect([...objects.keys()].filter((k) => k.includes('.genbatch-partial/'))).toEqual([]);
    expect(s3.pendingUploads()).toEqual([]);
    expect(integrity(state)).toBe('ok');

    const injected = sb.stats().faults_injected;
    for (const kind of ['file:truncate', 'file:drop', 'submit:503', 'submit:429']) expect(injected[kind] ?? 0, kind).toBeGreaterThan(0);
    console.log(`s3 fault run: ${Object.values(injected).reduce((a, b) => a + b, 0)} faults injected, ${files.length} objects checked`);
  }, 300_000);
});
