import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox, type SandboxOptions } from '../src/sandbox/index.js';
import { jpeg, png } from '../src/sandbox/media/index.js';

const PNG = png(16, 12, 1);
const JPEG = jpeg(16, 16, 2);
const GIF = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
const WEBP = Buffer.from('UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==', 'base64');
const PDF = Buffer.from('%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n', 'latin1');

const open: Sandbox[] = [];
const servers: Server[] = [];

async function sandbox(o: SandboxOptions = {}): Promise<Sandbox> {
  const sb = await startSandbox({ keys: { k1: 1000, k2: 1000 }, timeScale: 0.01, seed: 5, ...o });
  open.push(sb);
  return sb;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
interface Answer {
  status: number;
  headers: Headers;
  body: Json;
}

/** POST to an upload endpoint. By default the clock first moves a minute on, so the rate limit stays out of the way. */
async function post(sb: Sandbox, endpoint: 'base64' | 'url' | 'stream', body: Json | FormData, o: { key?: string; fresh?: boolean } = {}): Promise<Answer> {
  if (o.fresh !== false) sb.clock.advance(60);
  const headers: Record<string, string> = { authorization: `Bearer ${o.key ?? 'k1'}` };
  let payload: BodyInit;
  if (body instanceof FormData) payload = body;
  else {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const res = await fetch(`${sb.url}/api/common/upload/${endpoint}`, { method: 'POST', headers, body: payload });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Json };
}

function form(file: Buffer | null, fields: Record<string, string> = {}, fileField = 'file'): FormData {
  const f = new FormData();
  if (file) f.set(fileField, new Blob([new Uint8Array(file)]), 'local-name.bin');
  for (const [k, v] of Object.entries(fields)) f.set(k, v);
  return f;
}

async function download(url: string) {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get('content-type'), bytes: Buffer.from(await res.arrayBuffer()) };
}

function refused(a: Answer, status: number, type: string, message: RegExp | string) {
  expect(a.status).toBe(status);
  expect(a.body).toEqual({ code: status, error: { type, message: typeof message === 'string' ? expect.stringContaining(message) : expect.stringMatching(message) } });
}

