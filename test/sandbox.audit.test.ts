import { readFileSync } from 'node:fs';
import { createServer, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseFaults, startSandbox, type Sandbox, type SandboxOptions } from '../src/sandbox/index.js';

/** Gaps found by the sandbox audit (issue 3), one describe per gap. */

const FLASH = 'vendora/dream-v5.0-flash/text-to-image';
const open: Sandbox[] = [];

async function sandbox(o: SandboxOptions = {}): Promise<Sandbox> {
  const sb = await startSandbox({ keys: { k1: 1000, k2: 1000 }, timeScale: 0.001, seed: 7, ...o });
  open.push(sb);
  return sb;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(sb: Sandbox, method: string, path: string, key: string | null, body?: unknown, headers: Record<string, string> = {}) {
  const h: Record<string, string> = { ...headers };
  if (key !== null) h.authorization = `Bearer ${key}`;
  if (body !== undefined && h['content-type'] === undefined) h['content-type'] = 'application/json';
  const res = await fetch(sb.url + path, { method, headers: h, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json: Json = {};
  try {
    json = JSON.parse(text) as Json;
  } catch {
    json = { text };
  }
  return { status: res.status, headers: res.headers, body: json };
}

describe('clock bounds', () => {
  it('refuses an advance past 100 years, negative or non-numeric, and keeps working', async () => {
    const sb = await sandbox();
    for (const advance_s of [1e13, -5, 'soon', null]) {
      const r = await call(sb, 'POST', '/__sandbox/clock', null, { advance_s });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(/^advance_s: /);
    }
    const big = await call(sb, 'POST', '/__sandbox/clock', null, { advance_s: 1e13 });
    expect(big.body.error.message).toContain('100 years');
    expect(() => sb.clock.advance(1e13)).toThrow(/100 years/);
    expect(() => sb.clock.advance(Number.POSITIVE_INFINITY)).toThrow(RangeError);
    const ok = await call(sb, 'POST', '/__sandbox/clock', null, { advance_s: 50 * 365 * 24 * 3600 });
    expect(ok.status).toBe(200);
    const s = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: FLASH, input: { prompt: 'a fox' } });
    expect(s.status).toBe(200);
    expect(s.body.data.created_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$/);
    expect((await call(sb, 'GET', '/__sandbox/clock', null)).status).toBe(200);
  });
});

const PNG_BYTES = readFileSync(join(import.meta.dirname, 'fixtures/manifest/ref.png'));
const GIF_BYTES = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

const upload = (sb: Sandbox, key: string, bytes: Buffer, fields: Record<string, string> = {}) =>
  call(sb, 'POST', '/api/common/upload/base64', key, { base64_data: bytes.toString('base64'), ...fields });

describe('upload names', () => {
  it("never replaces another key's upload: 409 conflict_error, and the first file stays", async () => {
    const sb = await sandbox();
    const a = await upload(sb, 'k1', PNG_BYTES, { file_name: 'ref.png', upload_path: 'shared' });
    expect(a.status).toBe(200);
    const b = await upload(sb, 'k2', PNG_BYTES, { file_name: 'ref.png', upload_path: 'shared' });
    expect(b.status).toBe(409);
    expect(b.body.error).toEqual({ type: 'conflict_error', message: expect.stringContaining('temp/shared/ref.png is already used by an upload of another API key') });
    const again = await upload(sb, 'k1', PNG_BYTES, { file_name: 'ref.png', upload_path: 'shared' });
    expect(again.status).toBe(200);
    const served = await fetch(a.body.data.file_url as string);
    expect(Buffer.from(await served.arrayBuffer()).equals(PNG_BYTES)).toBe(true);
    sb.clock.advance(73 * 3600);
    expect((await upload(sb, 'k2', PNG_BYTES, { file_name: 'ref.png', upload_path: 'shared' })).status).toBe(200);
  });

  it('corrects a file_name extension to the detected type', async () => {
    const sb = await sandbox();
    const g = await upload(sb, 'k1', GIF_BYTES, { file_name: 'ref.png' });
    expect(g.status).toBe(200);
    expect(g.body.data).toMatchObject({ file_name: 'ref.gif', content_type: 'image/gif', file_url: `${sb.url}/temp/ref.gif` });
    const res = await fetch(g.body.data.file_url as string);
    expect(res.headers.get('content-type')).toBe('image/gif');
    expect((await fetch(`${sb.url}/temp/ref.png`)).status).toBe(404);
    const p = await upload(sb, 'k1', PNG_BYTES, { file_name: 'photo.PNG' });
    expect(p.body.data.file_name).toBe('photo.PNG');
  });
});

describe('public URL', () => {
  it('builds file and upload URLs from publicUrl', async () => {
    const sb = await sandbox({ publicUrl: 'https://sandbox.example.com:8443/' });
    expect(sb.url).toBe('https://sandbox.example.com:8443');
    expect(sb.localUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const local = { ...sb, url: sb.localUrl };
    const s = await call(local, 'POST', '/api/generate/submit', 'k1', { model: FLASH, input: { prompt: 'a fox' } });
    sb.clock.advance(120);
    const st = await call(local, 'GET', `/api/generate/status/${s.body.data.task_id}`, 'k1');
    expect(st.body.data.files[0].file_url).toMatch(/^https:\/\/sandbox\.example\.com:8443\/files\//);
    const u = await upload(local, 'k1', PNG_BYTES, { file_name: 'p.png' });
    expect(u.body.data.file_url).toBe('https://sandbox.example.com:8443/temp/p.png');
    await expect(startSandbox({ publicUrl: 'ftp://x' })).rejects.toThrow(/http or https/);
    await expect(startSandbox({ publicUrl: 'https://x.example/prefix' })).rejects.toThrow(/origin/);
  });

  it('with a wildcard host and no publicUrl, uses an external address of this machine', async () => {
    const sb = await sandbox({ host: '0.0.0.0' });
    const port = new URL(sb.localUrl).port;
    expect(sb.localUrl).toBe(`http://127.0.0.1:${port}`);
    const external = Object.values(networkInterfaces()).flatMap((l) => l ?? []).find((a) => !a.internal && a.family === 'IPv4');
    expect(sb.url).toBe(`http://${external?.address ?? '127.0.0.1'}:${port}`);
    const u = await upload({ ...sb, url: sb.localUrl }, 'k1', PNG_BYTES, { file_name: 'w.png' });
    expect(u.body.data.file_url).toBe(`${sb.url}/temp/w.png`);
    expect((await fetch(u.body.data.file_url as string)).status).toBe(200);
  });
});

/** A GET with huge headers, over a raw socket-level request (fetch would refuse nothing, but keep it plain). */
function bigHeaders(sb: Sandbox, path: string): Promise<{ status: number; body: Json }> {
  const u = new URL(sb.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, headers: { authorization: 'Bearer k1', 'x-big': 'a'.repeat(20_000) } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Json }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('framework errors in the service shape', () => {
  it('answers bad percent-encoding, long, unicode ids and huge headers as {detail} or {code, error}', async () => {
    const sb = await sandbox();
    const bad = await call(sb, 'GET', '/api/generate/status/%ff', 'k1');
    expect(bad.status).toBe(404);
    expect(bad.body).toEqual({ detail: expect.stringContaining('not found') });
    const file = await call(sb, 'GET', '/files/%ff/x.png', null);
    expect(file.status).toBe(400);
    expect(file.body).toEqual({ code: 400, error: { type: 'validation_error', message: expect.stringContaining('percent-encoded') } });
    for (const n of [150, 600, 5000]) {
      const long = await call(sb, 'GET', `/api/generate/status/${'a'.repeat(n)}`, 'k1');
      expect(long.status).toBe(404);
      expect(Object.keys(long.body)).toEqual(['detail']);
      expect(long.body.detail.length).toBeLessThan(140);
    }
    const uni = await call(sb, 'GET', `/api/generate/status/${encodeURIComponent('задача✓')}`, 'k1');
    expect(uni).toMatchObject({ status: 404, body: { detail: 'task задача✓ not found' } });
    const d = await call(sb, 'GET', `/api/generate/detail/music?task_id=${'b'.repeat(3000)}`, 'k1');
    expect(d.status).toBe(404);
    expect(d.body.detail.length).toBeLessThan(140);
    expect(await bigHeaders(sb, '/api/generate/status/abc')).toEqual({ status: 431, body: { detail: expect.stringContaining('headers') } });
    expect(await bigHeaders(sb, '/api/user/balance')).toEqual({ status: 431, body: { code: 431, error: { type: 'validation_error', message: expect.stringContaining('16 KiB') } } });
    expect((await call(sb, 'GET', '/api/user/balance', 'k1')).status).toBe(200);
  });
});

describe('hidden loopback addresses', () => {
  it('upload/url and submit refuse IPv6 forms of loopback', async () => {
    const sb = await sandbox();
    for (const host of ['[::127.0.0.1]', '[::7f00:1]', '[64:ff9b::7f00:1]', '[2002:7f00:1::]']) {
      const u = await call(sb, 'POST', '/api/common/upload/url', 'k1', { file_url: `http://${host}:9/x.png` });
      expect(u.status, host).toBe(400);
      expect(u.body.error.message, host).toContain('private');
      const s = await call(sb, 'POST', '/api/generate/submit', 'k2', { model: FLASH, input: { prompt: 'a fox' }, callback_url: `https://${host}/cb` });
      expect(s.status, host).toBe(400);
      expect(s.body.error.message, host).toMatch(/^callback_url: /);
      sb.clock.advance(61);
    }
  });
});

describe('auth before the body', () => {
  it('answers 401 to a missing or unknown key whatever the body', async () => {
    const sb = await sandbox();
    for (const key of [null, 'nope']) {
      const bad = await call(sb, 'POST', '/api/generate/submit', key, '{not json');
      expect(bad.status).toBe(401);
      expect(bad.body.error.type).toBe('authentication_error');
      const noType = await call(sb, 'POST', '/api/generate/submit', key, 'x', { 'content-type': 'application/x-weird' });
      expect(noType.status).toBe(401);
      const up = await call(sb, 'POST', '/api/common/upload/base64', key, '{not json');
      expect(up.status).toBe(401);
      const stream = await call(sb, 'POST', '/api/common/upload/stream', key, '--x\r\n', { 'content-type': 'multipart/form-data; boundary=zzz' });
      expect(stream.status).toBe(401);
    }
    const lite = await call(sb, 'POST', '/api/generate/submit', null, { model: 'dream-5.0-lite', input: { prompt: 'p' } });
    expect(lite).toMatchObject({ status: 401, body: { detail: expect.stringContaining('missing API key') } });
    expect(sb.stats().uploads.refused).toBe(4);
    const ok = await call(sb, 'POST', '/api/generate/submit', 'k1', '{not json');
    expect(ok.status).toBe(400);
  });
});

describe('scripted faults follow the --faults rules', () => {
  it('refuses a kind that cannot happen on the endpoint, as parseFaults does', async () => {
    const sb = await sandbox();
    const bad = await call(sb, 'POST', '/__sandbox/faults', null, { endpoint: 'submit', steps: ['truncate'] });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('truncate cannot happen on submit');
    expect((await call(sb, 'POST', '/__sandbox/faults', null, { endpoint: 'status', steps: ['500-after'] })).status).toBe(400);
    expect(() => sb.script('balance', ['drop-after'])).toThrow(/cannot happen on balance/);
    expect(() => parseFaults('submit:truncate=0.1')).toThrow(/cannot happen on submit/);
    expect((await call(sb, 'POST', '/__sandbox/faults', null, { endpoint: 'file', steps: ['truncate'] })).status).toBe(200);
    expect((await call(sb, 'POST', '/__sandbox/faults', null, { endpoint: '*', steps: ['truncate'] })).status).toBe(200);
  });
});

describe('music detail query', () => {
  it('refuses a repeated task_id as not a single value', async () => {
    const sb = await sandbox();
    const r = await call(sb, 'GET', '/api/generate/detail/music?task_id=a&task_id=b', 'k1');
    expect(r).toMatchObject({ status: 400, body: { detail: 'task_id: must be a single value (got 2)' } });
    expect((await call(sb, 'GET', '/api/generate/detail/music?task_id=a&task_id=b', null)).status).toBe(401);
  });
});

describe('prototype keys in a body', () => {
  it('names a __proto__ or constructor.prototype field instead of calling the JSON invalid', async () => {
    const sb = await sandbox();
    const a = await call(sb, 'POST', '/api/generate/submit', 'k1', `{"model":"${FLASH}","input":{"prompt":"p","__proto__":{"polluted":1}}}`);
    expect(a).toMatchObject({ status: 400, body: { error: { type: 'validation_error', message: expect.stringMatching(/^input\.__proto__: this field name is not allowed/) } } });
    const b = await call(sb, 'POST', '/api/generate/submit', 'k1', `{"model":"${FLASH}","input":{"prompt":"p","refs":[{"constructor":{"prototype":{"x":1}}}]}}`);
    expect(b.body.error.message).toMatch(/^input\.refs\[0\]\.constructor\.prototype: /);
    const lite = await call(sb, 'POST', '/api/generate/submit', 'k1', '{"model":"dream-5.0-lite","input":{"__proto__":{}}}');
    expect(lite).toMatchObject({ status: 400, body: { detail: expect.stringContaining('input.__proto__') } });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const c = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: FLASH, input: { prompt: 'a constructor of ships' } });
    expect(c.status).toBe(200);
  });
});

describe('image format without output_format', () => {
  it('is drawn once per task: every file of an n-image task has the same format', async () => {
    const sb = await sandbox({ keys: { k1: 100_000, k2: 10 } });
    const formats = new Set<string>();
    for (let t = 0; t < 6; t++) {
      const s = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: 'dream-5.0-lite', input: { prompt: `harbour ${t}`, n: 6 } });
      expect(s.status).toBe(200);
      sb.clock.advance(120);
      const st = await call(sb, 'GET', `/api/generate/status/${s.body.data.task_id}`, 'k1');
      const files = st.body.data.files as Array<{ format: string }>;
      expect(files).toHaveLength(6);
      const per = new Set(files.map((f) => f.format));
      expect(per.size).toBe(1);
      formats.add([...per][0] ?? '');
    }
    expect(formats.size).toBe(2);
  });
});

