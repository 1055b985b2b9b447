import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { BALANCE, json, promptIn, startFakeService, type FakeService } from './helpers/fake-service.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A server that echoes the API key everywhere it can: in a failed task's error_message (plain and
 * as a Bearer header), in a task id, in a file URL's query (plain and percent-encoded), in a file
 * name, in metadata, in a Content-Type, and in a chat answer. The key must reach no file genbatch
 * writes (state.db, its WAL, reports, result.json, names of files) and nothing it prints.
 */
const KEY = 'sk-echo/Key+0123456789abcdef';
const ENC = encodeURIComponent(KEY);
/** Every character of the key percent-encoded, as a hostile server may hide it. */
const PCT = [...KEY].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`).join('');
const PNG = solidPng(8, 8, [9, 8, 7]);
const t = tempDir('genbatch-key-echo-');
let service: FakeService;
let base = '';

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? listFiles(join(dir, e.name)) : [join(dir, e.name)]));
}

beforeAll(async () => {
  ensureBuilt();
  let n = 0;
  service = await startFakeService((req, body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url.startsWith('/files/')) {
      res.writeHead(200, { 'content-type': `image/png; note=${KEY}`, 'content-length': PNG.length }).end(PNG);
      return;
    }
    if (url === '/api/generate/submit') {
      const prompt = promptIn(body);
      n++;
      const id = prompt.includes('hide') ? `t-hide-${prompt.includes('fail') ? 'fail-' : ''}${n}` : prompt.includes('fail') ? `t-fail-${n}` : `t-${KEY}-${n}`;
      return json(res, 200, { code: 200, data: { task_id: id, status: 'not_started', created_time: '2026-01-01T00:00:00' } });
    }
    if (url.startsWith('/api/generate/status/')) {
      const id = decodeURIComponent(url.slice('/api/generate/status/'.length));
      // The key percent-encoded beside a stray "%" (decodeURIComponent gives up on the whole text).
      if (id.startsWith('t-hide-fail')) {
        return json(res, 200, { code: 200, data: { task_id: id, status: 'failed', files: [], created_time: '2026-01-01T00:00:00', progress: 100, error_message: `100% sure: key=${PCT}` } });
      }
      if (id.startsWith('t-hide')) {
        const file = { file_url: `${base}/files/h.png?q=100%&t=${PCT}`, file_type: 'image', file_name: `n-${PCT}-%zz.png`, file_size: PNG.length, metadata: { note: `%%${PCT}` } };
        return json(res, 200, { code: 200, data: { task_id: id, status: 'finished', files: [file], created_time: '2026-01-01T00:00:00', progress: 100, error_message: null } });
      }
      if (id.startsWith('t-fail')) {
        return json(res, 200, { code: 200, data: { task_id: id, status: 'failed', files: [], created_time: '2026-01-01T00:00:00', progress: 100, error_message: `content policy for key ${KEY} (Authorization: Bearer ${KEY}) [${ENC}]` } });
      }
      const file = { file_url: `${base}/files/p.png?token=${KEY}&t2=${ENC}`, file_type: 'image', label: `label ${KEY}`, format: 'png', content_type: 'image/png', file_name: `${KEY}.png`, file_size: PNG.length, metadata: { note: KEY, [KEY]: 1 } };
      return json(res, 200, { code: 200, data: { task_id: id, status: 'finished', files: [file], created_time: '2026-01-01T00:00:00', progress: 100, error_message: null } });
    }
    if (url === '/v1/chat/completions' && (JSON.parse(body) as { stream?: boolean }).stream) {
      // The key split over two events' text deltas: each event alone does not hold it.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const half = Math.floor(KEY.length / 2);
      for (const part of ['your key is ', KEY.slice(0, half), KEY.slice(half)]) res.write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: part }, finish_reason: null }] })}\n\n`);
      res.end(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`);
      return;
    }
    if (url === '/v1/chat/completions') {
      return json(res, 200, { id: `chat-${KEY}`, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: `your key is ${KEY}` }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 4 } });
    }
    json(res, 404, { detail: 'not found' });
  });
  base = service.base;
}, 60_000);
afterAll(async () => {
  await service?.close();
  t.cleanup();
});

describe('a server that echoes the API key', () => {
  it('never gets the key onto disk or into what genbatch prints', async () => {
    const manifest = join(t.dir, 'echo.yaml');
    writeFileSync(
      manifest,
      [
        'pricing: {vendorb/verse-4.5-fast: 0.01}',
        'jobs:',
        '  - {id: pic, model: alpha-image-2, input: {prompt: a quiet harbour}}',
        '  - {id: bad, model: alpha-image-2, input: {prompt: please fail}}',
        '  - {id: talk, model: vendorb/verse-4.5-fast, protocol: chat-completions, input: {messages: [{role: user, content: hi}]}}',
      ].join('\n') + '\n',
    );
    const out = join(t.dir, 'out');
    const env = { GENBATCH_API_KEY: KEY };
    const run = await runCli(['run', manifest, '--base-url', base, '--time-scale', '0.001', '--out', out, '--yes'], env, undefined, 30_000);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => [j.id, j.state]).sort()).toEqual([['bad', 'failed'], ['pic', 'done'], ['talk', 'done']]);
    expect(jobs.find((j) => j.id === 'bad')!.last_error).toContain('content policy for key [redacted]');
    const status = await runCli(['status', '--state', join(out, 'state.db'), '--json', '--jobs'], env);
    const report = await runCli(['report', '--state', join(out, 'state.db')], env);

    for (const printed of [run.stdout, run.stderr, status.stdout, status.stderr, report.stdout, report.stderr]) {
      expect(printed).not.toContain(KEY);
      expect(printed).not.toContain(ENC);
    }
    const files = listFiles(out);
    expect(files.some((f) => f.endsWith('.png'))).toBe(true);
    for (const f of files) {
      expect(f).not.toContain(KEY);
      if (!statSync(f).isFile()) continue;
      const bytes = readFileSync(f).toString('latin1');
      expect(bytes.includes(KEY), f).toBe(false);
      expect(bytes.includes(ENC), f).toBe(false);
    }
    expect(readFileSync(join(out, 'talk', 'response.txt'), 'utf8')).toBe('your key is [redacted]');
  }, 60_000);
});

describe('a server that hides the API key', () => {
  it('percent-encoded beside a stray "%", or split over streamed chat events: the key reaches no file and nothing printed', async () => {
    const manifest = join(t.dir, 'hide.yaml');
    writeFileSync(
      manifest,
      [
        'pricing: {vendorb/verse-4.5-fast: 0.01}',
        'jobs:',
        '  - {id: pic, model: alpha-image-2, input: {prompt: hide it}}',
        '  - {id: bad, model: alpha-image-2, input: {prompt: hide and fail}}',
        '  - {id: talk, model: vendorb/verse-4.5-fast, protocol: chat-completions, input: {stream: true, messages: [{role: user, content: hi}]}}',
      ].join('\n') + '\n',
    );
    const out = join(t.dir, 'out-hide');
    const env = { GENBATCH_API_KEY: KEY };
    const run = await runCli(['run', manifest, '--base-url', base, '--time-scale', '0.001', '--out', out, '--yes'], env, undefined, 30_000);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => [j.id, j.state]).sort()).toEqual([['bad', 'failed'], ['pic', 'done'], ['talk', 'done']]);
    expect(jobs.find((j) => j.id === 'bad')!.last_error).toContain('100% sure: key=[redacted]');
    const status = await runCli(['status', '--state', join(out, 'state.db'), '--json', '--jobs'], env);
    // Either half of the key on disk is a leak too (the stream sent it in two events, side by side).
    const half = Math.floor(KEY.length / 2);
    const leaks = (text: string): boolean => text.includes(KEY.slice(0, half)) || text.includes(KEY.slice(half)) || text.toUpperCase().includes(PCT);
    for (const printed of [run.stdout, run.stderr, status.stdout, status.stderr]) expect(leaks(printed), printed).toBe(false);
    for (const f of listFiles(out)) {
      expect(leaks(f), f).toBe(false);
      if (statSync(f).isFile()) expect(leaks(readFileSync(f).toString('latin1')), f).toBe(false);
    }
    expect(readFileSync(join(out, 'talk', 'response.txt'), 'utf8')).toBe('your key is [redacted]');
  }, 60_000);
});

describe('a callback that echoes the API key', () => {
  it('gives the run a task id with the key redacted', async () => {
    const { CallbackReceiver } = await import('../src/engine/pipeline/receiver.js');
    const { redactDeep } = await import('../src/client/index.js');
    const notes: Array<{ taskId: string }> = [];
    const r = new CallbackReceiver((n) => notes.push(n), 'tok-0123456789', (value) => redactDeep(value, KEY));
    const addr = await r.listen('127.0.0.1', 0);
    try {
      const url = r.urlFor(`http://127.0.0.1:${addr.port}/`, 'pic', 1);
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: 200, data: { task_id: `t-${KEY}`, status: 'finished' } }) });
      expect(res.status).toBe(200);
      expect(notes.map((n) => n.taskId)).toEqual(['t-[redacted]']);
    } finally {
      await r.close();
    }
  });
});
