import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isAbsolute, relative, resolve } from 'node:path';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, NetworkError, UnsafeResultError } from '../src/errors.js';
import { MAX_NAME_BYTES, downloadFile, safeJoin, sanitizeName, type DownloadOptions } from '../src/download/index.js';

// The whole-body path (file_size <= 64 KiB: one undici dispatch with a small handler) and the
// streaming path (undici request, a Readable body) must give the same files, hashes and errors.

const BODY = Buffer.from(Array.from({ length: 5641 }, (_, i) => (i * 13 + 5) & 0xff));
// Over 64 KiB and over one write batch (1 MiB): streamed to the temporary file in several writes.
const BIG = Buffer.from(Array.from({ length: 3 * 1024 * 1024 + 12345 }, (_, i) => (i * 31 + (i >> 11)) & 0xff));
const OTHER = Buffer.from('something else already sits under this name\n');
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
const routes: Record<string, Handler> = {
  '/good.png': (_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': BODY.length });
    res.end(BODY);
  },
  '/split.png': (_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': BODY.length });
    res.write(BODY.subarray(0, 100), () => setTimeout(() => res.end(BODY.subarray(100)), 5));
  },
  '/chunked': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.write(BODY.subarray(0, 1000), () => setTimeout(() => res.end(BODY.subarray(1000)), 5));
  },
  '/big': (_req, res) => {
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': BIG.length });
    let at = 0;
    const more = (): void => {
      if (at >= BIG.length) return void res.end();
      const piece = BIG.subarray(at, at + 200_000 + (at % 7));
      at += piece.length;
      res.write(piece, () => setImmediate(more));
    };
    more();
  },
  '/big-chunked': (_req, res) => {
    res.writeHead(200, { 'content-type': 'video/mp4' });
    res.end(BIG);
  },
  '/empty': (_req, res) => {
    res.writeHead(200, { 'content-length': 0 });
    res.end();
  },
  '/truncated': (_req, res) => {
    res.writeHead(200, { 'content-length': BODY.length });
    res.write(BODY.subarray(0, 2000), () => setTimeout(() => res.socket?.destroy(), 20));
  },
  '/chunked-cut': (_req, res) => {
    res.writeHead(200, {});
    res.write(BODY.subarray(0, 2000), () => setTimeout(() => res.socket?.destroy(), 20));
  },
  '/redirect': (_req, res) => {
    res.writeHead(302, { location: '/good.png?sig=abc' });
    res.end('moved');
  },
  '/redirect-file': (_req, res) => {
    res.writeHead(301, { location: 'file:///etc/passwd' });
    res.end();
  },
  '/loop': (_req, res) => {
    res.writeHead(307, { location: '/loop' });
    res.end();
  },
  '/gone': (_req, res) => {
    res.writeHead(410);
    res.end('expired');
  },
  '/busy': (_req, res) => {
    res.writeHead(503, { 'retry-after': '7' });
    res.end('busy '.repeat(40_000)); // a large error body (over the 128 KiB dump limit)
  },
  '/partial': (_req, res) => {
    res.writeHead(206, { 'content-length': BODY.length });
    res.end(BODY);
  },
  '/gzip': (_req, res) => {
    res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': BODY.length });
    res.end(BODY);
  },
  '/stall': (_req, res) => {
    res.writeHead(200, { 'content-length': BODY.length });
    res.write(BODY.subarray(0, 1000));
  },
  '/stall-headers': () => undefined, // never answers
};

let server: Server;
let base: string;
let root: string;

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
  root = await mkdtemp(join(tmpdir(), 'genbatch-dlpaths-'));
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await rm(root, { recursive: true, force: true });
});

/** A dispatcher that records which kind of handler each request used (seen through the pace watch, src/download/pace.ts). */
class Recording extends Agent {
  readonly kinds: string[] = [];
  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const inner = (handler as { inner?: Dispatcher.DispatchHandler }).inner ?? handler;
    this.kinds.push(inner.constructor.name === 'WholeBody' ? 'whole' : 'stream');
    return super.dispatch(opts, handler);
  }
}

type Seen = { ok: Record<string, unknown>; bytes: string; files: string[] } | { err: Record<string, unknown>; files: string[] };

