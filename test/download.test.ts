import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readdir, readFile, rm, stat, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApiError, NetworkError, UnsafeResultError } from '../src/errors.js';
import { MAX_NAME_BYTES, cleanupPartials, downloadFile, isGone, nameFromUrl, safeJoin, sanitizeName, verifyFile } from '../src/download/index.js';

const BODY = Buffer.from(Array.from({ length: 50_000 }, (_, i) => (i * 7) & 0xff));
const OTHER = Buffer.from('a different file that happens to be here already\n');
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
const routes: Record<string, Handler> = {
  '/good.png': (_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': BODY.length });
    res.end(BODY);
  },
  '/chunked': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.write(BODY.subarray(0, 1000));
    res.end(BODY.subarray(1000));
  },
  '/truncated': (_req, res) => {
    res.writeHead(200, { 'content-length': BODY.length });
    res.write(BODY.subarray(0, 20_000), () => setTimeout(() => res.socket?.destroy(), 20));
  },
  '/redirect': (_req, res) => {
    res.writeHead(302, { location: '/good.png' });
    res.end();
  },
  '/redirect-file': (_req, res) => {
    res.writeHead(302, { location: 'file:///etc/passwd' });
    res.end();
  },
  '/gone': (_req, res) => {
    res.writeHead(410);
    res.end('expired');
  },
  '/busy': (_req, res) => {
    res.writeHead(503, { 'retry-after': '7' });
    res.end('busy');
  },
  '/stall': (_req, res) => {
    res.writeHead(200, { 'content-length': BODY.length });
    res.write(BODY.subarray(0, 1000)); // then nothing: the client must give up by its signal
  },
  // Over SMALL_BODY (64 KiB): streamed to the temporary file as it comes.
  '/stall-big': (_req, res) => {
    res.writeHead(200, { 'content-length': 200_000 });
    res.write(BODY.subarray(0, 1000));
  },
  '/gzip': (_req, res) => {
    res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': 3 });
    res.end('abc');
  },
};

let server: Server;
let base: string;
let dir: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const handler = routes[new URL(req.url ?? '/', 'http://x').pathname];
    if (handler) handler(req, res);
    else {
      res.writeHead(404);
      res.end('not found');
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'genbatch-dl-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the download to fail');
}

describe('sanitizeName', () => {
  it.each([
    ['../../etc/passwd', 'passwd'],
    ['/abs/path/x.png', 'x.png'],
    ['a\\b', 'b'],
    ['..\\..\\windows\\win.ini', 'win.ini'],
    ['na\0me.png', 'name.png'],
    ['bad\x01\x1f\x7fname\r\n.png', 'badname.png'],
    ['.hidden', 'hidden'],
    ['...', 'fallback.bin'],
    ['..', 'fallback.bin'],
    ['', 'fallback.bin'],
    ['evil\u202Egnp.exe', 'evilgnp.exe'],
    ['what?<>:"|*.png', 'what_______.png'],
    ['CON.txt', '_CON.txt'],
    ['trailing. . ', 'trailing'],
  ])('%j -> %j', (input, want) => {
    expect(sanitizeName(input, 'fallback.bin')).toBe(want);
  });

  it('bounds very long names and keeps the extension', () => {
    const long = sanitizeName('x'.repeat(5000) + '.mp4', 'f');
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(MAX_NAME_BYTES);
    expect(long.endsWith('.mp4')).toBe(true);
    const wide = sanitizeName('é'.repeat(500) + '.png', 'f');
    expect(Buffer.byteLength(wide)).toBeLessThanOrEqual(MAX_NAME_BYTES);
    expect(wide.endsWith('é.png')).toBe(true);
  });

  it('is idempotent and refuses when nothing usable is left', () => {
    for (const n of ['../../etc/passwd', 'ok name (2).png', '.x', 'é'.repeat(500)]) {
      const once1 = sanitizeName(n, 'f');
      expect(sanitizeName(once1, 'f')).toBe(once1);
    }
    expect(() => sanitizeName('..', '../')).toThrow(UnsafeResultError);
    expect(sanitizeName(null, 'result.png')).toBe('result.png');
  });

  it('nameFromUrl decodes the last path segment', () => {
    expect(nameFromUrl('https://cdn.example/a/b/my%20file.png?sig=1')).toBe('my file.png');
    expect(nameFromUrl('https://cdn.example/')).toBeNull();
    expect(nameFromUrl('not a url')).toBeNull();
  });
});

describe('safeJoin', () => {
  it('keeps paths inside the folder', () => {
    expect(safeJoin('/out', 'job1', 'a.png')).toBe('/out/job1/a.png');
    expect(safeJoin('/out', '..foo')).toBe('/out/..foo');
  });
  it.each([[['..', 'x']], [['../../etc/passwd']], [['/abs']], [['a/../../b']], [['']], [['.']], [['a\0b']]])('refuses %j', (parts) => {
    expect(() => safeJoin('/out', ...parts)).toThrow(UnsafeResultError);
  });
});

