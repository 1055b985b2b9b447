import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startSandbox, type Sandbox, type SandboxOptions } from '../src/sandbox/index.js';

/** Divergences from the contract found by the sandbox review (review-sandbox branch), one describe each. */

const open: Array<{ close(): unknown }> = [];

async function sandbox(o: SandboxOptions = {}): Promise<Sandbox> {
  const sb = await startSandbox({ port: 0, keys: { k1: 100000 }, timeScale: 0.0001, seed: 13, ...o });
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

/** A finished generate-music task of k1: its id and first track. */
async function track(sb: Sandbox): Promise<{ task_id: string; audio_id: string }> {
  const s = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: 'generate-music', input: { custom_mode: false, prompt: 'a calm song about rain' } });
  expect(s.status).toBe(200);
  sb.clock.advance(200);
  const d = await call(sb, 'GET', `/api/generate/detail/music?task_id=${s.body.data.task_id as string}`, 'k1');
  expect(d.body.data.status).toBe('finished');
  return { task_id: s.body.data.task_id as string, audio_id: d.body.data.files[0].audio_id as string };
}

describe('replace-section: callback_url inside input (contract: Music workflows, replace-section "optional ... callback_url")', () => {
  const section = (ref: { task_id: string; audio_id: string }, callback_url: string) => ({
    model: 'replace-section',
    input: { ...ref, prompt: 'new bridge', tags: 'folk', title: 'River Road', infill_start_s: 10, infill_end_s: 20, callback_url },
  });

  it('refuses a private input.callback_url at submit, like the root one', async () => {
    const sb = await sandbox();
    const ref = await track(sb);
    const r = await call(sb, 'POST', '/api/generate/submit', 'k1', section(ref, 'https://10.1.2.3/hook'));
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'validation_error' });
    expect(r.body.error.message).toMatch(/^input\.callback_url: must point to a publicly reachable host/);
  });

  it('sends the completion callback to input.callback_url', async () => {
    // The schema asks for https; a plain TCP server shows the delivery attempt reaching the host and port.
    let connections = 0;
    const tcp: TcpServer = createTcpServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
    open.push({ close: () => tcp.close() });
    const port = (tcp.address() as AddressInfo).port;
    const sb = await sandbox({ allowLoopback: true, resolveHost: async () => ['127.0.0.1'] });
    const ref = await track(sb);
    const url = `https://hooks.example.com:${port}/hook`;
    const r = await call(sb, 'POST', '/api/generate/submit', 'k1', section(ref, url));
    expect(r.status).toBe(200);
    const listed = (await call(sb, 'GET', '/__sandbox/tasks', null, undefined, { 'x-sandbox-admin-token': sb.adminToken })).body.tasks as Json[];
    expect(listed.find((t) => t.task_id === r.body.data.task_id)).toMatchObject({ callback_url: url });
    sb.clock.advance(200);
    await vi.waitFor(() => expect(connections).toBeGreaterThanOrEqual(1));
    expect(sb.stats().callbacks.attempted).toBeGreaterThanOrEqual(1);
  });

  it('leaves an input.callback_url of a model with open inputs (clip-02) alone', async () => {
    const sb = await sandbox();
    const r = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: 'clip-02', input: { prompt: 'a fox', callback_url: 'https://10.1.2.3/hook' } });
    expect(r.status).toBe(200);
    const listed = (await call(sb, 'GET', '/__sandbox/tasks', null, undefined, { 'x-sandbox-admin-token': sb.adminToken })).body.tasks as Json[];
    expect(listed.find((t) => t.task_id === r.body.data.task_id)).toMatchObject({ callback_url: null });
  });

  it('prefers the root callback_url when both are given', async () => {
    const sb = await sandbox({ allowLoopback: true });
    const ref = await track(sb);
    const body = { ...section(ref, 'https://hooks.example.com/inner'), callback_url: 'https://hooks.example.com/root' };
    const r = await call(sb, 'POST', '/api/generate/submit', 'k1', body);
    expect(r.status).toBe(200);
    const listed = (await call(sb, 'GET', '/__sandbox/tasks', null, undefined, { 'x-sandbox-admin-token': sb.adminToken })).body.tasks as Json[];
    expect(listed.find((t) => t.task_id === r.body.data.task_id)).toMatchObject({ callback_url: 'https://hooks.example.com/root' });
  });
});

