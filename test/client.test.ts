import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceClient, UploadLimiter, type RetryPolicy } from '../src/client/index.js';
import { AmbiguousSubmitError, ApiError, BadResponseError, NetworkError } from '../src/errors.js';
import { drop, freePort, json, ok, scripted, slow, task, type Scripted } from './client.server.js';

const CANARY = 'sk-CANARY-9f2d7c41e0b3';
const FAST: RetryPolicy = { baseMs: 5, maxMs: 40, maxAttempts: 4 };

const servers: Scripted[] = [];
const clients: ServiceClient[] = [];
const seenErrors: unknown[] = [];

async function serve(...args: Parameters<typeof scripted>): Promise<Scripted> {
  const s = await scripted(...args);
  servers.push(s);
  return s;
}
function client(url: string, over: Partial<ConstructorParameters<typeof ServiceClient>[0]> = {}): ServiceClient {
  const c = new ServiceClient({ baseUrl: url, apiKey: CANARY, policy: FAST, ...over });
  clients.push(c);
  return c;
}
/** The rejection of `p`, kept for the canary check at the end. */
async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    seenErrors.push(err);
    return err;
  }
  throw new Error('expected a rejection');
}

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const SUBMIT = { model: 'alpha-image-2', input: { prompt: 'a fox' } };
const SUBMITTED = { task_id: 'task-9', status: 'not_started', created_time: '2026-11-21T10:00:00' };
const serverError = (status: number) => json(status, { code: status, error: { message: 'boom', type: 'internal_error' } });

describe('a status answer about another task', () => {
  it('is not taken as the task asked about: a BadResponseError naming both ids (its results would go to the wrong job)', async () => {
    const s = await serve([ok(task({ task_id: 't-other' }))]);
    const err = await failure(client(s.url).status('t-1'));
    expect(err).toBeInstanceOf(BadResponseError);
    expect((err as Error).message).toBe('status: the answer is about task t-other, not t-1');
  });

  it('is not taken from the music detail endpoint either', async () => {
    const s = await serve([ok(task({ task_id: 't-other', files: [] }))]);
    const err = await failure(client(s.url).musicDetail('t-1'));
    expect(err).toBeInstanceOf(BadResponseError);
    expect((err as Error).message).toContain('is about task t-other, not t-1');
  });
});

describe('GET retries', () => {
  it('retries a dropped connection, then a 500, then succeeds', async () => {
    const s = await serve([drop, serverError(500), ok(task())]);
    const t = await client(s.url).status('t-1');
    expect(t.status).toBe('finished');
    expect(s.calls).toHaveLength(3);
    expect(s.calls[2]?.headers.authorization).toBe(`Bearer ${CANARY}`);
  });

  it.each([429, 502, 503, 504])('retries a %i', async (status) => {
    const s = await serve([serverError(status), ok(task())]);
    await client(s.url).status('t-1');
    expect(s.calls).toHaveLength(2);
  });

  it('gives up after maxAttempts and throws the last error', async () => {
    const s = await serve([serverError(502)]);
    const err = await failure(client(s.url).status('t-1'));
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(502);
    expect(s.calls).toHaveLength(FAST.maxAttempts);
  });

  it('does not retry a 404 and reads the {detail} body', async () => {
    const s = await serve([json(404, { detail: 'task t-x not found' })]);
    const err = await failure(client(s.url).status('t-x'));
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 404, type: null, code: 'GB_API_REJECTED' });
    expect((err as ApiError).message).toContain('task t-x not found');
    expect(s.calls).toHaveLength(1);
  });

  it('retries a reply slower than the headers timeout', async () => {
    const s = await serve([slow(2_000, ok(task())), ok(task({ task_id: 't-2' }))]);
    const t = await client(s.url, { timeouts: { headersMs: 150 } }).status('t-2');
    expect(t.task_id).toBe('t-2');
    expect(s.calls).toHaveLength(2);
  });
});