describe('downloadFile', () => {
  it('downloads a good file with size, sha256 and content type, leaving no temporary file', async () => {
    const r = await downloadFile({ url: `${base}/good.png`, dir, name: 'good.png', expectedSize: BODY.length });
    expect(r).toMatchObject({ name: 'good.png', size: BODY.length, sha256: sha(BODY), contentType: 'image/png', reused: false, renamed: false });
    expect(r.path).toBe(join(dir, 'good.png'));
    expect((await readFile(r.path)).equals(BODY)).toBe(true);
    expect(await readdir(dir)).toEqual(['good.png']);
  });

  it('handles a chunked body without Content-Length and follows a redirect', async () => {
    const a = await downloadFile({ url: `${base}/chunked`, dir, name: 'c.bin' });
    expect(a.sha256).toBe(sha(BODY));
    const b = await downloadFile({ url: `${base}/redirect`, dir: join(dir, 'sub'), name: 'r.png' });
    expect(b.sha256).toBe(sha(BODY));
  });

  it('rejects a truncated body as a retryable network error and leaves nothing behind', async () => {
    const err = await failure(downloadFile({ url: `${base}/truncated`, dir, name: 't.png' }));
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as NetworkError).sent).toBe(true);
    expect(await readdir(dir)).toEqual([]);
  });

  it('rejects a body whose size differs from file_size, before or while streaming', async () => {
    const short = await failure(downloadFile({ url: `${base}/good.png`, dir, name: 'g.png', expectedSize: BODY.length + 1 }));
    expect(short).toBeInstanceOf(UnsafeResultError);
    const chunkedLong = await failure(downloadFile({ url: `${base}/chunked`, dir, name: 'g.png', expectedSize: 999 }));
    expect(chunkedLong).toBeInstanceOf(UnsafeResultError);
    expect((chunkedLong as Error).message).toMatch(/file_size/);
    const chunkedShort = await failure(downloadFile({ url: `${base}/chunked`, dir, name: 'g.png', expectedSize: BODY.length + 5 }));
    expect(chunkedShort).toBeInstanceOf(UnsafeResultError);
    expect(await readdir(dir)).toEqual([]);
  });

  it('enforces maxBytes with and without Content-Length', async () => {
    for (const path of ['/good.png', '/chunked']) {
      const err = await failure(downloadFile({ url: `${base}${path}`, dir, name: 'm.png', maxBytes: 10_000 }));
      expect(err).toBeInstanceOf(UnsafeResultError);
    }
    expect(await readdir(dir)).toEqual([]);
  });

  it('reports 404 and 410 as gone, other statuses as ApiError with Retry-After', async () => {
    for (const path of ['/missing', '/gone']) {
      const err = await failure(downloadFile({ url: `${base}${path}?token=secret`, dir, name: 'x.png' }));
      expect(err).toBeInstanceOf(ApiError);
      expect(isGone(err)).toBe(true);
      expect((err as Error).message).not.toContain('secret');
    }
    const busy = await failure(downloadFile({ url: `${base}/busy`, dir, name: 'x.png' }));
    expect(busy).toBeInstanceOf(ApiError);
    expect(isGone(busy)).toBe(false);
    expect((busy as ApiError).status).toBe(503);
    expect((busy as ApiError).retryAfterMs).toBe(7000);
    expect(await readdir(dir)).toEqual([]);
  });

  it('refuses non-http URLs, redirects to them, and encoded bodies', async () => {
    for (const url of ['file:///etc/passwd', 'ftp://x/y', 'javascript:alert(1)', 'nonsense']) {
      expect(await failure(downloadFile({ url, dir, name: 'x' }))).toBeInstanceOf(UnsafeResultError);
    }
    expect(await failure(downloadFile({ url: `${base}/redirect-file`, dir, name: 'x' }))).toBeInstanceOf(UnsafeResultError);
    expect(await failure(downloadFile({ url: `${base}/gzip`, dir, name: 'x' }))).toBeInstanceOf(UnsafeResultError);
    expect(await readdir(dir)).toEqual([]);
  });

  it('a small body (<= 64 KiB) is written only once complete: aborted mid-body, no file is ever made', async () => {
    const controller = new AbortController();
    const p = downloadFile({ url: `${base}/stall`, dir, name: 's.png', signal: controller.signal });
    await new Promise((r) => setTimeout(r, 100)); // the first 1,000 bytes are in
    expect(await readdir(dir)).toEqual([]);
    controller.abort();
    const err = await failure(p);
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(NetworkError);
    expect(await readdir(dir)).toEqual([]);
  });

  it('stops when its signal aborts mid-body and removes the temporary file', async () => {
    const controller = new AbortController();
    const p = downloadFile({ url: `${base}/stall-big`, dir, name: 's.png', signal: controller.signal });
    // Abort once the temporary file exists, i.e. the body has started.
    for (let i = 0; i < 200 && (await readdir(dir)).length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect((await readdir(dir))[0]).toMatch(/^\.s\.png\.[0-9a-f]{12}\.part$/);
    controller.abort();
    const err = await failure(p);
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(NetworkError);
    expect(await readdir(dir)).toEqual([]);
  });

  it('verifyFile checks size and sha256 of a file already on disk', async () => {
    const r = await downloadFile({ url: `${base}/good.png`, dir, name: 'v.png' });
    expect(await verifyFile(r.path, { size: r.size, sha256: r.sha256 })).toBe(true);
    expect(await verifyFile(r.path, { size: r.size, sha256: sha(OTHER) })).toBe(false);
    expect(await verifyFile(r.path, { size: r.size - 1, sha256: r.sha256 })).toBe(false);
    expect(await verifyFile(join(dir, 'missing.png'), { size: 1, sha256: r.sha256 })).toBe(false);
  });

  it('a refused connection is a network error that was not sent', async () => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const err = await failure(downloadFile({ url: `http://127.0.0.1:${port}/x`, dir, name: 'x' }));
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as NetworkError).sent).toBe(false);
  });

  it('keeps hostile server names inside the target folder', async () => {
    const outside = join(dir, 'outside');
    const target = join(dir, 'out', 'job1');
    for (const name of ['../../outside/passwd', '/abs', 'a\\b', 'n\0ul.png', 'c\x07trl.png', 'L'.repeat(1000) + '.png', '..']) {
      const r = await downloadFile({ url: `${base}/good.png`, dir: target, name });
      expect(r.path.startsWith(target + '/')).toBe(true);
      expect(r.name).not.toMatch(/[/\\\0\x00-\x1f]/);
      expect(Buffer.byteLength(r.name)).toBeLessThanOrEqual(MAX_NAME_BYTES);
    }
    await expect(stat(outside)).rejects.toThrow();
    expect((await readdir(target)).sort()).toEqual(['L'.repeat(MAX_NAME_BYTES - 4) + '.png', '_nul.png', 'abs', 'b', 'ctrl.png', 'file', 'passwd']);
  });

  it('never overwrites an unrelated file, and reuses a file with the same content', async () => {
    await writeFile(join(dir, 'result.png'), OTHER);
    const first = await downloadFile({ url: `${base}/good.png`, dir, name: 'result.png' });
    expect(first).toMatchObject({ name: 'result (2).png', renamed: true, reused: false });
    expect((await readFile(join(dir, 'result.png'))).equals(OTHER)).toBe(true);
    expect((await readFile(first.path)).equals(BODY)).toBe(true);

    const again = await downloadFile({ url: `${base}/good.png`, dir, name: 'result.png' });
    expect(again).toMatchObject({ name: 'result (2).png', reused: true, path: first.path, sha256: sha(BODY) });
    expect((await readdir(dir)).sort()).toEqual(['result (2).png', 'result.png']);

    const same = await downloadFile({ url: `${base}/good.png`, dir, name: 'result (2).png' });
    expect(same).toMatchObject({ reused: true, renamed: false });
  });

  it('never takes a file of the same size but other bytes for the result: every recorded file has its own sha256 (invariant)', async () => {
    // Same length as the result, one byte different: only the sha256 comparison tells them apart.
    const lookalike = Buffer.from(BODY);
    lookalike[lookalike.length - 1] = lookalike[lookalike.length - 1]! ^ 0xff;
    await writeFile(join(dir, 'result.png'), lookalike);
    const r = await downloadFile({ url: `${base}/good.png`, dir, name: 'result.png' });
    expect(r).toMatchObject({ name: 'result (2).png', reused: false, renamed: true, size: BODY.length, sha256: sha(BODY) });
    expect((await readFile(join(dir, 'result.png'))).equals(lookalike)).toBe(true);
    expect((await readFile(r.path)).equals(BODY)).toBe(true);
  });

  it('does not replace a directory or symlink sitting under the final name', async () => {
    await mkdir(join(dir, 'taken.png'));
    const r = await downloadFile({ url: `${base}/good.png`, dir, name: 'taken.png' });
    expect(r.name).toBe('taken (2).png');
    expect((await stat(join(dir, 'taken.png'))).isDirectory()).toBe(true);
  });
});

describe('cleanupPartials', () => {
  it('removes only temporary download files, recursively', async () => {
    await mkdir(join(dir, 'job1'));
    await writeFile(join(dir, '.a.png.0123456789ab.part'), 'x');
    await writeFile(join(dir, 'job1', '.b.mp4.abcdefabcdef.part'), 'x');
    await writeFile(join(dir, 'job1', 'keep.part'), 'x');
    await writeFile(join(dir, 'job1', 'b.mp4'), 'x');
    const removed = await cleanupPartials(dir);
    expect(removed.sort()).toEqual([join(dir, '.a.png.0123456789ab.part'), join(dir, 'job1', '.b.mp4.abcdefabcdef.part')]);
    expect((await readdir(join(dir, 'job1'))).sort()).toEqual(['b.mp4', 'keep.part']);
    expect(await cleanupPartials(join(dir, 'missing'))).toEqual([]);
  });
});
