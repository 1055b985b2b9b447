import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * `rehost: true`: the remote image URLs of a job are re-hosted through
 * POST /api/common/upload/url (the sandbox fetches them from a local HTTP
 * server; allowLoopback), deduplicated by URL, and the returned file_url is
 * what the submit sends. A job without `rehost` passes its URL through.
 */
const SCALE = '0.005';
const KEY = 'sk-rehost-0123456789';
let sb: Sandbox;
let origin: Server;
let originUrl = '';
const originHits: string[] = [];
const t = tempDir('genbatch-rehost-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 41, allowLoopback: true });
  const png = solidPng(16, 16, [10, 200, 90]);
  origin = createServer((req, res) => {
    originHits.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length }).end(png);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', () => resolve()));
  originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
}, 60_000);
afterAll(async () => {
  await sb?.close();
  await new Promise<void>((resolve) => origin.close(() => resolve()));
  t.cleanup();
});

const edit = (id: string, url: string, more = '') => `  - id: ${id}\n    model: alpha-image-2-edit\n${more}    input:\n      prompt: "Edit ${id}"\n      image_urls: ["${url}"]\n`;
const inputOf = (out: string, id: string) => (JSON.parse(readFileSync(join(out, id, 'result.json'), 'utf8')) as { input: { image_urls: string[] } }).input.image_urls;

describe('rehost', () => {
  it('re-hosts remote URLs of jobs that ask (once per URL), passes the others through, and reuses the upload on a rerun', async () => {
    const out = join(t.dir, 'out');
    const manifest = join(t.dir, 'rehost.yaml');
    const a = `${originUrl}/a.png`;
    const b = `${originUrl}/b.png`;
    writeFileSync(manifest, 'jobs:\n' + edit('r1', a, '    rehost: true\n') + edit('r2', a, '    rehost: true\n') + edit('r3', b, '    rehost: true\n') + edit('plain', b));
    const up0 = sb.stats().uploads.accepted;
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out], { GENBATCH_API_KEY: KEY });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(readJobs(join(out, 'state.db')).every((j) => j.state === 'done')).toBe(true);
    // Two distinct URLs re-hosted, each fetched once by the service.
    expect(sb.stats().uploads.accepted - up0).toBe(2);
    expect(originHits.sort()).toEqual(['/a.png', '/b.png']);
    const [r1] = inputOf(out, 'r1');
    const [r2] = inputOf(out, 'r2');
    const [r3] = inputOf(out, 'r3');
    expect(r1).toMatch(new RegExp(`^${sb.url}/temp/`));
    expect(r2).toBe(r1);
    expect(r3).toMatch(new RegExp(`^${sb.url}/temp/`));
    expect(r3).not.toBe(r1);
    expect(inputOf(out, 'plain')).toEqual([b]);

    // A changed job on a rerun reuses the earlier re-hosted copy (nothing fetched again).
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('"Edit r2"', '"Edit r2, changed"'));
    const again = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out], { GENBATCH_API_KEY: KEY });
    expect(again.code).toBe(0);
    expect(sb.stats().uploads.accepted - up0).toBe(2);
    expect(inputOf(out, 'r2')).toEqual([r1]);
  });

  it('rehost in defaults applies to every job; a non-boolean rehost is refused naming the field', async () => {
    const out = join(t.dir, 'out-defaults');
    const manifest = join(t.dir, 'defaults.yaml');
    writeFileSync(manifest, `defaults:\n  rehost: true\njobs:\n${edit('d1', `${originUrl}/d.png`)}`);
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out], { GENBATCH_API_KEY: KEY });
    expect(r.code).toBe(0);
    expect(inputOf(out, 'd1')[0]).toMatch(new RegExp(`^${sb.url}/temp/`));

    const bad = join(t.dir, 'bad.yaml');
    writeFileSync(bad, `jobs:\n${edit('b1', `${originUrl}/e.png`, '    rehost: "yes"\n')}`);
    const v = await runCli(['validate', bad]);
    expect(v.code).toBe(2);
    expect(v.stderr).toContain('rehost');
    expect(v.stderr).toContain('must be true or false');
  });
});
