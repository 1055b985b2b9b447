import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { BALANCE, bytes, json, promptIn, startFakeService, submitted, type FakeService } from './helpers/fake-service.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A finished image task whose `files` lists 100,000 entries (3.5 MB of status answer, well under its 16 MiB
 * limit). Before: the run recorded 100,000 files and downloaded them one by one (each may be up to 2 GiB), for
 * one job that asked for one image. Now a list over 1,000 entries is not a usable result: the job fails
 * with the reason and nothing is downloaded.
 */
const KEY = 'sk-many-files-0123456789';
const PNG = solidPng(4, 4, [5, 6, 7]);
const t = tempDir('genbatch-many-files-');
let service: FakeService;
let fetched = 0;

beforeAll(async () => {
  ensureBuilt();
  service = await startFakeService((req, body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url === '/api/generate/submit') {
      const prompt = promptIn(body);
      return json(res, 200, submitted(`t-${prompt.split(' ')[0]}`));
    }
    if (url.startsWith('/api/generate/status/')) {
      const id = url.slice('/api/generate/status/'.length);
      const n = id === 't-many' ? 100_000 : id === 't-long' ? 1 : 3;
      // t-long: one URL of 10,000,000 characters (a server refuses it with 431: the job was left downloading, the URL
      // stored in the state four times over and printed in each warning).
      const path = id === 't-long' ? `/f/${'a'.repeat(10_000_000)}` : '/f/';
      const files = Array.from({ length: n }, (_, i) => ({ file_url: `${service.base}${path}${i}.png`, file_type: 'image', file_size: PNG.length }));
      return json(res, 200, { code: 200, data: { task_id: id, status: 'finished', files, created_time: '2026-01-01T00:00:00', progress: 100, error_message: null } });
    }
    if (url.startsWith('/f/')) {
      fetched++;
      return bytes(res, 'image/png', PNG);
    }
    json(res, 404, { detail: 'not found' });
  });
}, 60_000);
afterAll(async () => {
  await service?.close();
  t.cleanup();
});

describe('a task whose result is over its bounds', () => {
  it('fails its job with the reason, downloads nothing; a task with 3 files is done', async () => {
    const manifest = join(t.dir, 'many.yaml');
    writeFileSync(
      manifest,
      ['jobs:', '  - {id: many, model: alpha-image-2, input: {prompt: many harbours}}', '  - {id: few, model: alpha-image-2, input: {prompt: few harbours}}'].join('\n') + '\n',
    );
    const out = join(t.dir, 'out');
    const run = await runCli(['run', manifest, '--base-url', service.base, '--time-scale', '0.001', '--out', out, '--yes'], { GENBATCH_API_KEY: KEY }, undefined, 60_000);
    expect(run.code, run.stderr).toBe(1);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => [j.id, j.state])).toEqual([['many', 'failed'], ['few', 'done']]);
    expect(jobs[0]!.last_error).toBe('result not usable: the task lists 100000 files, over the limit of 1000 per task');
    expect(fetched).toBe(3);
    expect(existsSync(join(out, 'many'))).toBe(false);
    expect(readdirSync(join(out, 'few')).sort()).toEqual(['image-1.png', 'image-2.png', 'image-3.png', 'result.json']);
  }, 90_000);

  it('a file URL of 10,000,000 characters: the job fails with the reason, nothing is fetched, nothing that long is kept or printed', async () => {
    const manifest = join(t.dir, 'long.yaml');
    writeFileSync(manifest, ['jobs:', '  - {id: long, model: alpha-image-2, input: {prompt: long harbours}}'].join('\n') + '\n');
    const out = join(t.dir, 'out-long');
    const before = fetched;
    const run = await runCli(['run', manifest, '--base-url', service.base, '--time-scale', '0.001', '--out', out, '--yes'], { GENBATCH_API_KEY: KEY }, undefined, 60_000);
    expect(run.code, run.stderr.slice(0, 500)).toBe(1);
    const [job] = readJobs(join(out, 'state.db'));
    expect(job!.state).toBe('failed');
    expect(job!.last_error).toBe('result not usable: files[0].file_url has 10000030 characters, over the limit of 8192');
    expect(fetched).toBe(before);
    expect(run.stdout.length + run.stderr.length).toBeLessThan(20_000);
    expect(statSync(join(out, 'report.json')).size).toBeLessThan(100_000);
  }, 90_000);
});
