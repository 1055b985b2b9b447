import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';

/**
 * A chat reply is at most 16,384 tokens, whatever the request asks, as a real model's output has a limit.
 * The reply echoes the last user message, and each two words of it became a stream event of about 200 bytes,
 * all written at once: a 16 MB message (within the 32 MiB body limit) made 4 million events, the sandbox
 * blocked for 42 s, its RSS rose to 3.3 GB, and the Gemini JSON-array answer failed with a 500 after the call
 * was charged. Found by posting such a message to a standalone sandbox.
 */

const KEY = 'sk-chat-bounded';
const CAP = 16_384;
/** 100,000 one-token words: far past the cap, small enough to send quickly. */
const LONG = 'w '.repeat(100_000);
let sb: Sandbox;

beforeAll(async () => {
  sb = await startSandbox({ keys: { [KEY]: 100_000 }, seed: 3 });
});

afterAll(async () => {
  await sb.close();
});

async function post(path: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  const r = await fetch(sb.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: r.status, text: await r.text() };
}

describe('a chat reply is bounded by the output limit', () => {
  test('a stream without max_tokens ends at the limit with the length reason', async () => {
    const a = await post('/v1/chat/completions', { model: 'vendora/chat-5', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: LONG }] }, { authorization: `Bearer ${KEY}` });
    expect(a.status).toBe(200);
    const chunks = a.text
      .split('\n\n')
      .filter((b) => b.startsWith('data: {'))
      .map((b) => JSON.parse(b.slice(6)) as { choices: Array<{ finish_reason: string | null }>; usage?: { completion_tokens: number; prompt_tokens: number } | null });
    expect(chunks.length).toBeLessThanOrEqual(CAP / 2 + 3);
    expect(chunks.flatMap((c) => c.choices).at(-1)?.finish_reason).toBe('length');
    const usage = chunks.at(-1)?.usage;
    expect(usage?.completion_tokens).toBeLessThanOrEqual(CAP);
    expect(usage?.prompt_tokens).toBe(100_000);
  });

  test('a larger max_tokens is held to the limit too', async () => {
    const a = await post('/v1/messages', { model: 'vendorb/verse-4.5', max_tokens: 1_000_000, messages: [{ role: 'user', content: LONG }] }, { 'x-api-key': KEY });
    expect(a.status).toBe(200);
    const m = JSON.parse(a.text) as { stop_reason: string; usage: { output_tokens: number } };
    expect(m.stop_reason).toBe('max_tokens');
    expect(m.usage.output_tokens).toBeLessThanOrEqual(CAP);
  });

  test('the Gemini JSON-array stream holds at most one chunk per two words of the limit', async () => {
    const a = await post('/v1beta/models/vendorc/lumen-2.5-flash:streamGenerateContent', { contents: [{ role: 'user', parts: [{ text: LONG }] }] }, { 'x-goog-api-key': KEY });
    expect(a.status).toBe(200);
    const chunks = JSON.parse(a.text) as Array<{ candidates: Array<{ finishReason?: string }>; usageMetadata: { candidatesTokenCount?: number } }>;
    expect(chunks.length).toBeLessThanOrEqual(CAP / 2);
    expect(chunks.at(-1)?.candidates[0]?.finishReason).toBe('MAX_TOKENS');
    expect(chunks.at(-1)?.usageMetadata.candidatesTokenCount).toBeLessThanOrEqual(CAP);
  });

  test('a short reply is unchanged', async () => {
    const a = await post('/v1/chat/completions', { model: 'vendora/chat-5', messages: [{ role: 'user', content: 'hello there' }] }, { authorization: `Bearer ${KEY}` });
    const c = JSON.parse(a.text) as { choices: Array<{ message: { content: string }; finish_reason: string }> };
    expect(c.choices[0]?.message.content.startsWith('Echo: hello there ')).toBe(true);
    expect(c.choices[0]?.finish_reason).toBe('stop');
  });
});
