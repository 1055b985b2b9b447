import { DeleteObjectCommand } from '@aws-sdk/client-s3';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { startS3, type TestS3 } from './helpers/s3.js';
import { tempDir } from './helpers/tmp.js';
import { pageRows } from './helpers/page.js';
import { startViewProcess } from './helpers/view.js';
import { readJobs } from './helpers/verify.js';

/**
 * The reader commands of a run whose output is in a bucket (`run --out s3://bucket/prefix`): status, report
 * and view find its state beside the manifest; report writes the four reports under the prefix (or another
 * prefix of the bucket, linking the results relatively); view serves the results by streaming their objects,
 * confined to the prefix, and its job page reads result.json from the bucket.
 */

let s3: TestS3;
let sb: Sandbox;
const KEY = 'sk-s3-readers-0001';
const t = tempDir('genbatch-s3-readers-');
let manifest: string;
let env: Record<string, string>;
const OUT = 's3://bucket/runs/r';

beforeAll(async () => {
  ensureBuilt();
  s3 = await startS3();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.005, seed: 5 });
  manifest = imageManifest(join(t.dir, 'm.yaml'), 4, 'pic');
  env = { ...s3.env, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY };
  const r = await runCli(['run', manifest, '--out', OUT, '--time-scale', '0.005'], env, t.dir);
  if (r.code !== 0) throw new Error(`run failed: ${r.stderr}`);
}, 60_000);
afterAll(async () => {
  await sb?.close();
  await s3?.stop();
  t.cleanup();
});

describe('readers of a run in a bucket', () => {
  it('status --out s3://... (or the manifest alone) reads the state beside the manifest; without a manifest it says how to name it (exit 2)', async () => {
    const r = await runCli(['status', manifest, '--out', OUT, '--json'], env, t.dir);
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout) as { out_dir: string; counts: Record<string, number> };
    expect(s.out_dir).toBe(OUT);
    expect(s.counts.done).toBe(4);
    // The manifest alone: its state beside it, where run put it for a run to a bucket.
    const named = await runCli(['status', manifest, '--json'], env, t.dir);
    expect(named.code, named.stderr).toBe(0);
    expect((JSON.parse(named.stdout) as { out_dir: string }).out_dir).toBe(OUT);
    const bare = await runCli(['status', '--out', OUT], env, t.dir);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('the state of a run to a bucket is kept on the machine that ran it');
    expect(bare.stderr).toContain(`genbatch status <manifest> --out ${OUT}`);
  });

  it('report --out s3://... writes the four reports again under the prefix', async () => {
    await s3.client.send(new DeleteObjectCommand({ Bucket: 'bucket', Key: 'runs/r/report.md' }));
    const r = await runCli(['report', manifest, '--out', OUT], env, t.dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`${OUT}/report.json, ${OUT}/report.csv, ${OUT}/report.md, ${OUT}/report.html`);
    expect((await s3.get('runs/r/report.md')).toString()).toContain('pic-0003');
  });

  it('report into another prefix of the bucket links the results relatively from there; onto a disk folder it refuses (no relative link)', async () => {
    const r = await runCli(['report', manifest, '--out', 's3://bucket/reports/r'], env, t.dir);
    expect(r.code, r.stderr).toBe(0);
    const job = readJobs(join(t.dir, 'genbatch-state', 'm.db'))[0]!;
    expect((await s3.get('reports/r/report.html')).toString()).toContain(`"../../runs/r/${job.id}/`);
    const disk = await runCli(['report', manifest, '--state', join(t.dir, 'genbatch-state', 'm.db'), '--out', join(t.dir, 'local')], env, t.dir);
    expect(disk.code).toBe(2);
    expect(disk.stderr).toContain('report.html links the results by relative paths');
  });

  it('report.html in the bucket, with the prefix synced to a disk: every result link leads to its file', async () => {
    const dir = join(t.dir, 'synced');
    for (const key of await s3.keys('runs/r/')) {
      const path = join(dir, ...key.slice('runs/r/'.length).split('/'));
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, await s3.get(key));
    }
    const { rows } = pageRows(readFileSync(join(dir, 'report.html'), 'utf8'));
    const links = rows.flatMap((r) => r.files.map((f) => f.href));
    expect(links).toHaveLength(4);
    for (const href of links) {
      expect(href).not.toMatch(/^(\/|[a-z]+:)/);
      expect(existsSync(join(dir, ...href!.split('/').map(decodeURIComponent))), href!).toBe(true);
    }
  });

  it('view serves a result by streaming its object, only under the prefix; the job page reads result.json from the bucket', async () => {
    const objects = await s3.objects('runs/r/pic-0001/');
    const png = objects.find((o) => /\.(png|jpe?g)$/.test(o.key))!;
    const result = objects.find((o) => o.key.endsWith('/result.json'))!;
    const v = await startViewProcess([manifest, '--out', OUT], env);
    try {
      const rel = png.key.slice('runs/r/'.length);
      const res = await fetch(`${v.base}/files/${rel.split('/').map(encodeURIComponent).join('/')}`, { headers: { 'x-genbatch-token': v.token } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe(png.key.endsWith('.png') ? 'image/png' : 'image/jpeg');
      expect(Buffer.from(await res.arrayBuffer()).equals(await s3.get(png.key))).toBe(true);
      const head = await fetch(`${v.base}/files/${rel.split('/').map(encodeURIComponent).join('/')}`, { method: 'HEAD', headers: { 'x-genbatch-token': v.token } });
      expect(head.status).toBe(200);
      expect(head.headers.get('content-length')).toBe(String(png.size));
      for (const bad of ['..%2Fr%2Freport.json', '.genbatch-partial/x', 'pic-0001/..', 'nothing/here.png']) {
        expect((await fetch(`${v.base}/files/${bad}`, { headers: { 'x-genbatch-token': v.token } })).status, bad).toBe(404);
      }
      const page = await (await fetch(`${v.base}/job/pic-0001`, { headers: { 'x-genbatch-token': v.token } })).text();
      expect(page).toContain('pic-0001/result.json');
      expect(page).toContain(result.metadata.sha256!);
    } finally {
      expect(await v.stop()).toBe(0);
    }
  });

  it('mark rewrites the reports in the bucket; the job page of a job made again lists its earlier result kept in previous-1/ in the bucket, with sha256', async () => {
    const mark = await runCli(['mark', manifest, '--out', OUT, '--reject', 'pic-0002'], env, t.dir);
    expect(mark.code, mark.stderr).toBe(0);
    // mark writes the reports again, in the bucket.
    const marked = JSON.parse((await s3.get('runs/r/report.json')).toString('utf8')) as { jobs: Array<{ id: string; mark: { state: string } | null }> };
    expect(marked.jobs.find((j) => j.id === 'pic-0002')!.mark?.state).toBe('rejected');
    const again = await runCli(['run', manifest, '--out', OUT, '--time-scale', '0.005', '--redo', 'rejected'], env, t.dir);
    expect(again.code, again.stderr).toBe(0);
    const earlier = (await s3.objects('runs/r/pic-0002/previous-1/')).find((o) => /\.(png|jpe?g)$/.test(o.key))!;
    expect(earlier).toBeDefined();
    const v = await startViewProcess([manifest, '--out', OUT], env);
    try {
      const page = await (await fetch(`${v.base}/job/pic-0002`, { headers: { 'x-genbatch-token': v.token } })).text();
      expect(page).toContain('previous-1');
      expect(page).toContain(earlier.key.slice('runs/r/'.length));
      expect(page).toContain(earlier.metadata.sha256!);
    } finally {
      expect(await v.stop()).toBe(0);
    }
  });
});