let n = 0;
/** Runs one download on one path in a fresh folder and describes everything observable. */
async function observe(o: Omit<DownloadOptions, 'dir'>, stream: boolean, prepare?: (dir: string) => Promise<void>): Promise<{ seen: Seen; kinds: string[] }> {
  const dir = join(root, `d${n++}`);
  const { mkdir } = await import('node:fs/promises');
  await mkdir(dir);
  if (prepare) await prepare(dir);
  const dispatcher = new Recording();
  try {
    const r = await downloadFile({ ...o, dir, stream, dispatcher });
    const files = (await readdir(dir)).sort();
    return { seen: { ok: { ...r, path: relative(dir, r.path) }, bytes: sha(await readFile(r.path)), files }, kinds: dispatcher.kinds };
  } catch (e) {
    const err = e as Error & { sent?: boolean; status?: number; retryAfterMs?: number | null };
    const files = (await readdir(dir)).sort();
    return {
      seen: { err: { class: err.constructor.name, name: err.name, message: err.message, sent: err.sent, status: err.status, retryAfterMs: err.retryAfterMs }, files },
      kinds: dispatcher.kinds,
    };
  } finally {
    await dispatcher.close();
  }
}

async function same(o: Omit<DownloadOptions, 'dir'>, prepare?: (dir: string) => Promise<void>): Promise<Seen> {
  const streamed = await observe(o, true, prepare);
  const whole = await observe(o, false, prepare);
  expect(whole.seen).toEqual(streamed.seen);
  // The whole-body path is taken exactly when file_size is known and at most 64 KiB.
  const small = o.expectedSize !== undefined && o.expectedSize !== null && o.expectedSize <= 64 * 1024;
  expect(streamed.kinds.every((k) => k === 'stream')).toBe(true);
  if (whole.kinds.length > 0) expect(whole.kinds.every((k) => k === (small ? 'whole' : 'stream'))).toBe(true);
  return whole.seen;
}

