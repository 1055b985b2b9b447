import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { BALANCE, bytes, json, startFakeService, submitted, type FakeService } from './helpers/fake-service.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A completion callback whose ended task carries file metadata nested 10,000 levels deep (issue 16
 * item 5, second adversarial pass). The status reader bounds nesting, but the callback receiver took
 * the task as it came: storing it (JSON.stringify) overflowed the stack and the run crashed
 * ("RangeError: Maximum call stack size exceeded", exit 1, the job left `submitted`). The callback
 * now gives no task, and the job is settled by a status read.
 */
const KEY = 'sk-nested-callback-0123456789';
const PNG = solidPng(8, 8, [30, 60, 90]);
const DEPTH = 10_000;
const t = tempDir('genbatch-cb-nested-');
let service: FakeService;
let base = '';
/** Tasks whose callback the runner has answered: their status reads say finished from then on. */
const called = new Set<string>();
let taskNo = 0;

function finished(id: string, metadata: string): string {
  return `{"code":200,"data":{"task_id":"${id}","status":"finished","files":[{"file_url":"${base}/files/${id}.png","file_type":"image","file_size":${PNG.length},"metadata":${metadata}}],"created_time":"2026-01-01T00:00:00","progress":100,"error_message":null}}`;
}

beforeAll(async () => {
  ensureBuilt();
  service = await startFakeService(async (req, body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url.startsWith('/files/')) return bytes(res, 'image/png', PNG);
    if (url.startsWith('/api/generate/status/')) {
      const id = decodeURIComponent(url.split('/').pop()!);
      if (!called.has(id)) return json(res, 200, { code: 200, data: { task_id: id, status: 'running', files: [], created_time: '2026-01-01T00:00:00', progress: 10 } });
      return res.writeHead(200, { 'content-type': 'application/json' }).end(finished(id, '{"note":"plain"}'));
    }
    if (url === '/api/generate/submit') {
      const id = `task-${++taskNo}`;
      json(res, 200, submitted(id));
      const cb = (JSON.parse(body) as { callback_url?: string }).callback_url;
      if (cb) {
        const deep = `${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}`;
        const r = await fetch(cb, { method: 'POST', headers: { 'content-type': 'application/json' }, body: finished(id, deep) });
        if (r.ok) called.add(id);
      }
      return;
    }
    json(res, 404, { detail: 'not found' });
  });
  base = service.base;
}, 60_000);
afterAll(async () => {
  await service?.close();
  t.cleanup();
});

describe('a completion callback nested 10,000 levels deep', () => {
  it('does not crash the run: the job is settled by a status read and done', async () => {
    const manifest = imageManifest(join(t.dir, 'deep.yaml'), 1, 'deep');
    const out = join(t.dir, 'out');
    const r = await runCli(['run', manifest, '--base-url', base, '--time-scale', '0.001', '--out', out, '--listen', '127.0.0.1:0', '--yes'], { GENBATCH_API_KEY: KEY }, undefined, 30_000);
    expect(r.stderr).not.toContain('Maximum call stack');
    expect(called.size).toBe(1);
    const [job] = readJobs(join(out, 'state.db'));
    expect(job!.state).toBe('done');
    expect(r.code).toBe(0);
  }, 60_000);
});