describe('submit (POST) retries only when nothing can have been created', () => {
  it('sends the body and returns the parsed answer', async () => {
    const s = await serve([ok(SUBMITTED)]);
    const r = await client(s.url).submit({ ...SUBMIT, callback_url: 'https://cb.example/x' });
    expect(r).toEqual(SUBMITTED);
    expect(s.calls[0]?.method).toBe('POST');
    expect(s.calls[0]?.url).toBe('/api/generate/submit');
    expect(JSON.parse(s.calls[0]?.body.toString() ?? '')).toEqual({ ...SUBMIT, callback_url: 'https://cb.example/x' });
  });

  it('retries a 429', async () => {
    const s = await serve([json(429, { code: 429, error: { message: 'slow down', type: 'rate_limit_error' } }), ok(SUBMITTED)]);
    await client(s.url).submit(SUBMIT);
    expect(s.calls).toHaveLength(2);
  });

  it('retries a 503 (service unavailable: nothing created)', async () => {
    const s = await serve([serverError(503), ok(SUBMITTED)]);
    await client(s.url).submit(SUBMIT);
    expect(s.calls).toHaveLength(2);
  });

  it('retries a refused connection (the request was never sent)', async () => {
    const port = await freePort();
    let started: Promise<Scripted> | undefined;
    const c = client(`http://127.0.0.1:${port}`, {
      onRetry: (info) => {
        expect(info.error).toBeInstanceOf(NetworkError);
        expect((info.error as NetworkError).sent).toBe(false);
        started ??= serve([ok(SUBMITTED)], port);
      },
      policy: { baseMs: 100, maxMs: 100, maxAttempts: 5 },
    });
    const r = await c.submit(SUBMIT);
    expect(r.task_id).toBe('task-9');
    expect((await started)?.calls).toHaveLength(1);
  });

  it('a refused connection every time ends in NetworkError(sent=false), not uncertain', async () => {
    const port = await freePort();
    const err = await failure(client(`http://127.0.0.1:${port}`).submit(SUBMIT));
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as NetworkError).sent).toBe(false);
  });

  it.each([500, 502, 504])('does not retry a %i: AmbiguousSubmitError', async (status) => {
    const s = await serve([serverError(status), ok(SUBMITTED)]);
    const err = await failure(client(s.url).submit(SUBMIT));
    expect(err).toBeInstanceOf(AmbiguousSubmitError);
    expect(err).toMatchObject({ code: 'GB_SUBMIT_UNCERTAIN', status, exitCode: 4 });
    expect(s.calls).toHaveLength(1);
  });

  it('does not retry a connection dropped after sending', async () => {
    const s = await serve([drop, ok(SUBMITTED)]);
    const err = await failure(client(s.url).submit(SUBMIT));
    expect(err).toBeInstanceOf(AmbiguousSubmitError);
    expect((err as AmbiguousSubmitError).cause).toBeInstanceOf(NetworkError);
    expect(((err as AmbiguousSubmitError).cause as NetworkError).sent).toBe(true);
    expect(s.calls).toHaveLength(1);
  });

  it('does not retry a timeout after sending', async () => {
    const s = await serve([slow(2_000, ok(SUBMITTED)), ok(SUBMITTED)]);
    const err = await failure(client(s.url, { timeouts: { headersMs: 150 } }).submit(SUBMIT));
    expect(err).toBeInstanceOf(AmbiguousSubmitError);
    expect(s.calls).toHaveLength(1);
  });

  it('a 200 whose body cannot be read as a submit answer is uncertain (the task may exist)', async () => {
    const s = await serve([ok({ status: 'running' })]);
    const err = await failure(client(s.url).submit(SUBMIT));
    expect(err).toBeInstanceOf(AmbiguousSubmitError);
    expect((err as AmbiguousSubmitError).cause).toBeInstanceOf(BadResponseError);
    expect(s.calls).toHaveLength(1);
  });

  it('a 400 is permanent and carries the {code, error} body', async () => {
    const s = await serve([json(400, { code: 400, error: { message: 'input.size: not allowed', type: 'validation_error' } })]);
    const err = await failure(client(s.url).submit(SUBMIT));
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 400, type: 'validation_error' });
    expect((err as ApiError).message).toContain('input.size: not allowed');
    expect(s.calls).toHaveLength(1);
  });

  it('an abort while the submit is in flight is uncertain, not silently dropped', async () => {
    const s = await serve([slow(5_000, ok(SUBMITTED))]);
    const ac = new AbortController();
    const p = client(s.url).submit(SUBMIT, { signal: ac.signal });
    while (s.calls.length === 0) await new Promise((r) => setTimeout(r, 5));
    ac.abort(new Error('stopping'));
    expect(await failure(p)).toBeInstanceOf(AmbiguousSubmitError);
  });

  it('keepIfSent: an abort while the submit is in flight waits for its answer (the task id), and an abort before the next try stops the retries', async () => {
    const s = await serve([slow(300, ok(SUBMITTED))]);
    const ac = new AbortController();
    const p = client(s.url).submit(SUBMIT, { signal: ac.signal, keepIfSent: true });
    while (s.calls.length === 0) await new Promise((r) => setTimeout(r, 5));
    ac.abort(new Error('stopping'));
    expect((await p).task_id).toBe('task-9');
    // A 429 then a stop during the backoff: nothing was created, the reason is thrown, no second POST.
    const t = await serve([json(429, { detail: 'later' }, { 'retry-after': '5' }), ok(SUBMITTED)]);
    const ac2 = new AbortController();
    const q = client(t.url, { policy: { baseMs: 5, maxMs: 5_000, maxAttempts: 3 } }).submit(SUBMIT, { signal: ac2.signal, keepIfSent: true });
    while (t.calls.length === 0) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 50));
    const reason = new Error('stopping');
    ac2.abort(reason);
    expect(await failure(q)).toBe(reason);
    expect(t.calls).toHaveLength(1);
  });
});