describe('a text/plain body on a JSON endpoint is a 415 (README: "no Content-Type, or not JSON, on a JSON endpoint: 415")', () => {
  it('answers 415 in each endpoint\'s shape instead of "must be a JSON object"', async () => {
    const sb = await sandbox();
    const plain = { 'content-type': 'text/plain' };
    const submit = await call(sb, 'POST', '/api/generate/submit', 'k1', JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'x' } }), plain);
    expect(submit.status).toBe(415);
    expect(submit.body.error).toMatchObject({ type: 'validation_error' });
    expect(submit.body.error.message).toContain('text/plain');
    for (const path of ['/api/common/upload/base64', '/api/common/upload/url']) {
      const r = await call(sb, 'POST', path, 'k1', JSON.stringify({ file_url: 'https://example.com/a.png' }), plain);
      expect(r.status).toBe(415);
      expect(r.body.code).toBe(415);
    }
    const chat = await call(sb, 'POST', '/v1/chat/completions', 'k1', JSON.stringify({ model: 'vendora/chat-5-mini', messages: [{ role: 'user', content: 'hi' }] }), plain);
    expect(chat.status).toBe(415);
    expect(chat.body.error).toMatchObject({ type: 'invalid_request_error' });
    // Nothing was charged.
    expect((await call(sb, 'GET', '/api/user/balance', 'k1')).body.data.balance).toBe(100000);
  });
});

describe('chat bodies: roles and content parts are checked (chat-protocols.md §2-§5)', () => {
  const CC = '/v1/chat/completions';
  const RESP = '/v1/responses';
  const MSG = '/v1/messages';
  const GEM = '/v1beta/models/vendorc/lumen-2.5-flash:generateContent';
  const cc = (messages: unknown) => ({ model: 'vendora/chat-5-mini', messages });
  const msg = (o: Record<string, unknown>) => ({ model: 'vendorb/verse-4.5', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }], ...o });

  it('refuses an unknown role or a malformed part with 400 naming the field, and charges nothing', async () => {
    const sb = await sandbox();
    const bad: Array<[string, unknown, string]> = [
      [CC, cc([{ role: 'bogus', content: 'hi' }]), 'messages[0].role'],
      [CC, cc([{ role: 'user', content: [1] }]), 'messages[0].content[0]'],
      [CC, cc([{ role: 'user', content: [[]] }]), 'messages[0].content[0]'],
      [CC, cc([{ role: 'user', content: [{ text: 'hi' }] }]), 'messages[0].content[0].type'],
      [CC, cc([{ role: 'user', content: [{ type: 'text' }] }]), 'messages[0].content[0].text'],
      [RESP, { model: 'vendora/chat-5-mini', input: [1, 2] }, 'input[0]'],
      [RESP, { model: 'vendora/chat-5-mini', input: [[[]]] }, 'input[0]'],
      [RESP, { model: 'vendora/chat-5-mini', input: [{ role: 'bogus', content: 'hi' }] }, 'input[0].role'],
      [RESP, { model: 'vendora/chat-5-mini', input: [{ role: 'user', content: [{ type: 'input_text' }] }] }, 'input[0].content[0].text'],
      [MSG, msg({ messages: [{ role: 'user', content: [1] }] }), 'messages[0].content[0]'],
      [MSG, msg({ system: [[1]] }), 'system[0]'],
      [MSG, msg({ system: [{ type: 'text' }] }), 'system[0].text'],
      [GEM, { contents: [{ role: 'bogus', parts: [{ text: 'hi' }] }] }, 'contents[0].role'],
    ];
    for (const [path, body, field] of bad) {
      const r = await call(sb, 'POST', path, 'k1', body);
      expect(r.status, `${path} ${JSON.stringify(body)}`).toBe(400);
      const message = (r.body.error?.message ?? '') as string;
      expect(message.startsWith(`${field}: `), `${path} ${JSON.stringify(body)} -> ${message}`).toBe(true);
      if (path === CC || path === RESP) expect(r.body.error.param).toBe(field);
    }
    expect((await call(sb, 'GET', '/api/user/balance', 'k1')).body.data.balance).toBe(100000);
  });

  it('still accepts every documented role and part kind', async () => {
    const sb = await sandbox();
    const good: Array<[string, unknown]> = [
      [CC, cc([{ role: 'system', content: 's' }, { role: 'developer', content: 'd' }, { role: 'assistant', content: null, tool_calls: [] }, { role: 'tool', content: 't', tool_call_id: 'c' }, { role: 'function', name: 'f', content: 'x' }, { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }])],
      [RESP, { model: 'vendora/chat-5-mini', input: [{ role: 'developer', content: 'd' }, { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }, { type: 'input_image', image_url: 'https://example.com/a.png' }] }, { role: 'assistant', content: [{ type: 'output_text', text: 'ok' }] }, { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' }, { type: 'function_call_output', call_id: 'c', output: 'y' }] }],
      [MSG, msg({ system: [{ type: 'text', text: 'be terse' }], messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] }] })],
      [GEM, { contents: [{ role: 'user', parts: [{ text: 'hi' }] }, { role: 'model', parts: [{ text: 'ok' }] }, { parts: [{ text: 'again' }] }] }],
    ];
    for (const [path, body] of good) {
      const r = await call(sb, 'POST', path, 'k1', body);
      expect(r.status, `${path} ${JSON.stringify(r.body)}`).toBe(200);
    }
  });
});

