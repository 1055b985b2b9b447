import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { BALANCE, json, startFakeService, type FakeService } from './helpers/fake-service.js';
import { startLyingS3 } from './helpers/lying-s3.js';
import { solidPng } from './helpers/png.js';
import { startS3, type TestS3 } from './helpers/s3.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * `genbatch run --out s3://...` (issue 22 item 3): a result is done only when the bucket shows it holds it,
 * and no result object carries an active type. A service labels every file `text/html`: an HTML page and a
 * PNG. Against s3rver the page is stored as application/octet-stream with Content-Disposition attachment
 * and the PNG as image/png. Through a proxy that answers every write 200 and keeps nothing, the run stops
 * before anything is submitted (exit 74); when only the probe is kept, the job is not done, its reason
 * recorded, and the run ends non-zero.
 */
const KEY = 'sk-s3-proof-0123456789';
const PNG = solidPng(8, 8, [200, 10, 10]);
const PAGE = Buffer.from('<!doctype html><html><body><script>fetch("/steal?" + document.cookie)</script></body></html>');
const t = tempDir('genbatch-s3-proof-');
let service: FakeService;
let s3: TestS3;
let submits = 0;

beforeAll(async () => {
  ensureBuilt();
  s3 = await startS3();
  service = await startFakeService((req, _body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url.startsWith('/files/')) {
      const body = url.startsWith('/files/page') ? PAGE : PNG;
      return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': body.length }).end(body);
    }
    if (url === '/api/generate/submit') {
      submits++;
      return json(res, 200, { code: 200, data: { task_id: `t-${submits}`, status: 'not_started', created_time: '2026-01-01T00:00:00' } });
    }
    if (url.startsWith('/api/generate/status/')) {
      const id = decodeURIComponent(url.slice('/api/generate/status/'.length));
      const files = [
        { file_url: `${service.base}/files/page.html`, file_type: 'image', file_name: 'page.html', file_size: PAGE.length },
        { file_url: `${service.base}/files/pic.png`, file_type: 'image', file_name: 'pic.html', file_size: PNG.length },
      ];
      return json(res, 200, { code: 200, data: { task_id: id, status: 'finished', files, created_time: '2026-01-01T00:00:00', progress: 100, error_message: null } });
    }
    json(res, 404, { detail: 'not found' });
  });
}, 60_000);
afterAll(async () => {
  await service?.close();
  await s3?.stop();
  t.cleanup();
});

let n = 0;
function manifest(): string {
  const path = join(t.dir, `m${n++}.yaml`);
  writeFileSync(path, ['jobs:', '  - id: pic', '    model: alpha-image-2', '    input:', '      prompt: "a quiet harbour"'].join('\n') + '\n');
  return path;
}

const run = (out: string, state: string, env: Record<string, string>) =>
  runCli(['run', manifest(), '--base-url', service.base, '--time-scale', '0.001', '--out', out, '--state', state, '--yes'], { ...env, GENBATCH_API_KEY: KEY }, undefined, 60_000);

describe('run to a bucket: proved writes, inert objects', () => {
  it('stores a result the service labels text/html as a download, and a PNG labelled text/html as image/png', async () => {
    const state = join(t.dir, 'inert.db');
    const r = await run(s3.url('inert'), state, s3.env);
    expect(r.code, r.stderr).toBe(0);
    expect(readJobs(state).map((j) => j.state)).toEqual(['done']);
    const types = new Map<string, [string | undefined, string | undefined]>();
    for (const key of await s3.keys('inert/pic/')) {
      const h = await s3.client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key }));
      types.set(key, [h.ContentType, h.ContentDisposition]);
    }
    expect(Object.fromEntries(types)).toEqual({
      'inert/pic/image-1.html': ['application/octet-stream', 'attachment'],
      'inert/pic/image-2.html': ['image/png', undefined],
      'inert/pic/result.json': ['application/json', undefined],
    });
    expect((await s3.get('inert/pic/image-1.html')).equals(PAGE)).toBe(true);
    expect((await s3.get('inert/pic/image-2.html')).equals(PNG)).toBe(true);
  });

  it('an endpoint that answers every write 200 and keeps nothing: stopped before anything is submitted (exit 74)', async () => {
    const liar = await startLyingS3(s3.port, 'drop');
    try {
      const before = submits;
      const r = await run(s3.url('liar-all'), join(t.dir, 'liar-all.db'), { ...s3.env, AWS_ENDPOINT_URL_S3: liar.url });
      expect(r.code, r.stderr).toBe(74);
      expect(r.stderr).toContain('bucket "bucket" does not keep what it is sent');
      expect(submits).toBe(before);
      expect(await s3.keys('liar-all/')).toEqual([]);
    } finally {
      await liar.stop();
    }
  });

  it('an endpoint that keeps only the probe: the job is not done, the reason recorded, exit 7, nothing in the bucket', async () => {
    const liar = await startLyingS3(s3.port, 'drop');
    liar.lies = (w) => !w.key.includes('.genbatch-partial/probe-');
    try {
      const state = join(t.dir, 'liar.db');
      const r = await run(s3.url('liar'), state, { ...s3.env, AWS_ENDPOINT_URL_S3: liar.url });
      // Exit 7: a job left for the next run (as any download that failed for good in this run).
      expect(r.code, r.stderr).toBe(7);
      expect(r.stderr).toContain('job pic: download failed (s3://bucket/liar/pic/image-1.html: PUT not held by the bucket');
      const [job] = readJobs(state);
      expect(job!.state).not.toBe('done');
      expect(job!.last_error).toContain('not held by the bucket: the bucket answered the write but holds no object there');
      expect(r.stderr + r.stdout).toContain('not held by the bucket');
      expect(liar.told.length).toBeGreaterThan(0);
      expect(await s3.keys('liar/')).toEqual([]);
    } finally {
      await liar.stop();
    }
  });
});