describe('Retry-After', () => {
  it('is honoured in seconds', async () => {
    const s = await serve([json(429, { detail: 'rate limited' }, { 'retry-after': '1' }), ok(task())]);
    const delays: number[] = [];
    await client(s.url, { policy: { baseMs: 5, maxMs: 5_000, maxAttempts: 3 }, onRetry: (i) => delays.push(i.delayMs) }).status('t-1');
    expect(delays).toEqual([1000]);
    expect((s.calls[1]?.at ?? 0) - (s.calls[0]?.at ?? 0)).toBeGreaterThanOrEqual(950);
  });

  it('is capped at maxMs', async () => {
    const s = await serve([json(429, { detail: 'later' }, { 'retry-after': '3600' }), ok(task())]);
    const delays: number[] = [];
    await client(s.url, { onRetry: (i) => delays.push(i.delayMs) }).status('t-1');
    expect(delays).toEqual([FAST.maxMs]);
  });

  it('reads an HTTP date', async () => {
    const s = await serve([json(503, { detail: 'later' }, { 'retry-after': new Date(Date.now() + 3_600_000).toUTCString() }), ok(task())]);
    const err = await failure(client(s.url, { policy: { ...FAST, maxAttempts: 1 } }).status('t-1'));
    expect((err as ApiError).retryAfterMs).toBeGreaterThan(3_500_000);
  });

  it('an abort during a long wait rejects at once with the reason (signal passed directly)', async () => {
    const s = await serve([json(429, { detail: 'later' }, { 'retry-after': '60' })]);
    const ac = new AbortController();
    const reason = new Error('runner stopping');
    const p = client(s.url, { policy: { baseMs: 5, maxMs: 60_000, maxAttempts: 3 }, onRetry: () => setTimeout(() => ac.abort(reason), 10) }).status('t-1', ac.signal);
    expect(await failure(p)).toBe(reason);
  });
});

