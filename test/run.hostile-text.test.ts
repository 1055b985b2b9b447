import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { BALANCE, json, promptIn, startFakeService, submitted, type FakeService } from './helpers/fake-service.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A server's error text is printed (warnings, `status --jobs`), stored (last_error) and reported. A hostile
 * server sends terminal escapes in it (ESC ] 52 writes the clipboard of some terminals, ESC [ 2J clears the
 * screen), a CR/LF that forges a line of genbatch's own, and a megabyte of it. Before: all of it reached the
 * terminal and the state as sent.
 */
const KEY = 'sk-hostile-text-0123456789';
const ESC = '\u001b';
const NASTY = `${ESC}]52;c;ZWNobyBwd25lZA==\u0007${ESC}[2J${ESC}[31mred\r\ngenbatch: all jobs done\u202e`;
const t = tempDir('genbatch-hostile-text-');
let service: FakeService;
let statusReads = 0;
let submits = 0;

beforeAll(async () => {
  ensureBuilt();
  service = await startFakeService((req, body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url === '/api/generate/submit') {
      submits++;
      const prompt = promptIn(body);
      if (prompt.startsWith('long')) return json(res, 200, submitted('t'.repeat(300_000)));
      if (prompt.startsWith('escaped')) return json(res, 200, submitted(`t-${ESC}[2J${ESC}]0;title\u0007`));
      if (prompt.startsWith('refused')) return json(res, 400, { code: 400, error: { message: `no ${NASTY} ${'x'.repeat(200_000)}`, type: 'invalid_request' } });
      return json(res, 200, submitted(`t-${prompt.split(' ')[0]}`));
    }
    if (url.startsWith('/api/generate/status/')) {
      // The first reads are 500s whose text is raw (past the client's 10 tries, a warning prints it), then the task fails.
      if (statusReads++ < 10) return res.writeHead(500, { 'content-type': 'text/plain' }).end(`oops ${NASTY}`);
      const id = url.slice('/api/generate/status/'.length);
      return json(res, 200, { code: 200, data: { task_id: id, status: 'failed', files: [], created_time: '2026-01-01T00:00:00', error_message: `${NASTY} ${'y'.repeat(500_000)}` } });
    }
    json(res, 404, { detail: 'not found' });
  });
}, 60_000);
afterAll(async () => {
  await service?.close();
  t.cleanup();
});

describe('a server whose error text holds terminal escapes, line breaks and a megabyte', () => {
  it('reaches the terminal and the state as one visible line of bounded length', async () => {
    const manifest = join(t.dir, 'text.yaml');
    writeFileSync(
      manifest,
      ['jobs:', '  - {id: sent, model: alpha-image-2, input: {prompt: sent harbour}}', '  - {id: refused, model: alpha-image-2, input: {prompt: refused harbour}}'].join('\n') + '\n',
    );
    const out = join(t.dir, 'out');
    const env = { GENBATCH_API_KEY: KEY };
    const run = await runCli(['run', manifest, '--base-url', service.base, '--time-scale', '0.001', '--out', out, '--yes'], env, undefined, 30_000);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain('status read failed');
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => j.state)).toEqual(['failed', 'failed']);
    for (const j of jobs) {
      expect(j.last_error).toContain('\\u001b]52;c;');
      expect(j.last_error).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
      expect(j.last_error!.length).toBeLessThan(2_000);
    }
    const status = await runCli(['status', '--state', join(out, 'state.db'), '--jobs'], env);
    for (const printed of [run.stdout, run.stderr, status.stdout, status.stderr]) {
      expect(printed).not.toContain(ESC);
      expect(printed).not.toContain('\r');
      expect(printed).not.toMatch(/^genbatch: all jobs done/m);
      expect(printed.length).toBeLessThan(20_000);
    }
  }, 60_000);

  it('a task id of 300,000 characters or with terminal escapes is not taken: the job is uncertain (a task may exist), sent once', async () => {
    const manifest = join(t.dir, 'ids.yaml');
    writeFileSync(
      manifest,
      ['jobs:', '  - {id: long, model: alpha-image-2, input: {prompt: long harbour}}', '  - {id: escaped, model: alpha-image-2, input: {prompt: escaped harbour}}'].join('\n') + '\n',
    );
    const out = join(t.dir, 'out-ids');
    const env = { GENBATCH_API_KEY: KEY };
    const before = submits;
    const run = await runCli(['run', manifest, '--base-url', service.base, '--time-scale', '0.001', '--out', out, '--yes'], env, undefined, 30_000);
    expect(run.code, run.stderr).toBe(4);
    expect(submits - before).toBe(2);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => [j.id, j.state, j.task_id])).toEqual([['long', 'uncertain', null], ['escaped', 'uncertain', null]]);
    expect(jobs.map((j) => j.last_error)).toEqual([
      'submit outcome unknown, a task may have been created: submit: the answer\'s data does not have the documented shape: task_id: is longer than 256 characters',
      'submit outcome unknown, a task may have been created: submit: the answer\'s data does not have the documented shape: task_id: holds control characters',
    ]);
    const status = await runCli(['status', '--state', join(out, 'state.db'), '--jobs'], env);
    for (const printed of [run.stdout, run.stderr, status.stdout, status.stderr]) {
      expect(printed).not.toContain(ESC);
      expect(printed).not.toContain('t'.repeat(1000));
    }
  }, 60_000);
});
