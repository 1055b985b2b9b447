import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildReply, countTokens, creditsFor, replyText } from '../src/sandbox/chat/reply.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';

/**
 * The chat endpoints on the wire, with plain fetch: exact event sequences and
 * terminators, each protocol's key headers, error shapes, charges and faults.
 */

const SEED = 5;
const KEY = 'sk-chat-wire';
let sb: Sandbox;

beforeAll(async () => {
  sb = await startSandbox({ keys: { [KEY]: 100, 'sk-tiny': 0.004 }, seed: SEED });
});

afterAll(async () => {
  await sb.close();
});

interface Answer {
  status: number;
  type: string;
  text: string;
  headers: Headers;
}

async function post(path: string, body: unknown, headers: Record<string, string> = { authorization: `Bearer ${KEY}` }): Promise<Answer> {
  const r = await fetch(sb.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: r.status, type: r.headers.get('content-type') ?? '', text: await r.text(), headers: r.headers };
}

function json(a: Answer): Record<string, unknown> {
  expect(a.type).toContain('application/json');
  return JSON.parse(a.text) as Record<string, unknown>;
}

/** SSE events as {event, data} (data parsed when JSON). */
function events(text: string, sep = '\n\n'): Array<{ event: string | null; data: unknown }> {
  expect(text.endsWith(sep)).toBe(true);
  return text
    .slice(0, -sep.length)
    .split(sep)
    .map((block) => {
      const lines = block.split(/\r?\n/);
      const ev = lines.find((l) => l.startsWith('event: '))?.slice(7) ?? null;
      const data = lines.find((l) => l.startsWith('data: '))?.slice(6) ?? '';
      return { event: ev, data: data.startsWith('{') ? (JSON.parse(data) as unknown) : data };
    });
}

async function balance(key = KEY): Promise<number> {
  const r = await fetch(`${sb.url}/api/user/balance`, { headers: { authorization: `Bearer ${key}` } });
  const b = (await r.json()) as { data: { balance: number } };
  return b.data.balance;
}

const MSG = [{ role: 'user', content: 'hello wire' }];

describe('reply rules', () => {
  test('tokens are ceil(length/4) per word; replies are deterministic and cut by max tokens', () => {
    expect(countTokens('')).toBe(0);
    expect(countTokens('a abcd abcde  abcdefghi')).toBe(1 + 1 + 2 + 3);
    const p = { model: 'vendora/chat-5', texts: ['hi  there'], lastUser: 'hi\n there', maxTokens: null };
    const r = buildReply(1, p);
    expect(r.text).toBe(replyText(1, p));
    expect(r.text.startsWith('Echo: hi\nthere ')).toBe(true); // line breaks kept, spaces inside a line collapsed
    expect(r.deltas.join('')).toBe(r.text);
    expect(r.promptTokens).toBe(3); // hi(1) there(2)
    expect(r.credits).toBe(creditsFor(r.promptTokens + r.completionTokens));
    const cut = buildReply(1, { ...p, maxTokens: 3 });
    expect(cut.truncated).toBe(true);
    expect(cut.text).toBe('Echo: hi'); // Echo:(2) hi(1)
    expect(cut.completionTokens).toBe(3);
  });
});