describe('answers are parsed, never cast', () => {
  it('rejects a task with an unknown status, naming the field', async () => {
    const s = await serve([ok(task({ status: 'exploded' }))]);
    const err = await failure(client(s.url).status('t-1'));
    expect(err).toBeInstanceOf(BadResponseError);
    expect((err as BadResponseError).message).toContain('status');
    expect(s.calls).toHaveLength(1);
  });

  it('rejects a file entry without file_url', async () => {
    const s = await serve([ok(task({ files: [{ file_type: 'image' }] }))]);
    const err = await failure(client(s.url).status('t-1'));
    expect((err as BadResponseError).message).toContain('files[0].file_url');
  });

  it('rejects a body that is not JSON', async () => {
    const s = await serve([json(200, '<html>oops</html>')]);
    expect(await failure(client(s.url).status('t-1'))).toBeInstanceOf(BadResponseError);
  });

  it('keeps metadata and unknown file fields, and every file', async () => {
    const files = [
      { file_url: 'http://x/a.mp3', file_type: 'audio', metadata: { bpm: 120 }, extra: 'kept' },
      { file_url: 'http://x/a.lrc', file_type: 'lyrics', file_size: 12 },
    ];
    const s = await serve([ok(task({ files }))]);
    const t = await client(s.url).status('t-1');
    expect(t.files).toEqual(files);
    expect(t.error_message).toBeNull();
  });

  it('reads music detail entries keyed by workflow, without file_url', async () => {
    const files = [{ audio_id: 'a1', audio_url: 'http://x/1.mp3', title: 'Song', duration: 181.5, stem_split: '{"bass_url":"http://x/b.mp3"}' }];
    const s = await serve([ok({ task_id: 'm 1', status: 'finished', files, created_time: '2026-11-21T10:00:00', error_message: null })]);
    const t = await client(s.url).musicDetail('m 1');
    expect(t.files).toEqual(files);
    expect(t.progress).toBeUndefined();
    expect(s.calls[0]?.url).toBe('/api/generate/detail/music?task_id=m%201');
  });

  it('reads a missing or null files list as empty', async () => {
    const s = await serve([ok(task({ status: 'running', files: null, progress: 40 })), ok({ task_id: 't-1', status: 'not_started', created_time: 'x' })]);
    expect((await client(s.url).status('t-1')).files).toEqual([]);
    expect((await client(s.url).status('t-1')).files).toEqual([]);
  });

  it('a 200 carrying an error envelope is an ApiError', async () => {
    const s = await serve([json(200, { code: 402, error: { message: 'not enough credits', type: 'insufficient_credits_error' } })]);
    const err = await failure(client(s.url).submit(SUBMIT));
    expect(err).toMatchObject({ status: 402, code: 'GB_API_INSUFFICIENT_CREDITS' });
  });
});

describe('balance', () => {
  it.each([
    [{ code: 200, data: 1000 }, 1000],
    [{ code: 200, data: { balance: 12.5 } }, 12.5],
    [{ code: 200, data: { credits: 7, used: 3 } }, 7],
    [{ code: 200, data: { account: 'me', amount_left: '44' } }, 44],
  ])('reads %j', async (body, expected) => {
    const s = await serve([json(200, body)]);
    expect(await client(s.url).balance()).toBe(expected);
    expect(s.calls[0]?.url).toBe('/api/user/balance');
  });

  // A numeric string of 400 digits is Infinity as a number: read as a balance, it printed "Infinity credits" and charged NaN.
  const huge = '9'.repeat(400);
  it.each([{ code: 200, data: { a: 1, b: 2 } }, { code: 200, data: 'lots' }, { code: 200, data: { note: 'x' } }, { code: 200, data: huge }, { code: 200, data: { balance: huge } }])('rejects %j with a clear error', async (body) => {
    const s = await serve([json(200, body)]);
    const err = await failure(client(s.url).balance());
    expect(err).toBeInstanceOf(BadResponseError);
    expect((err as Error).message).toMatch(/^balance: /);
  });
});