describe('downloadFile: whole-body path and streaming path agree', () => {
  it('a good file, in one piece, in two pieces, chunked, empty, via a redirect', async () => {
    for (const path of ['/good.png', '/split.png', '/chunked', '/redirect']) {
      const seen = await same({ url: `${base}${path}`, name: 'pic.png', expectedSize: BODY.length });
      expect(seen).toMatchObject({ ok: { name: 'pic.png', size: BODY.length, sha256: sha(BODY), reused: false, renamed: false }, bytes: sha(BODY), files: ['pic.png'] });
    }
    const empty = await same({ url: `${base}/empty`, name: 'e.bin', expectedSize: 0 });
    expect(empty).toMatchObject({ ok: { size: 0, sha256: sha(Buffer.alloc(0)) }, files: ['e.bin'] });
  });

  it('large bodies stream to disk in batches: same bytes and hash, with or without Content-Length and file_size', async () => {
    for (const path of ['/big', '/big-chunked']) {
      for (const expectedSize of [BIG.length, undefined]) {
        const seen = await same({ url: `${base}${path}`, name: 'v.mp4', ...(expectedSize !== undefined ? { expectedSize } : {}) });
        expect(seen).toMatchObject({ ok: { name: 'v.mp4', size: BIG.length, sha256: sha(BIG), contentType: 'video/mp4' }, bytes: sha(BIG), files: ['v.mp4'] });
      }
    }
    const long = await same({ url: `${base}/big-chunked`, name: 'v.mp4', expectedSize: BIG.length - 1 });
    expect(long).toMatchObject({ err: { class: UnsafeResultError.name, message: expect.stringMatching(/longer than file_size/) }, files: [] });
    const over = await same({ url: `${base}/big-chunked`, name: 'v.mp4', maxBytes: 2 * 1024 * 1024 });
    expect(over).toMatchObject({ err: { class: UnsafeResultError.name, message: expect.stringMatching(/over the limit/) }, files: [] });
  });

  it('sizes that differ from file_size or Content-Length, before, while and after the body', async () => {
    for (const [path, size] of [
      ['/good.png', BODY.length + 1],
      ['/good.png', BODY.length - 1],
      ['/chunked', 999],
      ['/chunked', BODY.length + 5],
      ['/truncated', BODY.length],
      ['/chunked-cut', BODY.length],
    ] as const) {
      const seen = await same({ url: `${base}${path}`, name: 'x.png', expectedSize: size });
      expect(seen).toMatchObject({ files: [] });
      expect('err' in seen).toBe(true);
    }
    const limit = await same({ url: `${base}/good.png`, name: 'x.png', expectedSize: BODY.length, maxBytes: 100 });
    expect(limit).toMatchObject({ err: { class: 'UnsafeResultError' }, files: [] });
  });

  it('statuses, redirects, encodings and a refused connection give the same errors', async () => {
    expect(await same({ url: `${base}/gone?token=secret`, name: 'x.png', expectedSize: 10 })).toMatchObject({ err: { class: ApiError.name, status: 410 }, files: [] });
    expect(await same({ url: `${base}/missing`, name: 'x.png', expectedSize: 10 })).toMatchObject({ err: { class: ApiError.name, status: 404 } });
    expect(await same({ url: `${base}/busy`, name: 'x.png', expectedSize: 10 })).toMatchObject({ err: { class: ApiError.name, status: 503, retryAfterMs: 7000 } });
    expect(await same({ url: `${base}/partial`, name: 'x.png', expectedSize: BODY.length })).toMatchObject({ err: { class: UnsafeResultError.name } });
    expect(await same({ url: `${base}/gzip`, name: 'x.png', expectedSize: BODY.length })).toMatchObject({ err: { class: UnsafeResultError.name } });
    expect(await same({ url: `${base}/redirect-file`, name: 'x.png', expectedSize: 10 })).toMatchObject({ err: { class: UnsafeResultError.name } });
    expect(await same({ url: `${base}/loop`, name: 'x.png', expectedSize: 10 })).toMatchObject({ err: { class: UnsafeResultError.name, message: expect.stringMatching(/redirects/) } });

    const probe = createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    expect(await same({ url: `http://127.0.0.1:${port}/x`, name: 'x', expectedSize: 10 })).toMatchObject({ err: { class: NetworkError.name, sent: false } });
  });

  it('a taken name gets a numbered name; the same content already there is reused', async () => {
    const taken = await same({ url: `${base}/good.png`, name: 'r.png', expectedSize: BODY.length }, (dir) => writeFile(join(dir, 'r.png'), OTHER));
    expect(taken).toMatchObject({ ok: { name: 'r (2).png', renamed: true, reused: false }, files: ['r (2).png', 'r.png'] });
    const reused = await same({ url: `${base}/good.png`, name: 'r.png', expectedSize: BODY.length }, (dir) => writeFile(join(dir, 'r.png'), BODY));
    expect(reused).toMatchObject({ ok: { name: 'r.png', renamed: false, reused: true }, files: ['r.png'] });
  });

  it('an abort before the answer, mid-body, or before the start gives the signal reason and no file', async () => {
    for (const path of ['/stall', '/stall-headers']) {
      const results = [];
      for (const stream of [true, false]) {
        const dir = join(root, `a${n++}`);
        const controller = new AbortController();
        const p = downloadFile({ url: `${base}${path}`, dir, name: 's.png', expectedSize: BODY.length, signal: controller.signal, stream });
        await new Promise((r) => setTimeout(r, 50));
        controller.abort();
        const err = await p.then(() => null, (e: unknown) => e);
        expect(err).toBe(controller.signal.reason);
        results.push(await readdir(dir));
      }
      expect(results).toEqual([[], []]);
    }
    const controller = new AbortController();
    controller.abort();
    for (const stream of [true, false]) {
      const err = await downloadFile({ url: `${base}/good.png`, dir: join(root, `a${n++}`), name: 's.png', expectedSize: BODY.length, signal: controller.signal, stream }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBe(controller.signal.reason);
    }
  });
});

/** safeJoin before its fast path, as the reference. */
function referenceSafeJoin(outDir: string, ...parts: string[]): string {
  if (parts.some((p) => p.includes('\0'))) throw new UnsafeResultError('file path: contains a NUL character');
  const r = resolve(outDir);
  const full = resolve(r, ...parts);
  const rel = relative(r, full);
  if (rel === '' || rel === '..' || rel.startsWith('../') || rel.startsWith('..\\') || isAbsolute(rel)) {
    throw new UnsafeResultError(`file path: "${parts.join('/')}" resolves outside the output folder`);
  }
  return full;
}

describe('safeJoin fast path', () => {
  it('gives the same path or the same error as the full check', () => {
    const dirs = ['/out', '/out/', '/', '/a/./b/../c', 'relative/dir', '', '.', '/out//job'];
    const names = ['x.png', '.x.png.0123456789ab.part', '..', '.', '', '...', '..x', 'x..', 'a b', 'a\\b', '..\\x', 'a/b', '../x', '/abs', 'n\0ul', 'é.png', ' ', '~'];
    for (const d of dirs) {
      for (const p of names) {
        const want = ((): string => {
          try {
            return referenceSafeJoin(d, p);
          } catch (e) {
            return `throws ${(e as Error).message}`;
          }
        })();
        const got = ((): string => {
          try {
            return safeJoin(d, p);
          } catch (e) {
            return `throws ${(e as Error).message}`;
          }
        })();
        expect([d, p, got]).toEqual([d, p, want]);
      }
    }
  });
});

/** sanitizeName before its fast path, as the reference. */
function referenceSanitize(serverName: string, fallback: string): string {
  const SANE_EXT = /\.[A-Za-z0-9]{1,10}$/;
  const RESERVED = /^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?$/i;
  const truncate = (name: string, max: number): string => {
    if (Buffer.byteLength(name) <= max) return name;
    const ext = SANE_EXT.exec(name)?.[0] ?? '';
    const stem = ext ? name.slice(0, -ext.length) : name;
    let out = '';
    let bytes = Buffer.byteLength(ext);
    for (const ch of stem) {
      const b = Buffer.byteLength(ch);
      if (bytes + b > max) break;
      out += ch;
      bytes += b;
    }
    return out.replace(/[\s.]+$/, '') + ext;
  };
  const clean = (raw: string): string => {
    const segments = raw.normalize('NFC').split(/[/\\]+/).filter((x) => x.length > 0);
    let name = segments.at(-1) ?? '';
    name = name
      .replace(/[\p{Cc}\p{Cf}\u2028\u2029]/gu, '')
      .replace(/[<>:"|?*]/g, '_')
      .replace(/\s+/g, ' ')
      .replace(/^[\s.]+/, '')
      .replace(/[\s.]+$/, '');
    if (RESERVED.test(name)) name = `_${name}`;
    return truncate(name, MAX_NAME_BYTES);
  };
  const name = clean(serverName);
  if (name) return name;
  const fb = clean(fallback);
  if (!fb) throw new UnsafeResultError(`file name: neither the server name nor the fallback "${fallback}" gives a usable name`);
  return fb;
}

describe('sanitizeName fast path', () => {
  it('gives the same name or the same error as the full cleaning', () => {
    const fixed = ['image-1.png', '9f172164015c4aa063bbccf71e5bff6b-1.png', 'result (2).png', 'CON', 'con.txt', 'Lpt1.x', 'com0', 'nul.', '.hidden', 'a.', '-', '(', 'a..b', 'x'.repeat(180), 'x'.repeat(181), 'y'.repeat(176) + '.png', 'y'.repeat(200) + '.png', '', '.', '..', 'é.png', 'e\u0301.png', 'a b', 'a  b', 'a\tb'];
    // Random names over an alphabet with every character class the cleaning cares about.
    const alphabet = ['a', 'Z', '0', '9', '.', '_', '-', '(', ')', ' ', '/', '\\', '\0', '\x07', '\u202e', ':', '?', '*', '<', '|', '"', 'é', 'n', 'u', 'l', 'c', 'o'];
    let seed = 12345;
    const rnd = (k: number): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % k;
    };
    const names = [...fixed];
    for (let i = 0; i < 5000; i++) {
      const len = 1 + rnd(12);
      let x = '';
      for (let j = 0; j < len; j++) x += alphabet[rnd(alphabet.length)];
      names.push(x, `${x}.png`, `con${x}`);
    }
    const run = (f: () => string): string => {
      try {
        return f();
      } catch (e) {
        return `throws ${(e as Error).message}`;
      }
    };
    for (const name of names) {
      for (const fb of ['file', '...']) {
        expect([name, run(() => sanitizeName(name, fb))]).toEqual([name, run(() => referenceSanitize(name, fb))]);
      }
    }
  });
});