describe('Chat Completions on the wire', () => {
  test('stream: role first, finish_reason, no usage key without include_usage, then [DONE]', async () => {
    const a = await post('/chat/completions', { model: 'vendord/nova-4', messages: MSG, stream: true });
    expect(a.status).toBe(200);
    expect(a.type).toContain('text/event-stream');
    const evs = events(a.text);
    expect(evs.every((e) => e.event === null)).toBe(true);
    expect(evs.at(-1)?.data).toBe('[DONE]');
    const chunks = evs.slice(0, -1).map((e) => e.data as { id: string; choices: Array<{ delta: { role?: string; content?: string }; finish_reason: string | null }> });
    expect(chunks[0]?.choices[0]?.delta.role).toBe('assistant');
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('stop');
    expect(chunks.every((c) => !('usage' in c) && c.id === chunks[0]?.id)).toBe(true);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe(replyText(SEED, { model: 'vendord/nova-4', texts: ['hello wire'], lastUser: 'hello wire' }));
  });

  test('a call is charged (prompt + completion tokens) x 0.5 / 1000 credits', async () => {
    const before = await balance();
    const a = json(await post('/v1/chat/completions', { model: 'vendora/chat-4o', messages: MSG }));
    const usage = a.usage as { total_tokens: number };
    expect(await balance()).toBeCloseTo(before - (usage.total_tokens * 0.5) / 1000, 6);
  });

  test('too few credits: 402 insufficient_quota, nothing charged', async () => {
    const a = await post('/v1/chat/completions', { model: 'vendora/chat-4o', messages: MSG }, { authorization: 'Bearer sk-tiny' });
    expect(a.status).toBe(402);
    expect((json(a).error as { type: string }).type).toBe('insufficient_quota');
    expect(await balance('sk-tiny')).toBe(0.004);
  });

  test('bad bodies: 400 naming the field; missing key: 401 in the OpenAI shape', async () => {
    const a = json(await post('/v1/chat/completions', { model: 'vendora/chat-5', messages: [] }));
    expect(a).toEqual({ error: { message: expect.stringContaining('messages') as string, type: 'invalid_request_error', param: 'messages', code: null } });
    const b = await post('/v1/chat/completions', '{not json');
    expect(b.status).toBe(400);
    expect((json(b).error as { type: string }).type).toBe('invalid_request_error');
    const c = await post('/v1/chat/completions', { model: 'vendora/chat-5', messages: MSG }, {});
    expect(c.status).toBe(401);
    expect((json(c).error as { message: string }).message).toContain('Authorization: Bearer');
  });

  test('502-after without stream: charged, then a 502 in the OpenAI shape', async () => {
    const before = await balance();
    sb.script('chat', ['502-after']);
    const a = await post('/v1/chat/completions', { model: 'vendora/chat-5', messages: MSG });
    expect(a.status).toBe(502);
    expect((json(a).error as { type: string }).type).toBe('server_error');
    expect(await balance()).toBeLessThan(before);
  });

  test('faults: a 503 in the OpenAI shape; drop closes the socket', async () => {
    sb.script('chat', ['503']);
    const a = await post('/v1/chat/completions', { model: 'vendora/chat-5', messages: MSG });
    expect(a.status).toBe(503);
    expect(json(a)).toEqual({ error: { message: 'service unavailable', type: 'server_error', param: null, code: null } });
    sb.script('chat', ['drop']);
    await expect(post('/v1/chat/completions', { model: 'vendora/chat-5', messages: MSG })).rejects.toThrow();
  });
});

