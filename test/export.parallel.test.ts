import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { PLACE_AT_ONCE } from '../src/export/export.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { startS3, type TestS3 } from './helpers/s3.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Issue #23 item 11: export placed one file at a time (a server-side copy waited for the one before). Now up to
 * PLACE_AT_ONCE (16) at once, through p-limit. Seen from the wire: an HTTP proxy in front of s3rver holds each
 * CopyObject a moment and counts how many are in flight together; the export is still whole and exact.
 */
const KEY = 'sk-export-parallel-0123456789';
const JOBS = 20;
const t = tempDir('genbatch-export-parallel-');
let sb: Sandbox;
let s3: TestS3;
let proxy: Server;
let proxyUrl: string;
let inFlight = 0;
let most = 0;
let copies = 0;

beforeAll(async () => {
  ensureBuilt();
  s3 = await startS3();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.005 });
  proxy = createServer((req, res) => {
    const copy = req.method === 'PUT' && req.headers['x-amz-copy-source'] !== undefined;
    if (copy) {
      copies++;
      most = Math.max(most, ++inFlight);
    }
    // Held 200 ms: copies sent together are seen together.
    setTimeout(() => {
      const up = request({ host: '127.0.0.1', port: s3.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
        r.on('end', () => copy && inFlight--);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    }, copy ? 200 : 0);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  const m = imageManifest(join(t.dir, 'm.yaml'), JOBS, 'p');
  const r = await runCli(['run', m, '--out', s3.url('runs/p'), '--time-scale', '0.005'], { ...s3.env, GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sb.url }, t.dir);
  if (r.code !== 0) throw new Error(`run failed: ${r.stderr}`);
}, 120_000);

afterAll(async () => {
  await new Promise((r) => proxy?.close(r));
  await sb?.close();
  await s3?.stop();
  t.cleanup();
});

it('copies the files of a bucket run server-side several at once, never more than PLACE_AT_ONCE, and the export is whole', async () => {
  const m = join(t.dir, 'm.yaml');
  const r = await runCli(['export', m, '--out', s3.url('runs/p'), '--to', s3.url('exp')], { ...s3.env, AWS_ENDPOINT_URL_S3: proxyUrl }, t.dir);
  expect(r.code, r.stderr).toBe(0);
  expect(copies).toBe(JOBS);
  expect(most).toBeGreaterThan(1);
  expect(most).toBeLessThanOrEqual(PLACE_AT_ONCE);
  const keys = await s3.keys('exp/');
  expect(keys.filter((k) => /\/p-\d{4}\//.test(k))).toHaveLength(JOBS);
  const index = (await s3.get('exp/metadata.jsonl')).toString('utf8').trimEnd().split('\n');
  // In manifest order, as a one-at-a-time export wrote it.
  expect(index.map((l) => (JSON.parse(l) as { job_id: string }).job_id)).toEqual(Array.from({ length: JOBS }, (_, i) => `p-${String(i).padStart(4, '0')}`));
});
