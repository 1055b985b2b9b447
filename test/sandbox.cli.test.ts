import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_HEADER, printedAdminToken } from './helpers/admin.js';

/** `genbatch sandbox` as a user runs it: the built CLI in a child process. */

const ROOT = join(import.meta.dirname, '..');
const OUT = join(ROOT, 'dist/cli/commands/sandbox.js');

function stale(): boolean {
  if (!existsSync(OUT)) return true;
  const built = statSync(OUT).mtimeMs;
  const dir = join(ROOT, 'src/sandbox');
  const sources = [join(ROOT, 'src/cli/commands/sandbox.ts'), join(ROOT, 'src/cli/main.ts'), ...readdirSync(dir, { recursive: true }).map(String).filter((f) => f.endsWith('.ts')).map((f) => join(dir, f))];
  return sources.some((f) => statSync(f).mtimeMs > built);
}

beforeAll(async () => {
  // `npm test` builds in pretest; a lone run builds here. Others' files may be mid-edit: tsc still emits.
  if (stale()) await new Promise<void>((r) => execFile(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', ROOT], () => r()));
  if (!existsSync(OUT)) throw new Error('dist/cli/commands/sandbox.js was not built');
}, 120_000);

describe('genbatch sandbox', () => {
  it('prints its URL and keys, serves, and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, [join(ROOT, 'bin/genbatch.js'), 'sandbox', '--port', '0', '--keys', 'alpha=50,beta', '--time-scale', '0.01', '--seed', '3'], { cwd: ROOT });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (c: Buffer) => {
        stdout += c.toString();
        const m = /listening on (http:\/\/\S+)/.exec(stdout);
        if (m?.[1] && stdout.includes('key: beta')) resolve(m[1]);
      });
      child.once('exit', (code) => reject(new Error(`exited ${String(code)}: ${stderr}`)));
    });
    expect(stdout).toContain('key: alpha\n');
    const a = await fetch(`${url}/api/user/balance`, { headers: { authorization: 'Bearer alpha' } });
    expect(await a.json()).toEqual({ code: 200, data: { balance: 50 } });
    const b = await fetch(`${url}/api/user/balance`, { headers: { authorization: 'Bearer beta' } });
    expect(await b.json()).toEqual({ code: 200, data: { balance: 10000 } });
    const code = await new Promise<number | null>((resolve) => {
      child.once('exit', (c) => resolve(c));
      child.kill('SIGTERM');
    });
    expect(code).toBe(0);
    expect(stderr).toContain('stopped (SIGTERM)');
  });

  it('generates and prints a key when none is given', async () => {
    const child = spawn(process.execPath, [join(ROOT, 'bin/genbatch.js'), 'sandbox', '--port', '0'], { cwd: ROOT });
    let stdout = '';
    const key = await new Promise<string>((resolve) => {
      child.stdout.on('data', (c: Buffer) => {
        stdout += c.toString();
        const m = /key: (\S+)\n/.exec(stdout);
        if (m?.[1]) resolve(m[1]);
      });
    });
    const url = /listening on (http:\/\/\S+)/.exec(stdout)?.[1] ?? '';
    const r = await fetch(`${url}/api/user/balance`, { headers: { authorization: `Bearer ${key}` } });
    expect(await r.json()).toEqual({ code: 200, data: { balance: 10000 } });
    await new Promise((resolve) => {
      child.once('exit', resolve);
      child.kill('SIGINT');
    });
  });

  it('refuses a bad --faults spec with exit 2', async () => {
    const r = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, [join(ROOT, 'bin/genbatch.js'), 'sandbox', '--port', '0', '--faults', 'submit:teapot=1'], { cwd: ROOT }, (err, _o, stderr) =>
        resolve({ code: err && typeof err.code === 'number' ? err.code : 0, stderr }),
      ),
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('teapot');
  });
});

describe('genbatch sandbox startup errors', () => {
  const run = (args: string[]) =>
    new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, [join(ROOT, 'bin/genbatch.js'), 'sandbox', ...args], { cwd: ROOT, timeout: 20_000 }, (err, _o, stderr) =>
        resolve({ code: err && typeof err.code === 'number' ? err.code : 0, stderr }),
      ),
    );

  it('answers exit 2 with a plain message for a busy port, a bad port and a bad host', async () => {
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
    const port = (busy.address() as AddressInfo).port;
    try {
      const inUse = await run(['--port', String(port)]);
      expect(inUse.code).toBe(2);
      expect(inUse.stderr).toContain('already in use');
      expect(inUse.stderr).not.toContain('internal error');
    } finally {
      busy.close();
    }
    const bad = await run(['--port', '99999']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--port expects an integer from 0 to 65535');
    const host = await run(['--port', '0', '--host', '999.1.1.1']);
    expect(host.code).toBe(2);
    expect(host.stderr).toContain('999.1.1.1');
    expect(host.stderr).not.toContain('internal error');
  });
});

describe('genbatch sandbox --faults', () => {
  it('injects the faults of its spec', async () => {
    const child = spawn(process.execPath, [join(ROOT, 'bin/genbatch.js'), 'sandbox', '--port', '0', '--keys', 'k=10', '--seed', '1', '--faults', 'balance:503=1,status:429=1'], { cwd: ROOT });
    let stdout = '';
    try {
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (c: Buffer) => {
          stdout += c.toString();
          const m = /listening on (http:\/\/\S+)/.exec(stdout);
          if (m?.[1] && stdout.includes('key: k') && printedAdminToken(stdout) !== null) resolve(m[1]);
        });
        child.once('exit', (code) => reject(new Error(`exited ${String(code)}`)));
      });
      const b = await fetch(`${url}/api/user/balance`, { headers: { authorization: 'Bearer k' } });
      expect(b.status).toBe(503);
      expect(await b.json()).toEqual({ code: 503, error: { message: 'service unavailable', type: 'service_error' } });
      const s = await fetch(`${url}/api/generate/status/abc`, { headers: { authorization: 'Bearer k' } });
      expect(s.status).toBe(429);
      expect(s.headers.get('retry-after')).toBe('1');
      expect(await s.json()).toEqual({ detail: 'rate limit exceeded, retry later' });
      const stats = (await (await fetch(`${url}/__sandbox/stats`, { headers: { [ADMIN_HEADER]: printedAdminToken(stdout) ?? '' } })).json()) as { faults_injected: Record<string, number> };
      expect(stats.faults_injected).toEqual({ 'balance:503': 1, 'status:429': 1 });
    } finally {
      await new Promise((resolve) => {
        child.once('exit', resolve);
        child.kill('SIGTERM');
      });
    }
  });
});
