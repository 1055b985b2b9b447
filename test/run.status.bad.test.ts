import { writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A service whose status answers are never the contract's shape: the run gives up on that job after
 * 5 failed reads in a row (it stays `submitted` for the next run, exit 4) instead of polling it for
 * ever; a later run whose service answers properly finishes it. Before, the run never ended.
 */
const KEY = 'sk-status-bad-0123456789';
const t = tempDir('genbatch-status-bad-');
let server: Server;
let base = '';
let statusReads = 0;
let healthy = false;

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');

beforeAll(async () => {
  ensureBuilt();
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const url = req.url ?? '/';
      if (url === '/api/user/balance') return json(res, 200, { code: 200, data: { balance: 1000 } });
      if (url === '/api/generate/submit') return json(res, 200, { code: 200, data: { task_id: 't-1', status: 'not_started', created_time: '2026-01-01T00:00:00' } });
      if (url.startsWith('/files/')) return void res.writeHead(200, { 'content-type': 'image/png', 'content-length': PNG.length }).end(PNG);
      if (url.startsWith('/api/generate/status')) {
        statusReads++;
        if (!healthy) return json(res, 200, { code: 200, data: { task_id: 't-1', status: 'done-ish', files: 'none' } });
        return json(res, 200, { code: 200, data: { task_id: 't-1', status: 'finished', files: [{ file_url: `${base}/files/t-1.png`, file_type: 'image' }], created_time: '2026-01-01T00:00:00', progress: 100, error_message: null } });
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

function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawnCli(args, { GENBATCH_API_KEY: KEY });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += String(d)));
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  return new Promise((resolve) => child.on('close', (code) => (clearTimeout(timer), resolve({ code, stderr }))));
}

describe('status answers that are never the contract shape', () => {
  it('the job is left submitted after 5 failed reads (exit 4); the next run finishes it', async () => {
    const manifest = join(t.dir, 'pic.yaml');
    writeFileSync(manifest, ['jobs:', '  - id: pic', '    model: alpha-image-2', '    input:', '      prompt: "a quiet harbour"'].join('\n') + '\n');
    const out = join(t.dir, 'out');
    const args = ['run', manifest, '--base-url', base, '--time-scale', '0.001', '--out', out, '--yes'];
    const first = await run(args);
    expect(first.code, first.stderr).toBe(4);
    expect(statusReads).toBe(5);
    expect(first.stderr).toMatch(/job pic: status read failed 5 times in a row/);
    const [job] = readJobs(join(out, 'state.db'));
    expect(job!.state).toBe('submitted');
    expect(job!.last_error).toMatch(/^status read failed 5 times: /);
    healthy = true;
    const second = await run(args);
    expect(second.code, second.stderr).toBe(0);
    expect(readJobs(join(out, 'state.db'))[0]!.state).toBe('done');
  }, 40_000);
});
