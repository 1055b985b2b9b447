import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { BALANCE, json, promptIn, startFakeService, submitted, type FakeService } from './helpers/fake-service.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { startS3, type TestS3 } from './helpers/s3.js';
import { readJobs } from './helpers/verify.js';

/**
 * The key in what a download's answer sends, not in the status answer (which the client redacts): a redirect
 * whose Location holds it (its target then named in the job's error, and in each retry's event), and a
 * Content-Type whose subtype is the key (a plain `type/subtype`, recorded as the file's content type).
 * Before: both reached the state file, the reports, result.json and what was printed.
 */
const KEY = 'sk-dl-echo-0123456789abcdef'; // lower case: a media type is stored lower-cased
const PNG = solidPng(8, 8, [1, 2, 3]);
const t = tempDir('genbatch-key-downloads-');
let service: FakeService;
let s3: TestS3;

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? listFiles(join(dir, e.name)) : [join(dir, e.name)]));
}

beforeAll(async () => {
  ensureBuilt();
  s3 = await startS3();
  service = await startFakeService((req, body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url === '/api/generate/submit') {
      const prompt = promptIn(body);
      return json(res, 200, submitted(`t-${prompt.split(' ')[0]}`));
    }
    if (url.startsWith('/api/generate/status/')) {
      const id = url.slice('/api/generate/status/'.length);
      const file = { file_url: `${service.base}/files/${id}.png`, file_type: 'image', file_size: PNG.length };
      return json(res, 200, { code: 200, data: { task_id: id, status: 'finished', files: [file], created_time: '2026-01-01T00:00:00', progress: 100, error_message: null } });
    }
    if (url === '/files/t-gone.png') return res.writeHead(302, { location: `/k/${KEY}/gone.png` }).end();
    if (url === '/files/t-busy.png') return res.writeHead(302, { location: `/k/${encodeURIComponent(KEY)}/busy.png` }).end();
    if (url.startsWith('/k/') && url.endsWith('/gone.png')) return res.writeHead(404).end();
    if (url.startsWith('/k/')) return res.writeHead(500).end();
    if (url === '/files/t-typed.png') return res.writeHead(200, { 'content-type': `image/${KEY}`, 'content-length': PNG.length }).end(PNG);
    json(res, 404, { detail: 'not found' });
  });
}, 60_000);
afterAll(async () => {
  await service?.close();
  await s3?.stop();
  t.cleanup();
});

function manifest(): string {
  const path = join(t.dir, 'dl.yaml');
  writeFileSync(
    path,
    [
      'jobs:',
      '  - {id: gone, model: alpha-image-2, input: {prompt: gone harbour}}',
      '  - {id: busy, model: alpha-image-2, input: {prompt: busy harbour}}',
      '  - {id: typed, model: alpha-image-2, input: {prompt: typed harbour}}',
    ].join('\n') + '\n',
  );
  return path;
}

describe('a download server that echoes the API key', () => {
  it('in a redirect Location or a Content-Type: the key reaches no file and nothing printed', async () => {
    const out = join(t.dir, 'out');
    const env = { GENBATCH_API_KEY: KEY };
    const run = await runCli(['run', manifest(), '--base-url', service.base, '--time-scale', '0.001', '--out', out, '--yes', '--json'], env, undefined, 60_000);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => [j.id, j.state])).toEqual([['gone', 'expired'], ['busy', 'downloading'], ['typed', 'done']]);
    expect(jobs[0]!.last_error).toContain('/k/[redacted]/gone.png');
    expect(run.stdout).toContain('"type":"retry"');
    const status = await runCli(['status', '--state', join(out, 'state.db'), '--json', '--jobs'], env);
    const report = await runCli(['report', '--state', join(out, 'state.db')], env);
    for (const printed of [run.stdout, run.stderr, status.stdout, status.stderr, report.stdout, report.stderr]) {
      expect(printed).not.toContain(KEY);
      expect(printed).not.toContain(encodeURIComponent(KEY));
    }
    for (const f of listFiles(out)) {
      if (statSync(f).isFile()) expect(readFileSync(f).toString('latin1').includes(KEY), f).toBe(false);
    }
  }, 90_000);

  it('the same into a bucket (--out s3://...): the key reaches no object, the state or anything printed', async () => {
    const state = join(t.dir, 'bucket-state.db');
    const env = { ...s3.env, GENBATCH_API_KEY: KEY };
    const run = await runCli(['run', manifest(), '--base-url', service.base, '--time-scale', '0.001', '--out', s3.url('echo'), '--state', state, '--yes', '--json'], env, t.dir, 60_000);
    const jobs = readJobs(state);
    expect(jobs.map((j) => [j.id, j.state])).toEqual([['gone', 'expired'], ['busy', 'downloading'], ['typed', 'done']]);
    expect(jobs[0]!.last_error).toContain('/k/[redacted]/gone.png');
    for (const printed of [run.stdout, run.stderr]) expect(printed).not.toContain(KEY);
    expect(readFileSync(state).toString('latin1').includes(KEY)).toBe(false);
    const objects = await s3.objects('echo');
    expect(objects.map((o) => o.key)).toContain('echo/typed/image-1.png');
    for (const o of objects) {
      expect(JSON.stringify(o)).not.toContain(KEY);
      expect((await s3.get(o.key)).toString('latin1').includes(KEY), o.key).toBe(false);
    }
  }, 90_000);
});
