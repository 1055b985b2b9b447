import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { Agent } from 'undici';
import { ServiceClient, type RetryPolicy } from '../src/client/index.js';
import { requestTarget, splitBase } from '../src/client/http.js';
import { AmbiguousSubmitError, BadResponseError, NetworkError } from '../src/errors.js';
import { json, ok, okTaskAsked, scripted, slow, task, type Reply, type Scripted } from './client.server.js';

/**
 * The exchange layer of the client (src/client/http.ts): one dispatch per
 * request with our own handler, the request target joined without parsing a
 * URL when that gives the same bytes, one abort listener per signal. Each
 * test pins down what undici's request() did before, over real HTTP.
 */

const KEY = 'sk-exchange-test-77a1';
const FAST: RetryPolicy = { baseMs: 5, maxMs: 40, maxAttempts: 3 };
const SUBMIT = { model: 'alpha-image-2', input: { prompt: 'a fox' } };
const SUBMITTED = { task_id: 'task-9', status: 'not_started', created_time: '2026-11-21T10:00:00' };

const servers: Scripted[] = [];
const closers: (() => Promise<unknown>)[] = [];

async function serve(replies: Parameters<typeof scripted>[0]): Promise<Scripted> {
  const s = await scripted(replies);
  servers.push(s);
  return s;
}
function client(baseUrl: string, over: Partial<ConstructorParameters<typeof ServiceClient>[0]> = {}): ServiceClient {
  const c = new ServiceClient({ baseUrl, apiKey: KEY, policy: FAST, ...over });
  closers.push(() => c.close());
  return c;
}
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** What undici's request(base + path) sent: origin and target from a full WHATWG URL parse. */
function parsed(base: string, path: string): { origin: string; path: string } {
  const u = new URL(base + path);
  return { origin: u.origin, path: u.search ? `${u.pathname}${u.search}` : u.pathname };
}

describe('request target: joined as strings only when URL parsing would give the same', () => {
  const ids = ['t-1', 'abc_DEF.123~x', '..', '.', '%2e', '.%2E', 'a b', "it's", 'a/b', 'ü', '😀', 'x?y', 'x#y', '%', '%zz', 'a\\b', '`{}|^', '"<>', '', 'a..b', '...'];
  const paths = ids.flatMap((id) => [`/api/generate/status/${encodeURIComponent(id)}`, `/api/generate/detail/music?task_id=${encodeURIComponent(id)}`]);
  paths.push('/api/generate/submit', '/api/user/balance', '/a/./b', '/a/../b', '/a/%2E%2e/b', '/a?b=c&d=e', '/a?x=%27', "/a?x='", '/a/b/', '//a');

  it.each(['http://127.0.0.1:8080', 'https://api.example.com', 'http://example.com:80', 'HTTP://Example.COM/v1', 'http://h/a b', 'http://h/a/.', 'http://user:pw@h:81/p', 'http://h/x?q', 'http://h/x#f'])('base %s', (base) => {
    const split = splitBase(base);
    // Only a base with a query or fragment has no fast path.
    expect(split === null).toBe(base.includes('?') || base.includes('#'));
    for (const path of paths) {
      expect(requestTarget(base, split, path), `${base} ${path}`).toEqual(parsed(base, path));
      expect(requestTarget(base, null, path), `${base} ${path} (parsed)`).toEqual(parsed(base, path));
    }
  });

  it('every printable ASCII character, alone or around dots, in a path segment and in the query', () => {
    const base = 'http://127.0.0.1:9';
    const split = splitBase(base);
    for (let c = 0x20; c < 0x7f; c++) {
      const ch = String.fromCharCode(c);
      for (const seg of [ch, `${ch}.`, `.${ch}`, `..${ch}`, `a${ch}b`]) {
        for (const path of [`/p/${seg}`, `/p/${seg}/q`, `/p?x=${seg}`, `/p/${encodeURIComponent(seg)}`, `/p?x=${encodeURIComponent(seg)}`]) {
          expect(requestTarget(base, split, path), path).toEqual(parsed(base, path));
        }
      }
    }
  });

  it('the server sees, for odd task ids, exactly the target a URL parse gives (dot segments resolved, quotes encoded)', async () => {
    const s = await serve([json(404, { detail: 'no such task' })]);
    const c = client(s.url, { policy: { ...FAST, maxAttempts: 1 } });
    const odd = ['..', '.', '%2e', "it's", 'a b', 'ü/é', 'x?y#z', 'plain-id'];
    for (const id of odd) {
      await rejection(c.status(id));
      await rejection(c.musicDetail(id));
    }
    const want = odd.flatMap((id) => [parsed(s.url, `/api/generate/status/${encodeURIComponent(id)}`).path, parsed(s.url, `/api/generate/detail/music?task_id=${encodeURIComponent(id)}`).path]);
    expect(s.calls.map((call) => call.url)).toEqual(want);
    expect(s.calls[0]?.url).toBe('/api/generate/');
    expect(s.calls[7]?.url).toBe("/api/generate/detail/music?task_id=it%27s");
  });

  it('a base URL with a path keeps its path in front of every request', async () => {
    const s = await serve([ok(SUBMITTED)]);
    await client(`${s.url}/prefix/v1/`).submit(SUBMIT);
    await client(`${s.url}/prefix/v1/`).balance().catch(() => null);
    expect(s.calls.map((call) => call.url)).toEqual(['/prefix/v1/api/generate/submit', '/prefix/v1/api/user/balance']);
  });

  it('a base URL that cannot be parsed fails each try as a request not sent, with the same message as before', async () => {
    const err = await rejection(client('http://exa mple.com', { policy: { ...FAST, maxAttempts: 2 } }).submit(SUBMIT));
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as NetworkError).sent).toBe(false);
    expect((err as Error).message).toBe('POST /api/generate/submit: ERR_INVALID_URL: Invalid URL (request not sent)');
  });
});

