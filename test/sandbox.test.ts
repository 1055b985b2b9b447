import jpegJs from 'jpeg-js';
import { crc32 } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { keyHash, startSandbox, type Sandbox, type SandboxOptions } from '../src/sandbox/index.js';

const FLASH = 'vendora/dream-v5.0-flash/text-to-image';
const open: Sandbox[] = [];

async function sandbox(o: SandboxOptions = {}): Promise<Sandbox> {
  const sb = await startSandbox({ keys: { k1: 1000, k2: 10 }, timeScale: 0.001, seed: 7, ...o });
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
  if (body !== undefined) h['content-type'] = 'application/json';
  const res = await fetch(sb.url + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Json };
}

const submit = (sb: Sandbox, body: unknown, key: string | null = 'k1') => call(sb, 'POST', '/api/generate/submit', key, body);
const status = (sb: Sandbox, id: string, key: string | null = 'k1') => call(sb, 'GET', `/api/generate/status/${id}`, key);
const balance = async (sb: Sandbox, key = 'k1') => (await call(sb, 'GET', '/api/user/balance', key)).body.data.balance as number;

describe('sandbox auth', () => {
  it('refuses a missing or unknown key with 401 in each endpoint style', async () => {
    const sb = await sandbox();
    const a = await submit(sb, { model: FLASH, input: { prompt: 'p' } }, null);
    expect(a.status).toBe(401);
    expect(a.body).toEqual({ code: 401, error: { message: expect.stringContaining('missing API key'), type: 'authentication_error' } });
    const b = await submit(sb, { model: FLASH, input: { prompt: 'p' } }, 'nope');
    expect(b.status).toBe(401);
    expect(b.body.error.message).toBe('invalid API key');
    const c = await status(sb, 'x', 'nope');
    expect(c).toMatchObject({ status: 401, body: { detail: 'invalid API key' } });
    expect((await call(sb, 'GET', '/api/user/balance', null)).status).toBe(401);
  });

  it('accepts x-api-key and x-goog-api-key', async () => {
    const sb = await sandbox();
    for (const header of ['x-api-key', 'x-goog-api-key']) {
      const r = await call(sb, 'GET', '/api/user/balance', null, undefined, { [header]: 'k2' });
      expect(r).toMatchObject({ status: 200, body: { code: 200, data: { balance: 10 } } });
    }
  });

  it('answers 403 for another key\'s task and 404 for an unknown one, as {detail}', async () => {
    const sb = await sandbox();
    const id = (await submit(sb, { model: FLASH, input: { prompt: 'p' } })).body.data.task_id as string;
    expect(await status(sb, id, 'k2')).toMatchObject({ status: 403, body: { detail: expect.stringContaining('another user') } });
    expect(await status(sb, 'no-such-task')).toMatchObject({ status: 404, body: { detail: 'task no-such-task not found' } });
  });
});

