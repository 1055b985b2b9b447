import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { BALANCE, bytes, json, startFakeService, type FakeService } from './helpers/fake-service.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A tiny service whose tasks finish at once: the completion callback is delivered (and
 * answered 200 by the runner's receiver) while the submit's own answer is still on its way,
 * and that answer is then lost (a 500 after the task was created). The callback carried the
 * job id and the task id: the job must not end `uncertain` (nor be sent twice).
 */
const KEY = 'sk-early-callback-0123456789';
const PNG = solidPng(8, 8, [10, 200, 10]);
const t = tempDir('genbatch-cb-early-');
let service: FakeService;
let base = '';
const submits: string[] = [];
let taskNo = 0;

function taskData(id: string) {
  return { task_id: id, status: 'finished', files: [{ file_url: `${base}/files/${id}.png`, file_type: 'image', file_size: PNG.length }], created_time: '2026-01-01T00:00:00', progress: 100, error_message: null };
}

beforeAll(async () => {
  ensureBuilt();
  service = await startFakeService(async (req, body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url.startsWith('/files/')) return bytes(res, 'image/png', PNG);
    if (url.startsWith('/api/generate/status/')) return json(res, 200, { code: 200, data: taskData(decodeURIComponent(url.split('/').pop()!)) });
    if (url === '/api/generate/submit') {
      const sent = JSON.parse(body) as { callback_url?: string };
      const id = `task-${++taskNo}`;
      submits.push(id);
      // The task finishes at once; its callback is delivered before the submit answer, which is lost.
      if (sent.callback_url) {
        await fetch(sent.callback_url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: 200, data: taskData(id) }) });
      }
      return json(res, 500, { code: 500, error: { message: 'internal error after the task was created', type: 'internal_error' } });
    }
    json(res, 404, { detail: 'not found' });
  });
  base = service.base;
}, 60_000);
afterAll(async () => {
  await service?.close();
  t.cleanup();
});

describe('a completion callback that arrives before the submit answer', () => {
  it('is kept: the submit answer is then lost (500), and the job adopts the task from that callback instead of ending uncertain', async () => {
    const manifest = imageManifest(join(t.dir, 'early.yaml'), 1, 'early');
    const out = join(t.dir, 'out');
    const r = await runCli(['run', manifest, '--base-url', base, '--time-scale', '0.001', '--out', out, '--listen', '127.0.0.1:0', '--yes'], { GENBATCH_API_KEY: KEY });
    const [job] = readJobs(join(out, 'state.db'));
    expect(job!.state).toBe('done');
    expect(job!.task_id).toBe('task-1');
    expect(r.code).toBe(0);
    expect(submits).toEqual(['task-1']); // sent once
  });
});