describe('a known path with another method is a 405 with Allow (HTTP semantics; the service lists one method per path)', () => {
  it('answers 405 and Allow in the endpoint\'s error shape; OPTIONS answers 204 with Allow; unknown paths stay 404', async () => {
    const sb = await sandbox();
    const get = await call(sb, 'GET', '/api/generate/submit', 'k1');
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(get.body).toMatchObject({ code: 405, error: { type: 'method_not_allowed_error' } });
    expect(get.body.error.message).toContain('GET /api/generate/submit');
    const del = await call(sb, 'DELETE', '/api/generate/status/abc', 'k1');
    expect(del.status).toBe(405);
    expect(del.headers.get('allow')).toBe('GET, HEAD');
    expect(typeof del.body.detail).toBe('string');
    const put = await call(sb, 'PUT', '/api/common/upload/stream', 'k1', {});
    expect(put.status).toBe(405);
    const chat = await call(sb, 'GET', '/v1/chat/completions', 'k1');
    expect(chat.status).toBe(405);
    expect(chat.body.error).toMatchObject({ type: 'invalid_request_error' });
    const gem = await call(sb, 'GET', '/v1beta/models/vendorc/lumen-2.5-flash:generateContent', 'k1');
    expect(gem.status).toBe(405);
    expect(gem.body.error).toMatchObject({ code: 405 });
    const opt = await call(sb, 'OPTIONS', '/api/generate/submit', null);
    expect(opt.status).toBe(204);
    expect(opt.headers.get('allow')).toBe('POST');
    expect((await call(sb, 'GET', '/api/nothing/here', 'k1')).status).toBe(404);
    expect((await call(sb, 'OPTIONS', '/api/nothing/here', null)).status).toBe(404);
  });
});

describe('uploads: every request counts toward the 5-per-minute limit and the refused stat (contract: Upload endpoints, rate limit)', () => {
  it('limits malformed upload requests (bad JSON, wrong content type) too, and counts them as refused', async () => {
    const sb = await sandbox({ timeScale: 1 });
    const bad: Array<[string, string, string]> = [
      ['/api/common/upload/base64', '{bad', 'application/json'],
      ['/api/common/upload/url', '<a/>', 'application/xml'],
      ['/api/common/upload/base64', '{"__proto__":{"a":1}}', 'application/json'],
    ];
    for (const [path, body, type] of bad) expect((await call(sb, 'POST', path, 'k1', body, { 'content-type': type })).status).toBeGreaterThanOrEqual(400);
    expect(sb.stats().uploads).toMatchObject({ accepted: 0, refused: 3 });
    for (let i = 0; i < 2; i++) expect((await call(sb, 'POST', '/api/common/upload/base64', 'k1', { base64_data: 'bad!' })).status).toBe(400);
    // The sixth request in the minute, malformed or not, is a 429.
    const sixth = await call(sb, 'POST', '/api/common/upload/base64', 'k1', '{bad', { 'content-type': 'application/json' });
    expect(sixth.status).toBe(429);
    expect(sixth.headers.get('retry-after')).not.toBeNull();
    expect(sixth.body.error).toMatchObject({ type: 'rate_limit_error' });
    expect(sb.stats().uploads).toMatchObject({ accepted: 0, refused: 6 });
    expect((await call(sb, 'POST', '/api/common/upload/base64', 'nope', { base64_data: 'x' })).status).toBe(401);
    expect(sb.stats().uploads.refused).toBe(7);
  });
});

