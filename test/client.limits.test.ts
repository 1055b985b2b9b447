import { afterEach, describe, expect, it } from 'vitest';
import { ANSWER_MAX_BYTES, ChatClient, MAX_DEPTH, ServiceClient, UNUSABLE_TRIES, type RetryPolicy } from '../src/client/index.js';
import { AmbiguousSubmitError, ApiError, NetworkError, UnusableAnswerError } from '../src/errors.js';
import { json, startFakeService, submitted, type FakeHandler, type FakeService } from './helpers/fake-service.js';
import { drip, hugeStatus, nestedStatus } from './helpers/hostile.js';

/**
 * Bounds of the client against a hostile server (src/client/limits.ts): every answer has a size
 * limit and a nesting limit, every request a total deadline, and a stop cuts a written submit after
 * a short grace. Before, an answer was read whole into memory whatever its size, a 6,000-level answer
 * overflowed the stack, and a server dripping a byte at a time kept a request open for ever.
 */

const KEY = 'sk-limits-test-0123456789';
const FAST: RetryPolicy = { baseMs: 5, maxMs: 20, maxAttempts: 10 };
const MiB = 1024 * 1024;
const SUBMIT = { model: 'alpha-image-2', input: { prompt: 'a fox' } };

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

async function serve(handle: FakeHandler): Promise<FakeService> {
  const s = await startFakeService(handle);
  closers.push(() => s.close());
  return s;
}
function client(base: string, timeouts: ConstructorParameters<typeof ServiceClient>[0]['timeouts'] = {}): ServiceClient {
  const c = new ServiceClient({ baseUrl: base, apiKey: KEY, policy: FAST, timeouts });
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

describe('answer size limit', () => {
  it('stops reading a 200 MB status answer at 16 MiB, asks again only a few times, and names the limit', async () => {
    const written: number[] = [];
    const s = await serve((_req, _body, res) => hugeStatus(res, 't-1', 200 * MiB, { onEnd: (n) => written.push(n) }));
    const err = await rejection(client(s.base).status('t-1'));
    expect(err).toBeInstanceOf(UnusableAnswerError);
    expect((err as Error).message).toBe('GET /api/generate/status/t-1: the answer is over the limit of 16 MiB (reading stopped at 16 MiB)');
    await expect.poll(() => written.length).toBe(UNUSABLE_TRIES);
    // The server could write what the socket buffers hold past the limit, never the whole answer.
    for (const n of written) expect(n).toBeLessThan(ANSWER_MAX_BYTES.status + 16 * MiB);
  }, 30_000);

  it('refuses an answer whose Content-Length is over the limit without reading it', async () => {
    let calls = 0;
    const s = await serve((_req, _body, res) => {
      calls++;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 2 * MiB });
      res.write('{"code":200,');
    });
    const err = await rejection(client(s.base).balance());
    expect(err).toBeInstanceOf(UnusableAnswerError);
    expect((err as Error).message).toBe('GET /api/user/balance: the answer is over the limit of 1 MiB (Content-Length 2097152)');
    expect(calls).toBe(UNUSABLE_TRIES);
  });

  it('keeps the status of an error answer over the limit, so it is decided as before (a 400 is not retried)', async () => {
    let calls = 0;
    const s = await serve((_req, _body, res) => {
      calls++;
      hugeStatus(res, 't-1', 64 * MiB, { status: 400 });
    });
    const err = await rejection(client(s.base).status('t-1'));
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    expect((err as Error).message).toMatch(/over the limit of 16 MiB/);
    expect(calls).toBe(1);
  }, 30_000);

  it('makes a submit whose answer is over the limit uncertain (a task may exist), never sent again', async () => {
    let calls = 0;
    const s = await serve((_req, _body, res) => {
      calls++;
      hugeStatus(res, 't-1', 8 * MiB);
    });
    const err = await rejection(client(s.base).submit(SUBMIT));
    expect(err).toBeInstanceOf(AmbiguousSubmitError);
    expect((err as Error).message).toMatch(/the answer is over the limit of 1 MiB/);
    expect(calls).toBe(1);
  });
});

