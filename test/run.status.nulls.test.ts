import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, spawnCli } from './helpers/cli.js';
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
let server: Server;
let base = '';
let detailReads = 0;

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

beforeAll(async () => {
  ensureBuilt();
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const url = req.url ?? '/';
      if (url === '/api/user/balance') return json(res, 200, { code: 200, data: { balance: 1000 } });
      if (url.startsWith('/files/')) return void res.writeHead(200, { 'content-type': 'image/png', 'content-length': PNG.length }).end(PNG);
      if (url === '/api/generate/submit') return json(res, 200, { code: 200, data: { task_id: 't-1', status: 'not_started', created_time: '2026-01-01T00:00:00' } });
      if (url.startsWith('/api/generate/status/')) {
        detailReads++;
        const file = { file_url: `${base}/files/t-1.png`, file_type: 'image', label: null, format: null, content_type: null, file_name: null, file_size: null, metadata: null };
        return json(res, 200, { code: 200, data: { task_id: 't-1', status: 'finished', files: [file], created_time: '2026-01-01T00:00:00', progress: 100, error_message: null } });
      }
      json(res, 404, { detail: 'not found' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 60_000);
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  t.cleanup();
});

describe('File entries with null optional fields', () => {
  it('are read (the image is saved) instead of being polled for ever', async () => {
    const manifest = join(t.dir, 'pic.yaml');
    writeFileSync(manifest, ['jobs:', '  - id: pic', '    model: alpha-image-2', '    input:', '      prompt: "a quiet harbour"'].join('\n') + '\n');
    const out = join(t.dir, 'out');
    // Before the fix the run never ends: it is killed after 15 s.
    const child = spawnCli(['run', manifest, '--base-url', base, '--time-scale', '0.001', '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    child.stdout!.resume();
    child.stderr!.resume();
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    clearTimeout(timer);
    const [job] = readJobs(join(out, 'state.db'));
    expect(job!.state).toBe('done');
    expect(code).toBe(0);
    expect(readFileSync(join(out, 'pic', 'image-1.png')).equals(PNG)).toBe(true);
    expect(detailReads).toBeLessThan(5);
  }, 30_000);
});