describe('a malformed Authorization header is reported as invalid, not missing (contract: Authentication 1, 4)', () => {
  it('says the header is not a Bearer token on the API and chat endpoints', async () => {
    const sb = await sandbox();
    for (const auth of ['k1', 'Token k1', 'Bearer', 'Bearer two words']) {
      const bal = await call(sb, 'GET', '/api/user/balance', null, undefined, { authorization: auth });
      expect(bal.status).toBe(401);
      expect(bal.body.error.message, auth).toMatch(/^invalid Authorization header/);
      const st = await call(sb, 'GET', '/api/generate/status/abc', null, undefined, { authorization: auth });
      expect(st.body.detail, auth).toMatch(/^invalid Authorization header/);
      const chat = await call(sb, 'POST', '/v1/chat/completions', null, { model: 'vendora/chat-5-mini', messages: [{ role: 'user', content: 'hi' }] }, { authorization: auth });
      expect(chat.status).toBe(401);
      expect(chat.body.error, auth).toMatchObject({ code: 'invalid_api_key' });
      expect(chat.body.error.message, auth).toMatch(/^invalid Authorization header/);
    }
    // No header at all is still "missing".
    expect((await call(sb, 'GET', '/api/user/balance', null)).body.error.message).toMatch(/^missing API key/);
  });
});

describe('a host name with the trailing dot of its absolute form is judged like the name (contract: Events, callback URL "no private or internal addresses")', () => {
  it('refuses localhost., *.localhost., *.internal. and *.local. callback URLs at submit', async () => {
    const sb = await sandbox();
    for (const host of ['localhost.', 'LOCALHOST.', 'api.localhost.', 'metadata.google.internal.', 'printer.local.', 'intranet.']) {
      const r = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: 'alpha-image-2', input: { prompt: 'x' }, callback_url: `https://${host}/hook` });
      expect(r.status, host).toBe(400);
      expect(r.body.error.message, host).toMatch(/^callback_url: must point to a publicly reachable host/);
    }
    const ok = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: 'alpha-image-2', input: { prompt: 'x' }, callback_url: 'https://example.com./hook' });
    expect(ok.status).toBe(200);
  });
});

describe('add-instrumental: the first-track callback hands out URLs that serve (contract: Music workflows, "callback ... at three stages: ... first track completion")', () => {
  it('serves the first track\'s audio and cover once the first stage is reached, before the task finishes', async () => {
    const got: Json[] = [];
    const fetched: Array<{ key: string; status: number }> = [];
    const { createServer } = await import('node:http');
    const rx = createServer((req, res) => {
      let b = '';
      req.on('data', (c: Buffer) => (b += c.toString()));
      req.on('end', () => {
        const body = JSON.parse(b) as Json;
        got.push(body);
        res.end();
        if (body.data.callback_type !== 'first') return;
        void (async () => {
          for (const key of ['audio_url', 'image_url', 'file_url']) fetched.push({ key, status: (await fetch(body.data.files[0][key] as string)).status });
        })();
      });
    });
    await new Promise<void>((r) => rx.listen(0, '127.0.0.1', r));
    open.push({ close: () => rx.close() });
    const sb = await sandbox({ allowLoopback: true, timeScale: 0.02 });
    const ref = await track(sb);
    const song = await call(sb, 'GET', `/api/generate/detail/music?task_id=${ref.task_id}`, 'k1');
    const cb = `http://127.0.0.1:${(rx.address() as AddressInfo).port}/hook`;
    const input = { upload_url: song.body.data.files[0].audio_url as string, title: 'Backing', tags: 'piano', negative_tags: 'metal' };
    const r = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: 'add-instrumental', input, callback_url: cb });
    expect(r.status).toBe(200);
    await vi.waitFor(() => expect(fetched).toHaveLength(3), { timeout: 10_000 });
    // The first stage came while the task was running, and its URLs answered 200.
    expect(got.find((g) => g.data.callback_type === 'first')?.data.status).toBe('running');
    expect(fetched).toEqual([{ key: 'audio_url', status: 200 }, { key: 'image_url', status: 200 }, { key: 'file_url', status: 200 }]);
  });
});