describe('answer nesting limit', () => {
  it('refuses a status answer nested 10,000 levels deep without overflowing the stack', async () => {
    let calls = 0;
    const s = await serve((_req, _body, res) => {
      calls++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(nestedStatus('t-1', 10_000));
    });
    const err = await rejection(client(s.base).status('t-1'));
    expect(err).toBeInstanceOf(UnusableAnswerError);
    expect((err as Error).message).toBe(`GET /api/generate/status/t-1: the answer is nested deeper than ${MAX_DEPTH} levels (reading stopped)`);
    expect(calls).toBe(UNUSABLE_TRIES);
  });

  it('reads an answer nested as deep as the limit allows, brackets inside strings not counted', async () => {
    const deep = MAX_DEPTH - 3; // envelope, data and metadata are three levels
    const s = await serve((_req, _body, res) => {
      const body = nestedStatus('t-1', deep).replace('"status"', '"note":"[[[[{{{{\\"[[[","status"');
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
    const task = await client(s.base).status('t-1');
    expect(task.status).toBe('running');
  });
});

describe('request deadline', () => {
  it('cuts a status answer dripped one byte at a time at the deadline (retried, then a NetworkError naming it)', async () => {
    let calls = 0;
    const s = await serve((_req, _body, res) => {
      calls++;
      drip(res, nestedStatus('t-1', 1), 50);
    });
    const c = new ServiceClient({ baseUrl: s.base, apiKey: KEY, policy: { baseMs: 5, maxMs: 5, maxAttempts: 2 }, timeouts: { requestMs: 300 } });
    closers.push(() => c.close());
    const t0 = performance.now();
    const err = await rejection(c.status('t-1'));
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as Error).message).toBe('GET /api/generate/status/t-1: no complete answer within 0.3 s (the request deadline)');
    expect(calls).toBe(2);
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it('makes a dripped submit uncertain at the deadline', async () => {
    const s = await serve((_req, _body, res) => drip(res, JSON.stringify(submitted('t-1')), 100));
    const err = await rejection(client(s.base, { requestMs: 300 }).submit(SUBMIT));
    expect(err).toBeInstanceOf(AmbiguousSubmitError);
    expect((err as Error).message).toMatch(/no complete answer within 0\.3 s \(the request deadline\)/);
  });

  it('after a stop, waits a written submit (keepIfSent) the grace only, then cuts it: uncertain', async () => {
    let arrived!: () => void;
    const sent = new Promise<void>((r) => (arrived = r));
    const s = await serve((_req, _body, res) => {
      arrived();
      drip(res, JSON.stringify(submitted('t-1')), 100);
    });
    const stop = new AbortController();
    const p = rejection(client(s.base, { stopGraceMs: 300 }).submit(SUBMIT, { signal: stop.signal, keepIfSent: true }));
    await sent;
    const t0 = performance.now();
    stop.abort('SIGINT');
    const err = await p;
    expect(err).toBeInstanceOf(AmbiguousSubmitError);
    expect((err as Error).message).toMatch(/no answer 0\.3 s after the run was stopped \(request cut\)/);
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it('after a stop, still records a written submit whose answer comes within the grace', async () => {
    let arrived!: () => void;
    const sent = new Promise<void>((r) => (arrived = r));
    let answer!: () => void;
    const s = await serve((_req, _body, res) => {
      arrived();
      answer = () => json(res, 200, submitted('t-7'));
    });
    const stop = new AbortController();
    const p = client(s.base, { stopGraceMs: 10_000 }).submit(SUBMIT, { signal: stop.signal, keepIfSent: true });
    await sent;
    stop.abort('SIGINT');
    answer();
    expect((await p).task_id).toBe('t-7');
  });
});

describe('upload deadline', () => {
  it('gives an upload the request deadline plus the time to send its bytes at 32 KiB/s', async () => {
    const s = await serve((_req, _body, res) => {
      setTimeout(() => json(res, 200, { code: 200, data: { file_url: 'https://files.example/u/ref.png', file_name: 'ref.png', file_size: 65536 } }), 800);
    });
    // 0.3 s + 64 KiB at 32 KiB/s = 2.3 s: an answer after 0.8 s is in time (a status read would be cut at 0.3 s).
    const record = await client(s.base, { requestMs: 300 }).uploadStream(Buffer.alloc(64 * 1024, 1), { fileName: 'ref.png' });
    expect(record.file_url).toBe('https://files.example/u/ref.png');
    const err = await rejection(client(s.base, { requestMs: 300 }).status('t-1'));
    expect((err as Error).message).toMatch(/no complete answer within 0\.3 s/);
  });
});

describe('chat answers', () => {
  const REQ = { model: 'gpt-4o-mini', protocol: 'chat-completions' as const, messages: [{ role: 'user', content: 'hi' }], options: {} };

  it('stops reading a stream event over its limit', async () => {
    let calls = 0;
    const s = await serve((_req, _body, res) => {
      calls++;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"choices":[{"delta":{"content":"');
      const block = Buffer.alloc(MiB, 'x');
      const pump = (): void => {
        while (!res.destroyed) if (!res.write(block)) return void res.once('drain', pump);
      };
      pump();
    });
    const c = new ChatClient({ baseUrl: s.base, apiKey: KEY, policy: FAST });
    closers.push(() => c.close());
    const err = await rejection(c.call({ ...REQ, stream: true }));
    expect(err).toBeInstanceOf(UnusableAnswerError);
    expect((err as Error).message).toBe('chat chat-completions gpt-4o-mini: a stream event is over the limit of 4 MiB (reading stopped)');
    expect(calls).toBe(UNUSABLE_TRIES);
  }, 30_000);

  it('refuses a chat answer nested too deep', async () => {
    const s = await serve((_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(`{"choices":[{"message":{"content":"x"}}],"extra":${'['.repeat(10_000)}${']'.repeat(10_000)}}`);
    });
    const c = new ChatClient({ baseUrl: s.base, apiKey: KEY, policy: FAST });
    closers.push(() => c.close());
    const err = await rejection(c.call({ ...REQ, stream: false }));
    expect(err).toBeInstanceOf(UnusableAnswerError);
    expect((err as Error).message).toMatch(/nested deeper than 256 levels/);
  });

  it('cuts a dripped chat answer at its deadline', async () => {
    const s = await serve((_req, _body, res) => drip(res, '{"choices":[{"message":{"content":"slow"}}]}', 50));
    const c = new ChatClient({ baseUrl: s.base, apiKey: KEY, policy: { baseMs: 5, maxMs: 5, maxAttempts: 1 }, timeouts: { requestMs: 300 } });
    closers.push(() => c.close());
    const err = await rejection(c.call({ ...REQ, stream: false }));
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as Error).message).toBe('chat chat-completions gpt-4o-mini: no complete answer within 0.3 s (the request deadline)');
  });
});
