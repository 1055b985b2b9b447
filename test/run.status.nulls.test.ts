import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { BALANCE, bytes, json, startFakeService, submitted, type FakeService } from './helpers/fake-service.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A File entry whose optional fields are null (label, format, content_type, file_name,
 * file_size, metadata: what a service that serialises its absent optionals as null sends):
 * the run reads it, saves the file and ends. Before, the client's status schema refused
 * the whole answer, and the job was polled for ever (the run never ended).
 */
const KEY = 'sk-status-nulls-0123456789';
const PNG = solidPng(8, 8, [1, 2, 3]);
const t = tempDir('genbatch-status-nulls-');
let service: FakeService;
let base = '';
let detailReads = 0;

beforeAll(async () => {
  ensureBuilt();
  service = await startFakeService((req, _body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url.startsWith('/files/')) return bytes(res, 'image/png', PNG);
    if (url === '/api/generate/submit') return json(res, 200, submitted('t-1'));
    if (url.startsWith('/api/generate/status/')) {
      detailReads++;
      const file = { file_url: `${base}/files/t-1.png`, file_type: 'image', label: null, format: null, content_type: null, file_name: null, file_size: null, metadata: null };
      return json(res, 200, { code: 200, data: { task_id: 't-1', status: 'finished', files: [file], created_time: '2026-01-01T00:00:00', progress: 100, error_message: null } });
    }
    json(res, 404, { detail: 'not found' });
  });
  base = service.base;
}, 60_000);
afterAll(async () => {
  await service?.close();
  t.cleanup();
});

describe('File entries with null optional fields', () => {
  it('are read (the image is saved) instead of being polled for ever', async () => {
    const manifest = join(t.dir, 'pic.yaml');
    writeFileSync(manifest, ['jobs:', '  - id: pic', '    model: alpha-image-2', '    input:', '      prompt: "a quiet harbour"'].join('\n') + '\n');
    const out = join(t.dir, 'out');
    // Before the fix the run never ends: it is killed after 15 s.
    const { code } = await runCli(['run', manifest, '--base-url', base, '--time-scale', '0.001', '--out', out, '--yes'], { GENBATCH_API_KEY: KEY }, undefined, 15_000);
    const [job] = readJobs(join(out, 'state.db'));
    expect(job!.state).toBe('done');
    expect(code).toBe(0);
    expect(readFileSync(join(out, 'pic', 'image-1.png')).equals(PNG)).toBe(true);
    expect(detailReads).toBeLessThan(5);
  }, 30_000);
});