describe('Responses on the wire', () => {
  test('event names equal data.type, sequence numbers count from 0, one response id, no [DONE]', async () => {
    const a = await post('/responses', { model: 'vendora/chat-5', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hello wire' }] }], stream: true });
    const evs = events(a.text);
    const datas = evs.map((e) => e.data as { type: string; sequence_number: number; response?: { id: string } });
    expect(evs.map((e) => e.event)).toEqual(datas.map((d) => d.type));
    expect(datas.map((d) => d.sequence_number)).toEqual(datas.map((_, i) => i));
    expect(datas.slice(0, 4).map((d) => d.type)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    expect(datas.slice(-4).map((d) => d.type)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    expect(new Set(datas.filter((d) => d.response).map((d) => d.response?.id)).size).toBe(1);
  });
});

describe('Messages on the wire', () => {
  test('x-api-key works; every event is named; ping after the first block start; ends with message_stop', async () => {
    const a = await post('/v1/messages', { model: 'vendorb/verse-4', max_tokens: 100, messages: MSG, stream: true }, { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' });
    expect(a.status).toBe(200);
    const names = events(a.text).map((e) => e.event);
    expect(names.slice(0, 3)).toEqual(['message_start', 'content_block_start', 'ping']);
    expect(names.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
    expect(a.headers.get('request-id')).toMatch(/^req_/);
  });

  test('max_tokens is required; errors carry type "error" and the request id', async () => {
    const a = await post('/v1/messages', { model: 'vendorb/verse-4', messages: MSG }, { 'x-api-key': KEY });
    expect(a.status).toBe(400);
    const body = json(a);
    expect(body.type).toBe('error');
    expect(body.error).toEqual({ type: 'invalid_request_error', message: expect.stringContaining('max_tokens') as string });
    expect(body.request_id).toBe(a.headers.get('request-id'));
    const u = await post('/v1/messages', { model: 'vendorb/verse-9', max_tokens: 5, messages: MSG }, { 'x-api-key': KEY });
    expect(u.status).toBe(404);
    expect((json(u).error as { type: string }).type).toBe('not_found_error');
  });

  test('a drop-after fault cuts the stream after some deltas, without message_stop', async () => {
    sb.script('chat', ['drop-after']);
    const r = await fetch(`${sb.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: JSON.stringify({ model: 'vendorb/verse-4', max_tokens: 100, messages: MSG, stream: true }),
    });
    expect(r.status).toBe(200);
    await expect(r.text()).rejects.toThrow();
  });
});

describe('Gemini native on the wire', () => {
  const body = { contents: [{ role: 'user', parts: [{ text: 'hello wire' }] }] };
  const path = (v: string, method: string) => `/${v}/models/vendorc/lumen-2.5-pro:${method}`;

  test('stream: data-only events ending CRLF CRLF; only the last has finishReason', async () => {
    const a = await post(`${path('v1alpha', 'streamGenerateContent')}?alt=sse`, body, { 'x-goog-api-key': KEY });
    expect(a.status).toBe(200);
    const evs = events(a.text, '\r\n\r\n');
    const chunks = evs.map((e) => e.data as { candidates: Array<{ finishReason?: string }> });
    expect(evs.every((e) => e.event === null)).toBe(true);
    expect(chunks.map((c) => c.candidates[0]?.finishReason ?? null).filter(Boolean)).toEqual(['STOP']);
    expect(chunks.at(-1)?.candidates[0]?.finishReason).toBe('STOP');
  });

  test('?key= and an encoded model id work; an unknown method is a 404; a missing key a 401 UNAUTHENTICATED', async () => {
    const a = await post(`/v1beta/models/vendorc%2Flumen-2.5-pro:generateContent?key=${KEY}`, body, {});
    expect(a.status).toBe(200);
    expect((json(a).candidates as unknown[]).length).toBe(1);
    const b = await post(path('v1beta', 'countTokens'), body, { 'x-goog-api-key': KEY });
    expect(b.status).toBe(404);
    expect((json(b).error as { status: string }).status).toBe('NOT_FOUND');
    const c = await post(path('v1', 'generateContent'), body, {});
    expect(json(c)).toEqual({ error: { code: 401, message: expect.stringContaining('x-goog-api-key') as string, status: 'UNAUTHENTICATED' } });
  });

  test('streamGenerateContent without alt=sse: one JSON array of the same chunks', async () => {
    const plain = json(await post(path('v1beta', 'generateContent'), body, { 'x-goog-api-key': KEY })) as { candidates: Array<{ content: { parts: Array<{ text: string }> } }> };
    const a = await post(path('v1beta', 'streamGenerateContent'), body, { 'x-goog-api-key': KEY });
    const arr = JSON.parse(a.text) as Array<{ candidates: Array<{ content: { parts: Array<{ text: string }> }; finishReason?: string }> }>;
    expect(a.type).toContain('application/json');
    expect(arr.length).toBeGreaterThan(1);
    expect(arr.map((c) => c.candidates[0]?.content.parts[0]?.text).join('')).toBe(plain.candidates[0]?.content.parts[0]?.text);
    expect(arr.at(-1)?.candidates[0]?.finishReason).toBe('STOP');
  });

  test('a 429 fault in the Google shape, with Retry-After', async () => {
    sb.script('chat', ['429']);
    const a = await post(path('v1beta', 'generateContent'), body, { 'x-goog-api-key': KEY });
    expect(a.status).toBe(429);
    expect(a.headers.get('retry-after')).toBe('1');
    expect((json(a).error as { status: string }).status).toBe('RESOURCE_EXHAUSTED');
  });
});

describe('random chat faults from a spec', () => {
  test('--faults chat:500-after=1 breaks every stream mid-way with the protocol error event', async () => {
    const s = await startSandbox({ keys: { [KEY]: 10 }, seed: 1, faults: 'chat:500-after=1' });
    try {
      const r = await fetch(`${s.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        body: JSON.stringify({ model: 'vendorb/verse-4', max_tokens: 100, messages: MSG, stream: true }),
      });
      const evs = events(await r.text());
      expect(evs.map((e) => e.event).slice(-2)).toEqual(['content_block_delta', 'error']);
      expect(evs.at(-1)?.data).toEqual({ type: 'error', error: { type: 'api_error', message: expect.stringContaining('stream failed') as string } });
      expect(s.stats().faults_injected['chat:500-after']).toBe(1);
    } finally {
      await s.close();
    }
  });
});

describe('other faults and framework errors on chat routes', () => {
  test('slow answers normally; a wrong content type is a 415 in the protocol shape', async () => {
    const s = await startSandbox({ keys: { [KEY]: 10 }, seed: 2, slowMs: 5 });
    try {
      s.script('chat', ['slow']);
      const r = await fetch(`${s.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': KEY },
        body: JSON.stringify({ model: 'vendorb/verse-4', max_tokens: 100, messages: MSG }),
      });
      expect(r.status).toBe(200);
      expect(((await r.json()) as { type: string }).type).toBe('message');
      const t = await fetch(`${s.url}/v1beta/models/vendorc/lumen-2.5-pro:generateContent`, { method: 'POST', headers: { 'content-type': 'application/xml', 'x-goog-api-key': KEY }, body: '<hi/>' });
      expect(t.status).toBe(415);
      expect(((await t.json()) as { error: { code: number; status: string } }).error).toMatchObject({ code: 415, status: 'INVALID_ARGUMENT' });
      expect(s.stats().requests.chat).toBe(2);
    } finally {
      await s.close();
    }
  });
});