describe('uploads', () => {
  const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5b1f0a50000000049454e44ae426082', 'hex');
  const record = { file_url: 'https://files.example/temp/a.png', download_url: 'https://files.example/temp/a.png' };

  it('keeps 5 per window by waiting: the 6th waits and no 429 comes', async () => {
    const windowMs = 300;
    const ends: number[] = [];
    const s = await serve((n, call) => {
      // The server enforces the limit on arrival, as the service does.
      const recent = s.calls.slice(0, n).filter((c) => call.at - c.at < windowMs);
      return recent.length >= 5 ? json(429, { code: 429, error: { message: 'rate limit exceeded', type: 'rate_limit_error' } }) : ok(record);
    });
    const c = client(s.url, { uploadLimiter: new UploadLimiter({ limit: 5, windowMs }), policy: { ...FAST, maxAttempts: 1 } });
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => c.uploadBase64(`data:image/png;base64,${PNG.toString('base64')}`, { fileName: `f${i}.png` }).then((r) => (ends.push(performance.now()), r))));
    expect(results.every((r) => r.file_url === record.file_url)).toBe(true);
    expect(s.calls).toHaveLength(6);
    const sixth = s.calls[5]?.at ?? 0;
    expect(sixth - (s.calls[0]?.at ?? 0)).toBeGreaterThanOrEqual(windowMs);
    expect(JSON.parse(s.calls[0]?.body.toString() ?? '')).toMatchObject({ base64_data: expect.stringMatching(/^data:image\/png;base64,/), file_name: 'f0.png' });
  });

  it('takes a shared upload slot before every try and ends it after, with the outcome: a 429 with its Retry-After', async () => {
    const s = await serve([json(429, { code: 429, error: { message: 'rate limit exceeded', type: 'rate_limit_error' } }, { 'retry-after': '3600' }), serverError(503), ok(record)]);
    const seen: string[] = [];
    const slot = async () => {
      seen.push(`take before call ${s.calls.length + 1}`);
      return async (o: { rateLimited: boolean; retryAfterMs: number | null }) => {
        seen.push(`end after call ${s.calls.length}: rate limited ${o.rateLimited}, retry after ${o.retryAfterMs}`);
      };
    };
    const r = await client(s.url).uploadBase64(`data:image/png;base64,${PNG.toString('base64')}`, { slot });
    expect(r).toEqual(record);
    expect(seen).toEqual([
      'take before call 1',
      'end after call 1: rate limited true, retry after 3600000',
      'take before call 2',
      'end after call 2: rate limited false, retry after null',
      'take before call 3',
      'end after call 3: rate limited false, retry after null',
    ]);
  });

  it('streams a file as multipart with file, file_name and upload_path', async () => {
    const s = await serve([ok(record)]);
    const r = await client(s.url).uploadStream(PNG, { fileName: 'ref.png', uploadPath: 'jobs/a' });
    expect(r).toEqual(record);
    const call = s.calls[0];
    expect(call?.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    const text = call?.body.toString('latin1') ?? '';
    expect(text).toContain('name="file"; filename="ref.png"');
    expect(text).toContain('name="upload_path"');
    expect(call?.body.includes(PNG)).toBe(true);
  });

  it('sends uploadUrl as {file_url, upload_path}', async () => {
    const s = await serve([ok(record)]);
    await client(s.url).uploadUrl('https://img.example/a.png', { uploadPath: 'x' });
    expect(JSON.parse(s.calls[0]?.body.toString() ?? '')).toEqual({ file_url: 'https://img.example/a.png', upload_path: 'x' });
  });

  it('a missing local file is a clear error and sends nothing', async () => {
    const s = await serve([ok(record)]);
    const err = await failure(client(s.url).uploadStream('/nonexistent/dir/ref.png'));
    expect((err as Error).message).toContain('/nonexistent/dir/ref.png cannot be read (ENOENT)');
    expect(s.calls).toHaveLength(0);
  });

  it('an abort while waiting for an upload slot rejects with the reason', async () => {
    const s = await serve([ok(record)]);
    const c = client(s.url, { uploadLimiter: new UploadLimiter({ limit: 1, windowMs: 60_000 }) });
    await c.uploadUrl('https://img.example/a.png');
    const ac = new AbortController();
    const p = c.uploadUrl('https://img.example/b.png', { signal: ac.signal });
    const reason = new Error('stopping');
    setTimeout(() => ac.abort(reason), 20);
    expect(await failure(p)).toBe(reason);
    expect(s.calls).toHaveLength(1);
  });

  it('retries an upload like a GET: 429, 500, 502 and a dropped connection, then the answer', async () => {
    const s = await serve([json(429, { detail: 'rate' }), ok(record)]);
    await client(s.url).uploadUrl('https://img.example/a.png');
    expect(s.calls).toHaveLength(2);
    const s2 = await serve([serverError(500), serverError(502), drop, ok(record)]);
    const r = await client(s2.url).uploadStream(PNG, { fileName: 'ref.png' });
    expect(r).toEqual(record);
    expect(s2.calls).toHaveLength(4);
    // The multipart body is built again for each try: the last one carries the whole file.
    expect(s2.calls[3]?.body.includes(PNG)).toBe(true);
  });

  it('an upload 500 on every try fails with the 500 once the tries are used up (never an uncertain submit)', async () => {
    const s = await serve([serverError(500)]);
    const err = await failure(client(s.url).uploadUrl('https://img.example/a.png'));
    expect(err).toMatchObject({ status: 500 });
    expect(err).not.toBeInstanceOf(AmbiguousSubmitError);
    expect(s.calls).toHaveLength(FAST.maxAttempts);
  });
});