describe('submit body limit', () => {
  it('answers 413 content_too_long_error above 1 MiB, naming the limit', async () => {
    const sb = await sandbox();
    const big = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: FLASH, input: { prompt: 'p', filler: 'x'.repeat(1024 * 1024) } });
    expect(big).toMatchObject({ status: 413, body: { error: { type: 'content_too_long_error', message: 'body: the request body is larger than the limit of 1048576 bytes' } } });
    const nearly = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: FLASH, input: { prompt: 'x'.repeat(900 * 1024) } });
    expect(nearly.status).toBe(400);
    expect(nearly.body.error.type).toBe('content_too_long_error');
  });
});

describe('upload rate limit and time scale', () => {
  it('scales the window and its Retry-After by timeScale (0.05: about 3 s)', async () => {
    const sb = await sandbox({ timeScale: 0.05 });
    for (let i = 0; i < 5; i++) expect((await upload(sb, 'k1', PNG_BYTES)).status).toBe(200);
    const sixth = await upload(sb, 'k1', PNG_BYTES);
    expect(sixth.status).toBe(429);
    expect(Number(sixth.headers.get('retry-after'))).toBe(3);
    sb.clock.advance(3);
    expect((await upload(sb, 'k1', PNG_BYTES)).status).toBe(200);
  });

  it('has no upload limit at time scale 0', async () => {
    const sb = await sandbox({ timeScale: 0 });
    for (let i = 0; i < 8; i++) expect((await upload(sb, 'k1', PNG_BYTES)).status).toBe(200);
  });
});

