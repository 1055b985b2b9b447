import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { BALANCE, json, promptIn, startFakeService, type FakeService } from './helpers/fake-service.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A server that echoes the API key in the `type` of an error body (`{code, error: {message, type}}`): on a
 * submit's 400, in a 200 carrying an error envelope, and in a chat call's 400. The type is part of the
 * error's message (`HTTP 400 <type>: <message>`), which becomes the job's last_error, the reports and
 * what is printed. Before: the message was redacted, the type was not.
 */
const KEY = 'sk-type-echo-0123456789abcdef';
const t = tempDir('genbatch-key-type-');
let service: FakeService;

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? listFiles(join(dir, e.name)) : [join(dir, e.name)]));
}

beforeAll(async () => {
  ensureBuilt();
  service = await startFakeService((req, body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url === '/api/generate/submit') {
      const prompt = promptIn(body);
      if (prompt.includes('envelope')) return json(res, 200, { code: 422, error: { message: 'refused in a 200', type: `kind_${KEY}` } });
      return json(res, 400, { code: 400, error: { message: 'refused', type: `invalid_${KEY}` } });
    }
    if (url === '/v1/chat/completions') return json(res, 400, { error: { message: 'bad request', type: `chat_${KEY}` } });
    json(res, 404, { detail: 'not found' });
  });
}, 60_000);
afterAll(async () => {
  await service?.close();
  t.cleanup();
});

describe('a server that echoes the API key in an error type', () => {
  it('never gets the key into a job error, the state, the reports or what is printed', async () => {
    const manifest = join(t.dir, 'typed.yaml');
    writeFileSync(
      manifest,
      [
        'pricing: {vendorb/verse-4.5-fast: 0.01}',
        'jobs:',
        '  - {id: plain, model: alpha-image-2, input: {prompt: a quiet harbour}}',
        '  - {id: wrapped, model: alpha-image-2, input: {prompt: an envelope}}',
        '  - {id: talk, model: vendorb/verse-4.5-fast, protocol: chat-completions, input: {messages: [{role: user, content: hi}]}}',
      ].join('\n') + '\n',
    );
    const out = join(t.dir, 'out');
    const env = { GENBATCH_API_KEY: KEY };
    const run = await runCli(['run', manifest, '--base-url', service.base, '--time-scale', '0.001', '--out', out, '--yes', '--json'], env, undefined, 30_000);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => j.state)).toEqual(['failed', 'failed', 'failed']);
    expect(jobs.find((j) => j.id === 'plain')!.last_error).toBe('HTTP 400 invalid_[redacted]: refused');
    expect(jobs.find((j) => j.id === 'wrapped')!.last_error).toContain('HTTP 422 kind_[redacted]: refused in a 200');
    expect(jobs.find((j) => j.id === 'talk')!.last_error).toContain('HTTP 400 chat_[redacted]:');
    const status = await runCli(['status', '--state', join(out, 'state.db'), '--json', '--jobs'], env);
    for (const printed of [run.stdout, run.stderr, status.stdout, status.stderr]) expect(printed).not.toContain(KEY);
    for (const f of listFiles(out)) {
      if (statSync(f).isFile()) expect(readFileSync(f).toString('latin1').includes(KEY), f).toBe(false);
    }
  }, 60_000);
});