describe('status rate cap', () => {
  it('spaces status requests from all callers to the cap', async () => {
    const s = await serve([ok(task())]);
    const c = client(s.url, { statusRatePerSec: 20 });
    const start = performance.now();
    await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? c.status('t-1') : c.musicDetail('t-1').catch(() => null))));
    expect(s.calls).toHaveLength(8);
    // 20/s with a burst of 1: the 8th request cannot start before 7 x 50 ms.
    expect((s.calls[7]?.at ?? 0) - start).toBeGreaterThanOrEqual(7 * 50 - 10);
  });
});

describe('the API key never leaks', () => {
  it('is redacted from an error body that echoes it', async () => {
    const s = await serve([(req, res) => json(401, { detail: `bad key ${req.headers.authorization}` })(req, res, s.calls[0] as never)]);
    const err = await failure(client(s.url).balance());
    expect((err as Error).message).toContain('[redacted]');
  });

  it('is redacted from an error envelope inside an HTTP 200 that echoes it (the key stays out of every error)', async () => {
    const s = await serve([(req, res) => json(200, { code: 401, error: { message: `invalid key ${req.headers.authorization}`, type: 'authentication_error' } })(req, res, s.calls[0] as never)]);
    const err = await failure(client(s.url).balance());
    expect(err).toBeInstanceOf(ApiError);
    expect((err as Error).message).toContain('[redacted]');
    expect((err as Error).message).not.toContain(CANARY);
  });

  it('is absent from every error seen in this file (message and inspect)', async () => {
    const port = await freePort();
    await failure(client(`http://127.0.0.1:${port}`, { policy: { ...FAST, maxAttempts: 1 } }).status('t'));
    expect(seenErrors.length).toBeGreaterThan(20);
    for (const err of seenErrors) {
      expect(String((err as Error).message)).not.toContain(CANARY);
      expect(inspect(err, { depth: 6 })).not.toContain(CANARY);
    }
    const c = client('http://127.0.0.1:1');
    expect(inspect(c, { depth: 6 })).not.toContain(CANARY);
    expect(JSON.stringify(c)).not.toContain(CANARY);
  });
});