/** A local HTTP server answering each path with a handler. */
async function remote(routes: Record<string, (res: ServerResponse, port: number) => void>): Promise<{ base: string; hits: string[]; close(): void }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(req.url ?? '');
    const h = routes[req.url ?? ''];
    if (h) h(res, (server.address() as AddressInfo).port);
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits, close: () => server.close() };
}

describe('upload/url redirects', () => {
  it('refuses a redirect to a private host and more than 3 redirects', async () => {
    const r = await remote({
      '/to-private': (res) => res.writeHead(302, { location: 'http://10.0.0.1/x.png' }).end(),
      '/to-hidden': (res) => res.writeHead(302, { location: 'http://[::ffff:a00:1]/x.png' }).end(),
      '/r1': (res) => res.writeHead(302, { location: '/r2' }).end(),
      '/r2': (res) => res.writeHead(302, { location: '/r3' }).end(),
      '/r3': (res) => res.writeHead(302, { location: '/r4' }).end(),
      '/r4': (res) => res.writeHead(302, { location: '/png' }).end(),
      '/s1': (res) => res.writeHead(301, { location: '/png' }).end(),
      '/png': (res) => res.writeHead(200, { 'content-type': 'image/png' }).end(PNG_BYTES),
    });
    try {
      const sb = await sandbox({ allowLoopback: true, keys: { k1: 1, k2: 1 } });
      const priv = await call(sb, 'POST', '/api/common/upload/url', 'k1', { file_url: `${r.base}/to-private` });
      expect(priv).toMatchObject({ status: 400, body: { error: { type: 'validation_error', message: expect.stringContaining('10.0.0.1 is a private') } } });
      const hidden = await call(sb, 'POST', '/api/common/upload/url', 'k1', { file_url: `${r.base}/to-hidden` });
      expect(hidden.status).toBe(400);
      const many = await call(sb, 'POST', '/api/common/upload/url', 'k1', { file_url: `${r.base}/r1` });
      expect(many).toMatchObject({ status: 400, body: { error: { message: expect.stringContaining('more than 3 redirects') } } });
      expect(r.hits).not.toContain('/png');
      const one = await call(sb, 'POST', '/api/common/upload/url', 'k2', { file_url: `${r.base}/s1` });
      expect(one.status).toBe(200);
    } finally {
      r.close();
    }
  });
});

describe('submit content types', () => {
  it('answers 415 without a content type or with a non-JSON one, 400 for malformed JSON', async () => {
    const sb = await sandbox();
    const u = new URL(sb.url);
    const none = await new Promise<{ status: number; body: Json }>((resolve, reject) => {
      const req = request({ host: u.hostname, port: u.port, path: '/api/generate/submit', method: 'POST', headers: { authorization: 'Bearer k1', 'content-length': '2' } }, (res) => {
        let t = '';
        res.on('data', (c: Buffer) => (t += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(t) as Json }));
      });
      req.on('error', reject);
      req.end('{}');
    });
    expect(none).toMatchObject({ status: 415, body: { error: { message: expect.stringContaining('(none)') } } });
    const xml = await call(sb, 'POST', '/api/generate/submit', 'k1', '<a/>', { 'content-type': 'application/xml' });
    expect(xml).toMatchObject({ status: 415, body: { error: { message: expect.stringContaining('application/xml') } } });
    const bad = await call(sb, 'POST', '/api/generate/submit', 'k1', '{"model":');
    expect(bad).toMatchObject({ status: 400, body: { error: { type: 'validation_error', message: expect.stringContaining('body: ') } } });
  });
});
