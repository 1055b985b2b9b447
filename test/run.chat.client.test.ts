import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatClient, type ChatRequest } from '../src/client/index.js';
import { ApiError } from '../src/errors.js';

/**
 * The chat client's wire requests, seen by a real HTTP server on 127.0.0.1:
 * path and key header per protocol, options passed through, the key never in
 * a message, and which answers are retried.
 */
const KEY = 'sk-wire-secret-0123456789';
interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}
let server: Server;
let base = '';
const seen: Seen[] = [];
/** Answers to give, in order (status, body); when empty: a minimal valid answer for the path. */
const answers: Array<{ status: number; body: string }> = [];

function okFor(url: string): string {
  if (url.includes('/chat/completions')) return JSON.stringify({ choices: [{ message: { content: 'ok' } }], usage: { prompt_tokens: 1, completion_tokens: 1 } });
  if (url.includes('/responses')) return JSON.stringify({ status: 'completed', output: [{ type: 'message', content: [{ type: 'output_text', text: 'ok' }] }], usage: { input_tokens: 1, output_tokens: 1 } });
  if (url.includes('/messages')) return JSON.stringify({ content: [{ type: 'text', text: 'ok' }], usage: { input_tokens: 1, output_tokens: 1 } });
  return JSON.stringify({ candidates: [{ content: { parts: [{ text: 'ok' }] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1 } });
}

beforeAll(async () => {
  server = createServer((req, res) => {
    let data = '';
    req.on('data', (c: Buffer) => (data += c.toString()));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: JSON.parse(data) as Record<string, unknown> });
      const a = answers.shift() ?? { status: 200, body: okFor(req.url ?? '') };
      res.writeHead(a.status, { 'content-type': 'application/json', 'retry-after': '0' }).end(a.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const client = () => new ChatClient({ baseUrl: base, apiKey: KEY, policy: { baseMs: 1, maxMs: 5, maxAttempts: 3 } });
const req = (protocol: ChatRequest['protocol'], model: string, options: Record<string, unknown> = {}): ChatRequest => ({
  model,
  protocol,
  stream: false,
  options,
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Hello' },
  ],
});

describe('chat client on the wire', () => {
  it('sends each protocol to its path with its key header and passes options through', async () => {
    const c = client();
    seen.length = 0;
    await c.call(req('chat-completions', 'vendora/chat-5', { temperature: 0.2 }));
    await c.call(req('responses', 'vendora/chat-5', { max_output_tokens: 50 }));
    await c.call(req('messages', 'vendorb/verse-4', { temperature: 0.1 }));
    const g = await c.call(req('gemini', 'vendorc/lumen-2.5-pro', { generationConfig: { maxOutputTokens: 9 } }));
    expect(g).toMatchObject({ text: 'ok', usage: { input_tokens: 1, output_tokens: 1 } });
    await c.close();
    expect(seen.map((s) => s.url)).toEqual(['/v1/chat/completions', '/v1/responses', '/v1/messages', '/v1beta/models/vendorc/lumen-2.5-pro:generateContent']);
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(seen[1]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(seen[2]!.headers['x-api-key']).toBe(KEY);
    expect(seen[2]!.headers.authorization).toBeUndefined();
    expect(seen[3]!.headers['x-goog-api-key']).toBe(KEY);
    expect(seen[3]!.headers.authorization).toBeUndefined();
    expect(seen[0]!.body).toEqual({ model: 'vendora/chat-5', temperature: 0.2, stream: false, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }] });
    expect(seen[1]!.body).toMatchObject({ model: 'vendora/chat-5', max_output_tokens: 50, input: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }] });
    expect(seen[2]!.body).toEqual({ model: 'vendorb/verse-4', max_tokens: 1024, temperature: 0.1, stream: false, system: 'Be brief.', messages: [{ role: 'user', content: 'Hello' }] });
    expect(seen[3]!.body).toEqual({ generationConfig: { maxOutputTokens: 9 }, systemInstruction: { parts: [{ text: 'Be brief.' }] }, contents: [{ role: 'user', parts: [{ text: 'Hello' }] }] });
  });

  it('retries 5xx and 429, not 400; the key never appears in a message', async () => {
    const c = client();
    seen.length = 0;
    answers.push({ status: 500, body: '{"error":{"message":"boom","type":"server_error"}}' }, { status: 429, body: '{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}' });
    const tries: number[] = [];
    await c.call(req('gemini', 'vendorc/lumen-2.5-pro'), { onTry: (n) => tries.push(n) });
    expect(tries).toEqual([1, 2, 3]);
    // Anthropic's 529 overloaded is retried too.
    answers.push({ status: 529, body: '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}' });
    expect((await c.call(req('messages', 'vendorb/verse-4'))).text).toBe('ok');
    answers.push({ status: 400, body: JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: `bad key ${KEY} echoed` } }) });
    const err = await c.call(req('messages', 'vendorb/verse-4')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    expect((err as ApiError).message).toContain('bad key');
    expect((err as ApiError).message).not.toContain(KEY);
    expect(seen.length).toBe(6);
    await c.close();
  });
});

describe('chat answers: SSE framing, terminators and errors', () => {
  it('reads CRLF framing and comments; a stream without its terminator is a network error (retried)', async () => {
    const { readStream, parseSse } = await import('../src/client/chat/parse.js');
    const { NetworkError } = await import('../src/errors.js');
    expect(parseSse(': comment\r\ndata: {"a":1}\r\n\r\nevent: x\r\ndata: 2\r\n\r\n')).toEqual([
      { event: null, data: '{"a":1}' },
      { event: 'x', data: '2' },
    ]);
    const chunk = (text: string, finish?: string) => `data: ${JSON.stringify({ candidates: [{ content: { parts: [{ text }] }, ...(finish ? { finishReason: finish } : {}) }], usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 2 } })}\r\n\r\n`;
    expect(readStream('gemini', chunk('Hel') + chunk('lo', 'STOP'), 'w')).toMatchObject({ text: 'Hello', usage: { input_tokens: 3, output_tokens: 2 } });
    const cut = () => readStream('gemini', chunk('Hel'), 'w');
    expect(cut).toThrow(NetworkError);
    expect(cut).toThrow(/finishReason/);
    const cc = 'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}\n\n';
    expect(() => readStream('chat-completions', cc, 'w')).toThrow(/\[DONE\]/);
    expect(readStream('chat-completions', cc + 'data: [DONE]\n\n', 'w').text).toBe('Hi');
  });

  it('error events keep the protocol status: a Gemini 503 chunk, an Anthropic overloaded event, an OpenAI error chunk', async () => {
    const { readStream } = await import('../src/client/chat/parse.js');
    const status = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        return err instanceof ApiError ? err.status : -1;
      }
      return 0;
    };
    expect(status(() => readStream('gemini', 'data: {"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}\n\n', 'w'))).toBe(503);
    expect(status(() => readStream('messages', 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n', 'w'))).toBe(529);
    expect(status(() => readStream('chat-completions', 'data: {"error":{"message":"boom","type":"server_error","param":null,"code":null}}\n\n', 'w'))).toBe(500);
    expect(status(() => readStream('responses', 'event: error\ndata: {"type":"error","code":"server_error","message":"boom","param":null,"sequence_number":3}\n\n', 'w'))).toBe(500);
  });
});
