import { networkInterfaces } from 'node:os';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox, type SandboxOptions } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';

/**
 * /__sandbox/* lists every key's tasks (with the callback URLs' tokens) and moves the clock and the
 * faults for every key: it needs the admin token; only the clock and the faults, which show no
 * secret, answer without it when the sandbox listens on loopback and the request comes from loopback.
 */

const open: Sandbox[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

async function sandbox(o: SandboxOptions): Promise<Sandbox> {
  const sb = await startSandbox({ keys: { k1: 1000 }, timeScale: 0.001, seed: 1, ...o });
  open.push(sb);
  return sb;
}

function port(sb: Sandbox): string {
  return new URL(sb.localUrl).port;
}

async function admin(base: string, path: string, token?: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const headers: Record<string, string> = {};
  if (token !== undefined) headers['x-sandbox-admin-token'] = token;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, { method: body === undefined ? 'GET' : 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

const external = Object.values(networkInterfaces())
  .flatMap((l) => l ?? [])
  .find((a) => a.family === 'IPv4' && !a.internal)?.address;

describe('sandbox admin endpoints', () => {
  it('on a loopback host, a loopback caller needs no token for the clock and the faults, which show no secret', async () => {
    const sb = await sandbox({ host: '127.0.0.1' });
    expect((await admin(sb.localUrl, '/__sandbox/clock')).status).toBe(200);
    expect((await admin(sb.localUrl, '/__sandbox/clock', undefined, { advance_s: 1 })).status).toBe(200);
    expect((await admin(sb.localUrl, '/__sandbox/faults', undefined, { endpoint: 'balance', steps: ['ok'] })).status).toBe(200);
  });

  it('on a loopback host, tasks and stats (callback URLs with their tokens, every key\'s counters) need the token even from loopback', async () => {
    const sb = await sandbox({ host: '127.0.0.1', allowLoopback: true });
    const secretUrl = 'http://127.0.0.1:9/hooks/a-callback-path-token-abcdef?job=j1&attempt=1';
    const sent = await fetch(`${sb.localUrl}/api/generate/submit`, {
      method: 'POST',
      headers: { authorization: 'Bearer k1', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'x' }, callback_url: secretUrl }),
    });
    expect(sent.status).toBe(200);
    for (const path of ['/__sandbox/tasks', '/__sandbox/stats', `/__sandbox/tasks?key=x`]) {
      const r = await admin(sb.localUrl, path);
      expect(r.status, path).toBe(401);
      expect(JSON.stringify(r.json), path).toContain('X-Sandbox-Admin-Token');
      expect(JSON.stringify(r.json), path).not.toContain('a-callback-path-token');
    }
    // What stays open on loopback shows no callback URL, token or key.
    for (const path of ['/__sandbox/clock']) {
      const r = await admin(sb.localUrl, path);
      expect(r.status).toBe(200);
      expect(JSON.stringify(r.json)).not.toMatch(/a-callback-path-token|k1|hooks/);
    }
    const listed = await admin(sb.localUrl, '/__sandbox/tasks', sb.adminToken);
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.json)).toContain('a-callback-path-token');
    expect((await admin(sb.localUrl, '/__sandbox/stats', sb.adminToken)).status).toBe(200);
  });

  it('on a loopback host, a loopback request addressed to another name (DNS rebinding through a browser) needs the token', async () => {
    const sb = await sandbox({ host: '127.0.0.1' });
    const { request } = await import('node:http');
    const get = (host: string, token?: string) =>
      new Promise<number>((resolve, reject) => {
        const headers: Record<string, string> = { host };
        if (token !== undefined) headers['x-sandbox-admin-token'] = token;
        request(`${sb.localUrl}/__sandbox/clock`, { headers }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
          .on('error', reject)
          .end();
      });
    expect(await get(`evil.example:${port(sb)}`)).toBe(401);
    expect(await get(`127.0.0.1.evil.example:${port(sb)}`)).toBe(401);
    expect(await get(`evil.example:${port(sb)}`, sb.adminToken)).toBe(200);
    expect(await get(`localhost:${port(sb)}`)).toBe(200);
    expect(await get(`[::1]:${port(sb)}`)).toBe(200);
  });

  it('on a wildcard host, every admin endpoint refuses a request without the token (401), even from loopback, and changes nothing', async () => {
    const sb = await sandbox({ host: '0.0.0.0' });
    const base = `http://127.0.0.1:${port(sb)}`;
    const before = sb.clock.now();
    for (const path of ['/__sandbox/stats', '/__sandbox/tasks', '/__sandbox/clock']) {
      const r = await admin(base, path);
      expect(r.status, path).toBe(401);
      expect(JSON.stringify(r.json)).toContain('X-Sandbox-Admin-Token');
    }
    expect((await admin(base, '/__sandbox/clock', undefined, { advance_s: 90000 })).status).toBe(401);
    expect((await admin(base, '/__sandbox/faults', undefined, { endpoint: 'submit', steps: ['500'] })).status).toBe(401);
    expect((await admin(base, '/__sandbox/clock', 'x'.repeat(24), { advance_s: 90000 })).status).toBe(401);
    expect(sb.clock.now() - before).toBeLessThan(60_000);
    // The service's own endpoints are not affected.
    const bal = await fetch(`${base}/api/user/balance`, { headers: { authorization: 'Bearer k1' } });
    expect(bal.status).toBe(200);
  });

  it('with the token, the admin endpoints answer on any host', async () => {
    const sb = await sandbox({ host: '0.0.0.0', adminToken: 'a-chosen-admin-token-1234' });
    expect(sb.adminToken).toBe('a-chosen-admin-token-1234');
    const base = `http://127.0.0.1:${port(sb)}`;
    expect((await admin(base, '/__sandbox/stats', sb.adminToken)).status).toBe(200);
    const moved = await admin(base, '/__sandbox/clock', sb.adminToken, { advance_s: 10 });
    expect(moved.status).toBe(200);
    expect(moved.json.advanced_s).toBe(10);
  });

  it.skipIf(external === undefined)('a caller from a non-loopback address needs the token', async () => {
    const sb = await sandbox({ host: '0.0.0.0' });
    const base = `http://${external}:${port(sb)}`;
    expect((await admin(base, '/__sandbox/tasks')).status).toBe(401);
    expect((await admin(base, '/__sandbox/tasks', sb.adminToken)).status).toBe(200);
  });

  it('a generated token is random and long', async () => {
    const a = await sandbox({});
    const b = await sandbox({});
    expect(a.adminToken).not.toBe(b.adminToken);
    expect(a.adminToken.length).toBeGreaterThanOrEqual(20);
  });
});

describe('genbatch sandbox --admin-token', () => {
  beforeAll(() => ensureBuilt(), 180_000);

  it('refuses a short token (exit 2, naming the flag)', async () => {
    const r = await runCli(['sandbox', '--port', '0', '--admin-token', 'short']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--admin-token must be 16 to 256 printable ASCII characters');
  });
});
