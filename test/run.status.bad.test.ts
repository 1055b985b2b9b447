import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { BALANCE, bytes, json, startFakeService, submitted, type FakeService } from './helpers/fake-service.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A service whose status answers are never the contract's shape: the run gives up on that job after
 * 5 failed reads in a row (it stays `submitted` for the next run, exit 4) instead of polling it for
 * ever; a later run whose service answers properly finishes it. Before, the run never ended.
 */
const KEY = 'sk-status-bad-0123456789';
const t = tempDir('genbatch-status-bad-');
let service: FakeService;
let base = '';
let statusReads = 0;
let healthy = false;
const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');

beforeAll(async () => {
  ensureBuilt();
  service = await startFakeService((req, _body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url === '/api/generate/submit') return json(res, 200, submitted('t-1'));
    if (url.startsWith('/files/')) return bytes(res, 'image/png', PNG);
    if (url.startsWith('/api/generate/status')) {
      statusReads++;
      if (!healthy) return json(res, 200, { code: 200, data: { task_id: 't-1', status: 'done-ish', files: 'none' } });
      return json(res, 200, { code: 200, data: { task_id: 't-1', status: 'finished', files: [{ file_url: `${base}/files/t-1.png`, file_type: 'image' }], created_time: '2026-01-01T00:00:00', progress: 100, error_message: null } });
    }
    json(res, 404, { detail: 'not found' });
  });
  base = service.base;
}, 60_000);
afterAll(async () => {
  await service?.close();
  t.cleanup();
});

describe('status answers that are never the service shape', () => {
  it('the job is left submitted after 5 failed reads (exit 7: work left for the next run); the next run finishes it', async () => {
    const manifest = join(t.dir, 'pic.yaml');
    writeFileSync(manifest, ['jobs:', '  - id: pic', '    model: alpha-image-2', '    input:', '      prompt: "a quiet harbour"'].join('\n') + '\n');
    const out = join(t.dir, 'out');
    const args = ['run', manifest, '--base-url', base, '--time-scale', '0.001', '--out', out, '--yes'];
    const first = await runCli(args, { GENBATCH_API_KEY: KEY }, undefined, 15_000);
    expect(first.code, first.stderr).toBe(7);
    expect(statusReads).toBe(5);
    expect(first.stderr).toMatch(/job pic: status read failed 5 times in a row/);
    const [job] = readJobs(join(out, 'state.db'));
    expect(job!.state).toBe('submitted');
    expect(job!.last_error).toMatch(/^status read failed 5 times: /);
    healthy = true;
    const second = await runCli(args, { GENBATCH_API_KEY: KEY }, undefined, 15_000);
    expect(second.code, second.stderr).toBe(0);
    expect(readJobs(join(out, 'state.db'))[0]!.state).toBe('done');
  }, 40_000);
});