describe('the request on the wire', () => {
  it('GET and POST carry the same headers, in the same order, as before', async () => {
    const s = await serve((n) => (n === 0 ? ok(SUBMITTED) : ok(task())));
    const c = client(s.url);
    await c.submit(SUBMIT);
    await c.status('t-1');
    const names = (i: number) => {
      const raw: string[] = [];
      const h = s.calls[i]?.headers ?? {};
      for (const k of Object.keys(h)) raw.push(k);
      return raw;
    };
    expect(names(0)).toEqual(['host', 'connection', 'authorization', 'accept', 'content-type', 'content-length']);
    expect(names(1)).toEqual(['host', 'connection', 'authorization', 'accept']);
    expect(s.calls[0]?.headers).toMatchObject({ authorization: `Bearer ${KEY}`, accept: 'application/json', 'content-type': 'application/json', connection: 'keep-alive' });
    expect(s.calls[0]?.body.toString()).toBe(JSON.stringify(SUBMIT));
  });
});

describe('reading the answer', () => {
  it('skips a UTF-8 byte order mark, as body.text() did', async () => {
    const s = await serve([
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`\uFEFF${JSON.stringify({ code: 200, data: task({ task_id: 'bom' }) })}`);
      },
    ]);
    expect((await client(s.url).status('bom')).task_id).toBe('bom');
  });

  it('joins an answer that arrives in many chunks, multi-byte characters split across them', async () => {
    const body = Buffer.from(JSON.stringify({ code: 200, data: task({ task_id: 'chunks', files: Array.from({ length: 200 }, (_, i) => ({ file_url: `http://x/é${i}.png`, file_type: 'image', label: 'ü😀'.repeat(20) })) }) }));
    const s = await serve([
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        let at = 0;
        const step = () => {
          if (at >= body.length) return res.end();
          // 7-byte pieces split the 2- and 4-byte characters; a pause every 100 pieces makes many chunks.
          res.write(body.subarray(at, at + 7));
          at += 7;
          if (at % 700 === 0) setTimeout(step, 1);
          else step();
        };
        step();
      },
    ]);
    const t = await client(s.url).status('chunks');
    expect(t.files).toHaveLength(200);
    expect(t.files[199]?.file_url).toBe('http://x/é199.png');
    expect(t.files[0]?.label).toBe('ü😀'.repeat(20));
  });

  it('an empty 200 body is not JSON: BadResponseError naming 0 bytes', async () => {
    const s = await serve([json(200, '')]);
    const err = await rejection(client(s.url).status('t-1'));
    expect(err).toBeInstanceOf(BadResponseError);
    expect((err as Error).message).toBe('GET /api/generate/status/t-1: the answer is not JSON (HTTP 200, 0 bytes)');
  });

  it('an informational 103 before the answer is passed over', async () => {
    const s = await serve([
      (_req, res) => {
        res.writeEarlyHints({ link: '</x.css>; rel=preload; as=style' }, () => ok(task({ task_id: 'hinted' }))(_req, res, s.calls[0] as never));
      },
    ]);
    expect((await client(s.url).status('hinted')).task_id).toBe('hinted');
  });

  it('a repeated Retry-After header: the first value counts', async () => {
    const s = await serve([
      (_req, res) => {
        res.writeHead(429, [['content-type', 'application/json'], ['Retry-After', '0.03'], ['retry-after', '9']]);
        res.end(JSON.stringify({ detail: 'slow down' }));
      },
      ok(task()),
    ]);
    const delays: number[] = [];
    await client(s.url, { policy: { baseMs: 5, maxMs: 5_000, maxAttempts: 2 }, onRetry: (i) => delays.push(i.delayMs) }).status('t-1');
    expect(delays).toEqual([30]);
  });

  it('a 200 carrying an error envelope with Retry-After: ApiError with its wait', async () => {
    const s = await serve([json(200, { code: 429, error: { message: 'busy', type: 'rate_limit_error' } }, { 'retry-after': '2' })]);
    const err = await rejection(client(s.url, { policy: { ...FAST, maxAttempts: 1 } }).status('t-1'));
    expect(err).toMatchObject({ status: 429, type: 'rate_limit_error', retryAfterMs: 2000 });
  });
});