async function fileServer(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  return `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
}

describe('upload/stream', () => {
  it('stores a PNG under temp/<upload_path>/ and serves the same bytes back', async () => {
    const sb = await sandbox();
    const a = await post(sb, 'stream', form(PNG, { upload_path: 'refs/2026', file_name: 'cat.png' }));
    expect(a.status).toBe(200);
    expect(a.body.code).toBe(200);
    const d = a.body.data;
    expect(d).toMatchObject({ file_name: 'cat.png', file_size: PNG.length, content_type: 'image/png', upload_path: 'temp/refs/2026', expires_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$/) });
    expect(d.file_url).toBe(`${sb.url}/temp/refs/2026/cat.png`);
    expect(d.download_url).toBe(d.file_url);
    const got = await download(d.file_url);
    expect(got).toMatchObject({ status: 200, type: 'image/png' });
    expect(got.bytes.equals(PNG)).toBe(true);
  });

  it('accepts uploadPath and fileName, generates {timestamp}_{random}_{extension} when no name is given', async () => {
    const sb = await sandbox();
    const a = await post(sb, 'stream', form(JPEG, { uploadPath: 'x', fileName: 'photo' }));
    expect(a.body.data).toMatchObject({ file_name: 'photo.jpg', upload_path: 'temp/x', content_type: 'image/jpeg' });
    const b = await post(sb, 'stream', form(GIF));
    expect(b.body.data.file_name).toMatch(/^\d{13}_[0-9a-f]{8}_gif$/);
    expect(b.body.data.upload_path).toBe('temp');
    const c = await post(sb, 'stream', form(GIF));
    expect(c.body.data.file_name).not.toBe(b.body.data.file_name);
    expect((await download(b.body.data.file_url as string)).bytes.equals(GIF)).toBe(true);
  });

  it('answers 422 without a file, 400 for two files, a non-image or an empty file', async () => {
    const sb = await sandbox();
    refused(await post(sb, 'stream', form(null, { upload_path: 'a' })), 422, 'validation_error', 'file: is required');
    refused(await post(sb, 'stream', form(PNG, {}, 'image')), 422, 'validation_error', 'file: is required');
    refused(await post(sb, 'stream', { file: 'not multipart' }), 422, 'validation_error', 'file: is required');
    const two = form(PNG);
    two.append('file', new Blob([new Uint8Array(JPEG)]), 'b.jpg');
    refused(await post(sb, 'stream', two), 400, 'validation_error', 'one image per request');
    refused(await post(sb, 'stream', form(PDF)), 400, 'file_format_error', 'unsupported file type application/pdf');
    refused(await post(sb, 'stream', form(Buffer.from('hello world'))), 400, 'file_format_error', 'not a recognisable image');
    refused(await post(sb, 'stream', form(Buffer.alloc(0))), 400, 'file_format_error', 'empty');
    refused(await post(sb, 'stream', form(PNG.subarray(0, PNG.length - 20))), 400, 'file_format_error', 'truncated or corrupted');
    const big = Buffer.concat([PNG, Buffer.alloc(21 * 1024 * 1024)]);
    refused(await post(sb, 'stream', form(big)), 413, 'content_too_long_error', 'larger than the limit');
    sb.clock.advance(60);
    const broken = await fetch(`${sb.url}/api/common/upload/stream`, {
      method: 'POST',
      headers: { authorization: 'Bearer k1', 'content-type': 'multipart/form-data; boundary=XYZ' },
      body: '--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n\r\nabc',
    });
    expect(broken.status).toBe(400);
    expect(((await broken.json()) as Json).error.type).toBe('validation_error');
  });

  it('keeps names and paths inside temp/: a traversing name is sanitised, a traversing path refused', async () => {
    const sb = await sandbox();
    const a = await post(sb, 'stream', form(PNG, { file_name: '../../etc/pass wd.png' }));
    expect(a.body.data).toMatchObject({ file_name: 'pass_wd.png', file_url: `${sb.url}/temp/pass_wd.png` });
    refused(await post(sb, 'stream', form(PNG, { upload_path: '../outside' })), 400, 'validation_error', 'upload_path: must be a relative folder');
    refused(await post(sb, 'base64', { base64_data: PNG.toString('base64'), upload_path: 'a/../../b' }), 400, 'validation_error', 'upload_path');
  });
});

describe('upload/base64', () => {
  it('takes pure Base64 or a Data URL, in base64_data or the common alternative fields', async () => {
    const sb = await sandbox();
    const a = await post(sb, 'base64', { base64_data: JPEG.toString('base64'), file_name: 'a.jpg', upload_path: 'b64' });
    expect(a.status).toBe(200);
    expect(a.body.data).toMatchObject({ file_name: 'a.jpg', content_type: 'image/jpeg', file_size: JPEG.length, upload_path: 'temp/b64' });
    expect((await download(a.body.data.file_url as string)).bytes.equals(JPEG)).toBe(true);
    const b = await post(sb, 'base64', { base64_data: `data:image/gif;base64,${GIF.toString('base64')}` });
    expect(b.body.data.content_type).toBe('image/gif');
    for (const field of ['base64', 'data', 'file', 'image']) {
      const c = await post(sb, 'base64', { [field]: `data:image/webp;base64,${WEBP.toString('base64')}` });
      expect(c.status, field).toBe(200);
      expect(c.body.data.content_type).toBe('image/webp');
    }
    const d = await post(sb, 'base64', { base64_data: PNG.toString('base64') });
    expect(d.body.data).toMatchObject({ content_type: 'image/png', file_name: expect.stringMatching(/_png$/) });
  });

  it('refuses every malformed, undecodable, unsupported, empty or corrupted input', async () => {
    const sb = await sandbox();
    const b64 = PNG.toString('base64');
    refused(await post(sb, 'base64', { upload_path: 'a' }), 400, 'validation_error', 'base64_data: is required');
    refused(await post(sb, 'base64', { base64_data: 42 }), 400, 'validation_error', 'base64_data: must be a string');
    refused(await post(sb, 'base64', { base64_data: [b64, b64] }), 400, 'validation_error', 'one image per request');
    refused(await post(sb, 'base64', { base64_data: 'abc$%^&*' }), 400, 'file_format_error', 'not valid Base64');
    refused(await post(sb, 'base64', { base64_data: 'abcde' }), 400, 'file_format_error', 'not valid Base64');
    refused(await post(sb, 'base64', { base64_data: `data:image/png,${b64}` }), 400, 'file_format_error', 'missing the ";base64," separator');
    refused(await post(sb, 'base64', { base64_data: `image/png;base64,${b64}` }), 400, 'file_format_error', 'missing the "data:" prefix');
    refused(await post(sb, 'base64', { base64_data: `${b64.slice(0, 40)}\n${b64.slice(40)}` }), 400, 'file_format_error', 'whitespace or newlines');
    refused(await post(sb, 'base64', { base64_data: `data:image/png;base64,${b64.slice(0, 40)} ${b64.slice(40)}` }), 400, 'file_format_error', 'whitespace');
    refused(await post(sb, 'base64', { base64_data: `data:application/pdf;base64,${PDF.toString('base64')}` }), 400, 'file_format_error', 'unsupported file type application/pdf');
    refused(await post(sb, 'base64', { base64_data: PDF.toString('base64') }), 400, 'file_format_error', 'unsupported file type application/pdf');
    refused(await post(sb, 'base64', { base64_data: '' }), 400, 'file_format_error', 'empty');
    refused(await post(sb, 'base64', { base64_data: 'data:image/png;base64,' }), 400, 'file_format_error', 'empty');
    refused(await post(sb, 'base64', { base64_data: Buffer.from('hello there, not an image').toString('base64') }), 400, 'file_format_error', 'not a recognisable image');
    refused(await post(sb, 'base64', { base64_data: JPEG.subarray(0, JPEG.length - 30).toString('base64') }), 400, 'file_format_error', 'truncated or corrupted');
    refused(await post(sb, 'base64', { base64_data: b64, data: JPEG.toString('base64') }), 400, 'validation_error', 'one field only');
    const s = sb.stats().uploads;
    expect(s).toEqual({ accepted: 0, refused: 16, rate_limited: 0 });
  });
});

describe('upload/url', () => {
  it('downloads a remote image (loopback allowed by option) and stores it', async () => {
    const sb = await sandbox({ allowLoopback: true });
    const base = await fileServer((req, res) => {
      if (req.url === '/pic.webp') res.writeHead(200, { 'content-type': 'image/webp' }).end(WEBP);
      else if (req.url === '/moved') res.writeHead(302, { location: '/pic.webp' }).end();
      else res.writeHead(404).end('nope');
    });
    const a = await post(sb, 'url', { file_url: `${base}/pic.webp`, upload_path: 'web', file_name: 'w.webp' });
    expect(a.status).toBe(200);
    expect(a.body.data).toMatchObject({ file_name: 'w.webp', content_type: 'image/webp', file_size: WEBP.length, upload_path: 'temp/web' });
    expect(a.body.data.download_url).toBe(a.body.data.file_url);
    expect((await download(a.body.data.file_url as string)).bytes.equals(WEBP)).toBe(true);
    const b = await post(sb, 'url', { file_url: `${base}/moved` });
    expect(b.body.data.content_type).toBe('image/webp');
  });

  it('refuses private, loopback and link-local addresses unless loopback is allowed', async () => {
    const sb = await sandbox();
    const base = await fileServer((_req, res) => res.writeHead(200).end(PNG));
    for (const url of [`${base}/a.png`, 'http://localhost/a.png', 'http://10.1.2.3/a.png', 'http://169.254.169.254/latest', 'http://[::1]/a.png', 'http://192.168.0.10/a.png']) {
      refused(await post(sb, 'url', { file_url: url }), 400, 'validation_error', /^file_url: .*(private|loopback|internal)/);
    }
    const loose = await sandbox({ allowLoopback: true });
    expect((await post(loose, 'url', { file_url: `${base}/a.png` })).status).toBe(200);
    refused(await post(loose, 'url', { file_url: 'http://10.1.2.3/a.png' }), 400, 'validation_error', 'private');
  });

  it('fails cleanly on a bad URL, a non-image, a 404, an unreachable host and a time-out', async () => {
    // Time scale 0.5: the download limit is 5 s, so the endless body reaches the 20 MB cap (413) before it even on
    // a loaded machine (at 0.01 the 1 s floor was sometimes reached first: 408).
    const sb = await sandbox({ allowLoopback: true, timeScale: 0.5 });
    const base = await fileServer((req, res) => {
      if (req.url === '/page.html') res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>hi</body></html>');
      else if (req.url === '/hang') res.writeHead(200, { 'content-type': 'image/png' }).write(PNG.subarray(0, 10)); // never ends
      else if (req.url === '/huge') res.writeHead(200, { 'content-length': String(30 * 1024 * 1024) }).end();
      else if (req.url === '/endless') {
        res.writeHead(200, { 'content-type': 'image/png' });
        res.write(PNG.subarray(0, 16));
        const chunk = Buffer.alloc(1024 * 1024);
        const more = () => {
          while (res.write(chunk)) if (res.destroyed) return;
          res.once('drain', more);
        };
        res.on('error', () => undefined);
        more();
      } else if (req.url === '/to-private') res.writeHead(302, { location: 'http://10.9.8.7/a.png' }).end();
      else res.writeHead(404).end();
    });
    refused(await post(sb, 'url', { file_url: `${base}/huge` }), 413, 'content_too_long_error', 'the limit is');
    refused(await post(sb, 'url', { file_url: `${base}/endless` }), 413, 'content_too_long_error', 'larger than the limit');
    refused(await post(sb, 'url', { file_url: `${base}/to-private` }), 400, 'validation_error', '10.9.8.7 is a private');
    refused(await post(sb, 'url', {}), 400, 'validation_error', 'file_url: is required');
    refused(await post(sb, 'url', { file_url: 'not a url' }), 400, 'validation_error', 'file_url: is not a valid URL');
    refused(await post(sb, 'url', { file_url: 'ftp://example.com/a.png' }), 400, 'validation_error', 'http or https');
    refused(await post(sb, 'url', { file_url: `${base}/page.html` }), 400, 'file_format_error', 'not a recognisable image');
    refused(await post(sb, 'url', { file_url: `${base}/missing.png` }), 400, 'validation_error', 'answered 404');
    const closed = await fileServer(() => undefined);
    const closedServer = servers.pop();
    closedServer?.closeAllConnections();
    await new Promise((r) => closedServer?.close(r));
    refused(await post(sb, 'url', { file_url: `${closed}/a.png` }), 400, 'validation_error', 'could not be downloaded');
    refused(await post(sb, 'url', { file_url: `${base}/hang` }), 408, 'timeout_error', 'did not finish');
  });
});

describe('upload limits and expiry', () => {
  it('allows 5 uploads per minute per key across the endpoints, then 429 with Retry-After; the next window works', async () => {
    const sb = await sandbox({ timeScale: 1 });
    const b64 = { base64_data: PNG.toString('base64') };
    const answers = [
      await post(sb, 'base64', b64, { fresh: false }),
      await post(sb, 'stream', form(PNG), { fresh: false }),
      await post(sb, 'base64', { base64_data: 'bad!' }, { fresh: false }),
      await post(sb, 'stream', form(JPEG), { fresh: false }),
      await post(sb, 'url', { file_url: 'http://10.0.0.1/a.png' }, { fresh: false }),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 200, 400, 200, 400]);
    const sixth = await post(sb, 'base64', b64, { fresh: false });
    refused(sixth, 429, 'rate_limit_error', 'at most 5 uploads per minute');
    const retry = Number(sixth.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
    // Another key has its own window.
    expect((await post(sb, 'base64', b64, { key: 'k2', fresh: false })).status).toBe(200);
    const advanced = await fetch(`${sb.url}/__sandbox/clock`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ advance_s: 60 }) });
    expect(advanced.status).toBe(200);
    expect((await post(sb, 'base64', b64, { fresh: false })).status).toBe(200);
    expect(sb.stats().uploads).toEqual({ accepted: 5, refused: 3, rate_limited: 1 });
  });

  it('deletes an upload 72 hours after it was made (410, then 404)', async () => {
    const sb = await sandbox();
    const a = await post(sb, 'base64', { base64_data: PNG.toString('base64'), file_name: 'keep.png' });
    const url = a.body.data.file_url as string;
    const clock = (s: number) => fetch(`${sb.url}/__sandbox/clock`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ advance_s: s }) });
    await clock(71 * 3600);
    expect((await download(url)).status).toBe(200);
    await clock(3600);
    expect((await download(url)).status).toBe(410);
    expect((await download(url)).status).toBe(404);
  });

  it('requires an API key', async () => {
    const sb = await sandbox();
    const res = await fetch(`${sb.url}/api/common/upload/base64`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ base64_data: PNG.toString('base64') }) });
    expect(res.status).toBe(401);
    expect(((await res.json()) as Json).error.type).toBe('authentication_error');
  });
});