describe('sandbox submit', () => {
  it('returns task_id, initial status and a zone-less created_time', async () => {
    const sb = await sandbox();
    const a = await submit(sb, { model: FLASH, input: { prompt: 'a red fox' } });
    expect(a.status).toBe(200);
    expect(a.body.code).toBe(200);
    expect(a.body.data).toEqual({ task_id: expect.stringMatching(/^[0-9a-f]{32}$/), status: 'running', created_time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$/) });
    const b = await submit(sb, { model: 'clip-2.3', input: { prompt: 'waves' } });
    expect(b.body.data.status).toBe('not_started');
  });

  it('rejects an unknown model, naming the field; never falls back', async () => {
    const sb = await sandbox();
    const r = await submit(sb, { model: 'dream-99', input: { prompt: 'p' } });
    expect(r).toMatchObject({ status: 400, body: { code: 400, error: { type: 'validation_error', message: 'model: unknown model "dream-99"' } } });
    expect(sb.stats().tasks_total).toBe(0);
  });

  it('names the field path of every validation problem', async () => {
    const sb = await sandbox();
    const r = await submit(sb, { model: FLASH, extra: 1, input: { size: '5:4' } });
    expect(r.status).toBe(400);
    expect(r.body.error.type).toBe('validation_error');
    expect(r.body.error.message).toContain('extra:');
    expect(r.body.error.message).toContain('input.prompt:');
    expect(r.body.error.message).toContain('input.size:');
    const notJson = await fetch(sb.url + '/api/generate/submit', { method: 'POST', headers: { authorization: 'Bearer k1', 'content-type': 'application/json' }, body: '{bad' });
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as Json).error.type).toBe('validation_error');
  });

  it('answers content_too_long_error, content_moderation_error and file_format_error', async () => {
    const sb = await sandbox({ bannedWords: ['forbidden', 'nasty'] });
    const long = await submit(sb, { model: FLASH, input: { prompt: 'x'.repeat(5001) } });
    expect(long).toMatchObject({ status: 400, body: { error: { type: 'content_too_long_error' } } });
    const mod = await submit(sb, { model: FLASH, input: { prompt: 'a Nasty fox' } });
    expect(mod).toMatchObject({ status: 400, body: { error: { type: 'content_moderation_error', message: expect.stringContaining('input.prompt') } } });
    expect((await submit(sb, { model: FLASH, input: { prompt: 'nastyish is fine' } })).status).toBe(200);
    const edit = 'vendora/dream-v5.0-flash/edit';
    const local = await submit(sb, { model: edit, input: { prompt: 'p', image_urls: ['./cat.png'] } });
    expect(local).toMatchObject({ status: 400, body: { error: { type: 'file_format_error', message: expect.stringContaining('input.image_urls[0]') } } });
    const text = await submit(sb, { model: edit, input: { prompt: 'p', image_urls: ['https://example.com/a.png', 'data:text/plain;base64,aGk='] } });
    expect(text.body.error).toMatchObject({ type: 'file_format_error', message: expect.stringContaining('input.image_urls[1]') });
    expect((await submit(sb, { model: edit, input: { prompt: 'p', image_urls: ['data:image/png;base64,iVBORw0KGgo='] } })).status).toBe(200);
  });

  it('uses {detail} for dream-5.0-lite validation and auth failures', async () => {
    const sb = await sandbox();
    expect(await submit(sb, { model: 'dream-5.0-lite', input: {} })).toMatchObject({ status: 400, body: { detail: expect.stringContaining('input.prompt') } });
    expect(await submit(sb, { model: 'dream-5.0-lite', input: { prompt: 'p' } }, null)).toMatchObject({ status: 401, body: { detail: expect.any(String) } });
  });

  it('refuses callback URLs that are not HTTPS, too long, or private', async () => {
    const sb = await sandbox();
    const cases = ['http://example.com/hook', `https://example.com/${'a'.repeat(2040)}`, 'https://10.1.2.3/hook', 'https://localhost/hook', 'https://169.254.169.254/x', 'https://[::1]/x', 'http://127.0.0.1:9/x'];
    for (const callback_url of cases) {
      const r = await submit(sb, { model: FLASH, callback_url, input: { prompt: 'p' } });
      expect(r.status, callback_url).toBe(400);
      expect(r.body.error.message).toMatch(/^callback_url: /);
    }
    expect((await submit(sb, { model: FLASH, callback_url: 'https://hooks.example.com/x', input: { prompt: 'p' } })).status).toBe(200);
  });

  it('answers 402 when the balance does not cover the price, and charges nothing', async () => {
    const sb = await sandbox();
    // k2 has 10 credits; dream-4 costs 4 per image (sandbox price) x n.
    const r = await submit(sb, { model: 'dream-4', input: { prompt: 'p', n: 3 } }, 'k2');
    expect(r).toMatchObject({ status: 402, body: { code: 402, error: { type: 'insufficient_credits_error' } } });
    expect(await balance(sb, 'k2')).toBe(10);
    expect((await submit(sb, { model: 'dream-4', input: { prompt: 'p', n: 2 } }, 'k2')).status).toBe(200);
    expect(await balance(sb, 'k2')).toBe(2);
  });
});