describe('abort: one listener per signal, same outcomes as before', () => {
  it('many requests in flight on one signal add one abort listener, and an abort ends each as before', async () => {
    const s = await serve((n, call) => (call.method === 'POST' ? slow(5_000, ok(SUBMITTED)) : slow(5_000, ok(task()))));
    const c = client(s.url, { statusRatePerSec: 1e6 });
    const ac = new AbortController();
    const before = getEventListeners(ac.signal, 'abort').length;
    const polls = Array.from({ length: 12 }, (_, i) => rejection(c.status(`t${i}`, ac.signal)));
    const submit = rejection(c.submit(SUBMIT, ac.signal));
    while (s.calls.length < 13) await new Promise((r) => setTimeout(r, 5));
    expect(getEventListeners(ac.signal, 'abort').length - before).toBe(1);
    const reason = new Error('stopping');
    ac.abort(reason);
    for (const p of polls) expect(await p).toBe(reason);
    const err = await submit;
    expect(err).toBeInstanceOf(AmbiguousSubmitError);
    expect(((err as AmbiguousSubmitError).cause as NetworkError).message).toBe('POST /api/generate/submit: request aborted after it was sent');
  });

  it('the listener goes with the last request in flight: none is left on the signal, and each client has its own', async () => {
    const s = await serve((n) => slow(n >= 5 && n < 8 ? 150 : 0, okTaskAsked()));
    const a = client(s.url, { statusRatePerSec: 1e6 });
    const b = client(s.url, { statusRatePerSec: 1e6 });
    const ac = new AbortController();
    for (let i = 0; i < 5; i++) await a.status(`s${i}`, ac.signal);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
    const both = Promise.all([a.status('a1', ac.signal), a.status('a2', ac.signal), b.status('b1', ac.signal)]);
    while (s.calls.length < 8) await new Promise((r) => setTimeout(r, 5));
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(2);
    await both;
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
    ac.abort(new Error('late'));
    // The clients still work, with the aborted signal's calls refused at once and others served.
    await expect(a.status('x', ac.signal)).rejects.toThrow('late');
    expect((await a.status('after')).task_id).toBe('after');
  });

  it('a submit aborted while it waits for a connection is not sent: it rejects with the reason (was: uncertain, though undici never wrote it)', async () => {
    const s = await serve((n) => (n === 0 ? slow(150, ok(SUBMITTED)) : ok(SUBMITTED)));
    // One connection: the second submit waits in undici's queue behind the first.
    const agent = new Agent({ connections: 1 });
    closers.push(() => agent.close());
    const c = client(s.url, { dispatcher: agent });
    const first = c.submit(SUBMIT);
    while (s.calls.length === 0) await new Promise((r) => setTimeout(r, 5));
    const ac = new AbortController();
    const second = rejection(c.submit(SUBMIT, ac.signal));
    const reason = new Error('stopping');
    ac.abort(reason);
    expect((await first).task_id).toBe('task-9');
    expect(await second).toBe(reason);
    // Never written: the server saw only the first.
    await new Promise((r) => setTimeout(r, 50));
    expect(s.calls).toHaveLength(1);
  });

  it('an abort while a status waits for a connection rejects with the reason and sends nothing', async () => {
    const s = await serve((n) => (n === 0 ? slow(150, okTaskAsked()) : okTaskAsked()));
    const agent = new Agent({ connections: 1 });
    closers.push(() => agent.close());
    const c = client(s.url, { dispatcher: agent, statusRatePerSec: 1e6 });
    const first = c.status('a');
    while (s.calls.length === 0) await new Promise((r) => setTimeout(r, 5));
    const ac = new AbortController();
    const second = rejection(c.status('b', ac.signal));
    const reason = new Error('stopping');
    ac.abort(reason);
    expect(await second).toBe(reason);
    await first;
    await new Promise((r) => setTimeout(r, 50));
    expect(s.calls).toHaveLength(1);
  });

  it('an abort while the answer body is arriving: a GET rejects with the reason', async () => {
    const s = await serve([
      ((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"code":200,"data":');
      }) as Reply,
    ]);
    const ac = new AbortController();
    const p = rejection(client(s.url, { statusRatePerSec: 1e6 }).status('t', ac.signal));
    await new Promise((r) => setTimeout(r, 50));
    const reason = new Error('stopping');
    ac.abort(reason);
    expect(await p).toBe(reason);
  });
});