describe('sandbox lifecycle and files', () => {
  it('moves not_started -> running with rising progress -> finished with real files', async () => {
    const sb = await sandbox({ timeScale: 1 });
    const id = (await submit(sb, { model: 'clip-2.3', input: { prompt: 'waves', duration: 6 } })).body.data.task_id as string;
    const first = (await status(sb, id)).body.data;
    expect(first).toMatchObject({ task_id: id, status: 'not_started', files: [], progress: 0, error_message: null });
    let last = -1;
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) {
      sb.clock.advance(10);
      const d = (await status(sb, id)).body.data;
      seen.add(d.status);
      expect(d.progress).toBeGreaterThanOrEqual(last);
      last = d.progress;
      if (d.status === 'finished') break;
    }
    expect(seen.has('running')).toBe(true);
    const done = (await status(sb, id)).body.data;
    expect(done.status).toBe('finished');
    expect(done.progress).toBe(100);
    expect(done.files).toHaveLength(1);
    const f = done.files[0];
    expect(f).toMatchObject({ file_type: 'video', format: 'mp4', content_type: 'video/mp4', metadata: { duration: 6, width: 1360, height: 768 } });
    const res = await fetch(f.file_url);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(res.headers.get('content-type')).toBe('video/mp4');
    expect(bytes.length).toBe(f.file_size);
    expect(bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
  });

  it('serves images whose format follows output_format and aspect follows size', async () => {
    const sb = await sandbox();
    const png = (await submit(sb, { model: FLASH, input: { prompt: 'p', size: '16:9', output_format: 'png' } })).body.data.task_id as string;
    const jpg = (await submit(sb, { model: FLASH, input: { prompt: 'p', size: '3:4', output_format: 'jpeg' } })).body.data.task_id as string;
    sb.clock.advance(120);
    const a = (await status(sb, png)).body.data.files[0];
    expect(a).toMatchObject({ format: 'png', content_type: 'image/png', metadata: { width: 1024, height: 576 } });
    const pb = Buffer.from(await (await fetch(a.file_url)).arrayBuffer());
    expect(pb.length).toBe(a.file_size);
    expect(pb.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect([pb.readUInt32BE(16), pb.readUInt32BE(20)]).toEqual([a.metadata.served_width, a.metadata.served_height]);
    expect(a.metadata.served_width / a.metadata.served_height).toBeCloseTo(16 / 9, 1);
    const b = (await status(sb, jpg)).body.data.files[0];
    expect(b).toMatchObject({ format: 'jpeg', content_type: 'image/jpeg', file_name: expect.stringMatching(/\.jpg$/) });
    const jb = Buffer.from(await (await fetch(b.file_url)).arrayBuffer());
    expect(jb.length).toBe(b.file_size);
    const decoded = jpegJs.decode(jb);
    expect([decoded.width, decoded.height]).toEqual([b.metadata.served_width, b.metadata.served_height]);
    // Every PNG chunk (the sandbox's tEXt stamp included) has a correct CRC.
    for (let i = 8; i < pb.length; ) {
      const len = pb.readUInt32BE(i);
      expect(crc32(pb.subarray(i + 4, i + 8 + len)) >>> 0).toBe(pb.readUInt32BE(i + 8 + len));
      i += 12 + len;
    }
  });

  it('returns n files for n images; fewer with partialRate and refunds the rest', async () => {
    const sb = await sandbox({ partialRate: 1, timeScale: 1 });
    const before = await balance(sb);
    const id = (await submit(sb, { model: 'dream-4', input: { prompt: 'p', n: 4 } })).body.data.task_id as string;
    expect(await balance(sb)).toBe(before - 16);
    sb.clock.advance(120);
    const files = (await status(sb, id)).body.data.files as Json[];
    expect(files.length).toBeGreaterThanOrEqual(1);
    expect(files.length).toBeLessThan(4);
    expect(new Set(files.map((f) => f.file_url)).size).toBe(files.length);
    const bodies = await Promise.all(files.map(async (f) => Buffer.from(await (await fetch(f.file_url)).arrayBuffer()).toString('base64')));
    expect(new Set(bodies).size).toBe(files.length);
    expect(await balance(sb)).toBe(before - 4 * files.length);

    const full = await sandbox();
    const id2 = (await submit(full, { model: 'dream-4', input: { prompt: 'p', n: 3 } })).body.data.task_id as string;
    full.clock.advance(120);
    expect((await status(full, id2)).body.data.files).toHaveLength(3);
  });

  it('fails tasks at the failure rate with files [] and an error message, and refunds them', async () => {
    // Time scale 1: the task cannot fail (and be refunded) before the balance is read, however slow this machine is.
    const sb = await sandbox({ failureRate: 1, timeScale: 1 });
    const id = (await submit(sb, { model: FLASH, input: { prompt: 'p' } })).body.data.task_id as string;
    expect(await balance(sb)).toBe(996);
    sb.clock.advance(120);
    const d = (await status(sb, id)).body.data;
    expect(d).toMatchObject({ status: 'failed', files: [], error_message: expect.stringContaining('failed') });
    expect(d.progress).toBeLessThan(100);
    expect(await balance(sb)).toBe(1000);
  });

  it('fails a task whose input holds a policy word with a content-policy error_message, refunded', async () => {
    const sb = await sandbox({ policyWords: ['withheld-word'], timeScale: 1 });
    const id = (await submit(sb, { model: FLASH, input: { prompt: 'a withheld-word fox' } })).body.data.task_id as string;
    expect(await balance(sb)).toBe(996);
    sb.clock.advance(120);
    expect((await status(sb, id)).body.data).toMatchObject({ status: 'failed', files: [], error_message: expect.stringContaining('content policy') });
    expect(await balance(sb)).toBe(1000);
  });

  it('expires files 24 hours after the task finished (410), and 404s unknown files', async () => {
    const sb = await sandbox();
    const id = (await submit(sb, { model: FLASH, input: { prompt: 'p' } })).body.data.task_id as string;
    sb.clock.advance(120);
    const url = (await status(sb, id)).body.data.files[0].file_url as string;
    expect((await fetch(url)).status).toBe(200);
    sb.clock.advance(23 * 3600);
    expect((await fetch(url)).status).toBe(200);
    const clock = await call(sb, 'POST', '/__sandbox/clock', null, { advance_s: 3600 });
    expect(clock.body.advanced_s).toBe(120 + 24 * 3600);
    const gone = await fetch(url);
    expect(gone.status).toBe(410);
    expect(((await gone.json()) as Json).error.type).toBe('resource_not_found_error');
    expect((await fetch(`${sb.url}/files/${id}/nope.png`)).status).toBe(404);
  });

  it('serves music tasks at the music detail endpoint, and only music tasks', async () => {
    const sb = await sandbox();
    const music = (await submit(sb, { model: 'generate-music', input: { custom_mode: false, prompt: 'a calm song', mv: 'V4' } })).body.data.task_id as string;
    const image = (await submit(sb, { model: FLASH, input: { prompt: 'p' } })).body.data.task_id as string;
    sb.clock.advance(600);
    const d = await call(sb, 'GET', `/api/generate/detail/music?task_id=${music}`, 'k1');
    expect(d.status).toBe(200);
    expect(d.body.data).toMatchObject({ task_id: music, status: 'finished' });
    expect(d.body.data.files.length).toBeGreaterThanOrEqual(1);
    expect(await call(sb, 'GET', `/api/generate/detail/music?task_id=${image}`, 'k1')).toMatchObject({ status: 404, body: { detail: expect.stringContaining('not a music task') } });
    expect(await call(sb, 'GET', `/api/generate/detail/music?task_id=${music}`, 'k2')).toMatchObject({ status: 403 });
    expect(await call(sb, 'GET', '/api/generate/detail/music', 'k1')).toMatchObject({ status: 400, body: { detail: expect.stringContaining('task_id') } });
  });

  it('replays the same ids and timings for the same seed', async () => {
    const runs: Json[] = [];
    for (let i = 0; i < 2; i++) {
      const sb = await sandbox({ seed: 42, timeScale: 1, clockStart: Date.UTC(2026, 0, 1), failureRate: 0.5 });
      const ids: string[] = [];
      for (let j = 0; j < 5; j++) ids.push((await submit(sb, { model: FLASH, input: { prompt: `p${j}` } })).body.data.task_id);
      sb.clock.advance(40);
      const states = [];
      for (const id of ids) states.push((await status(sb, id)).body.data.status);
      runs.push({ ids, states });
    }
    expect(runs[0]).toEqual(runs[1]);
  });
});

describe('sandbox admin', () => {
  it('counts requests, tasks per key and states, and lists tasks by key hash', async () => {
    const sb = await sandbox();
    await submit(sb, { model: FLASH, input: { prompt: 'p' } });
    await submit(sb, { model: FLASH, input: { prompt: 'p' } }, 'k2');
    await balance(sb);
    const s = (await call(sb, 'GET', '/__sandbox/stats', null, undefined, { 'x-sandbox-admin-token': sb.adminToken })).body;
    expect(s.requests).toMatchObject({ submit: 2, balance: 1 });
    expect(s.tasks_created_by_key).toEqual({ [keyHash('k1')]: 1, [keyHash('k2')]: 1 });
    expect(s.requests_by_key[keyHash('k1')]).toBe(2);
    expect(s.tasks_by_state.running + s.tasks_by_state.finished).toBe(2);
    const list = (await call(sb, 'GET', `/__sandbox/tasks?key=${keyHash('k2')}`, null, undefined, { 'x-sandbox-admin-token': sb.adminToken })).body.tasks as Json[];
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ model: FLASH, key: keyHash('k2'), callback_url: null });
    expect(JSON.stringify(s)).not.toContain('"k1"');
  });

  it('answers a contract-shaped 404 on unknown paths', async () => {
    const sb = await sandbox();
    expect(await call(sb, 'GET', '/nope', 'k1')).toMatchObject({ status: 404, body: { error: { type: 'resource_not_found_error' } } });
  });
});
