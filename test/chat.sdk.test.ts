import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { replyText } from '../src/sandbox/chat/reply.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';

/**
 * The official SDKs (openai 6.49, @anthropic-ai/sdk 1.12, @google/genai 2.32)
 * against the in-process sandbox: every response parses, streamed text equals
 * the plain text, 401/429/mid-stream errors raise each library's own errors.
 */

const SEED = 11;
const KEY = 'sk-chat-sdk-test';
const SYSTEM = 'Be brief.';
const USER = 'Describe a red fox in the snow';
const TEXTS = [SYSTEM, USER];

const GPT = 'vendora/chat-5-mini';
const VERSE = 'vendorb/verse-4.5';
const LUMEN = 'vendorc/lumen-2.5-flash';

let sb: Sandbox;

beforeAll(async () => {
  sb = await startSandbox({ keys: { [KEY]: 1000, 'sk-empty': 0 }, seed: SEED });
});

afterAll(async () => {
  await sb.close();
});

function expected(model: string): string {
  return replyText(SEED, { model, texts: TEXTS, lastUser: USER });
}

describe('openai SDK, Chat Completions', () => {
  const client = () => new OpenAI({ apiKey: KEY, baseURL: `${sb.url}/v1`, maxRetries: 0 });
  const messages = [
    { role: 'system' as const, content: SYSTEM },
    { role: 'user' as const, content: USER },
  ];

  test('create, create with stream, and the stream helper give the same text', async () => {
    const plain = await client().chat.completions.create({ model: GPT, messages });
    const text = plain.choices[0]?.message.content;
    expect(text).toBe(expected(GPT));
    expect(text?.startsWith(`Echo: ${USER} `)).toBe(true);
    expect(plain.choices[0]?.finish_reason).toBe('stop');
    expect(plain.usage?.prompt_tokens).toBe(11); // Be(1) brief.(2) + Describe(2) a red fox in the snow(6)
    expect(plain.usage?.total_tokens).toBe((plain.usage?.prompt_tokens ?? 0) + (plain.usage?.completion_tokens ?? 0));

    const stream = await client().chat.completions.create({ model: GPT, messages, stream: true, stream_options: { include_usage: true } });
    let streamed = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(streamed).toBe(text);
    expect(usage).toEqual(plain.usage);

    const final = await client().chat.completions.stream({ model: GPT, messages }).finalChatCompletion();
    expect(final.choices[0]?.message.content).toBe(text);
    expect(final.choices[0]?.finish_reason).toBe('stop');
  });

  test('max_completion_tokens cuts the reply with finish_reason length', async () => {
    const r = await client().chat.completions.create({ model: GPT, messages, max_completion_tokens: 3 });
    expect(r.choices[0]?.finish_reason).toBe('length');
    expect(r.usage?.completion_tokens).toBeLessThanOrEqual(3);
    expect(expected(GPT).startsWith(r.choices[0]?.message.content ?? 'x')).toBe(true);
  });

  test('401 and 429 raise AuthenticationError and RateLimitError', async () => {
    const bad = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${sb.url}/v1`, maxRetries: 0 });
    await expect(bad.chat.completions.create({ model: GPT, messages })).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    sb.script('chat', ['429']);
    const err = await client().chat.completions.create({ model: GPT, messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).code).toBe('rate_limit_exceeded');
  });

  test('a model of another group, an unknown model, an empty balance', async () => {
    const wrong = await client().chat.completions.create({ model: 'vendorb/nope', messages }).catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(OpenAI.NotFoundError);
    const poor = new OpenAI({ apiKey: 'sk-empty', baseURL: `${sb.url}/v1`, maxRetries: 0 });
    const err = await poor.chat.completions.create({ model: GPT, messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
  });

  test('a mid-stream error throws APIError; a cut stream throws too', async () => {
    sb.script('chat', ['500-after']);
    const stream = await client().chat.completions.create({ model: GPT, messages, stream: true });
    let got = '';
    const err = await (async () => {
      for await (const c of stream) got += c.choices[0]?.delta.content ?? '';
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(String((err as Error).message)).toContain('stream failed');
    expect(got.length).toBeGreaterThan(0);
    expect(expected(GPT).startsWith(got)).toBe(true);

    sb.script('chat', ['drop-after']);
    await expect(client().chat.completions.stream({ model: GPT, messages }).finalChatCompletion()).rejects.toThrow();
  });
});

describe('openai SDK, Responses', () => {
  const client = () => new OpenAI({ apiKey: KEY, baseURL: `${sb.url}/v1`, maxRetries: 0 });
  const params = { model: GPT, instructions: SYSTEM, input: USER };

  test('create, create with stream, and the stream helper give the same text', async () => {
    const plain = await client().responses.create(params);
    expect(plain.status).toBe('completed');
    expect(plain.output_text).toBe(expected(GPT));
    expect(plain.usage?.input_tokens).toBe(11); // Be(1) brief.(2) + Describe(2) a red fox in the snow(6)

    const stream = await client().responses.create({ ...params, stream: true });
    let streamed = '';
    const types: string[] = [];
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') streamed += ev.delta;
    }
    expect(streamed).toBe(plain.output_text);
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');

    const final = await client().responses.stream(params).finalResponse();
    expect(final.output_text).toBe(plain.output_text);
    expect(final.usage).toEqual(plain.usage);
  });

  test('max_output_tokens gives an incomplete response, streamed or not', async () => {
    const plain = await client().responses.create({ ...params, max_output_tokens: 3 });
    expect(plain.status).toBe('incomplete');
    expect(plain.incomplete_details?.reason).toBe('max_output_tokens');
    const final = await client().responses.stream({ ...params, max_output_tokens: 3 }).finalResponse();
    expect(final.status).toBe('incomplete');
    expect(final.output_text).toBe(plain.output_text);
  });

  test('a model whose group has no Responses protocol: BadRequestError naming the supported ones', async () => {
    const err = await client().responses.create({ ...params, model: VERSE }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as Error).message).toContain('Chat Completions');
    expect((err as Error).message).toContain('Claude Messages');
  });

  test('401, 429 and a mid-stream error', async () => {
    const bad = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${sb.url}/v1`, maxRetries: 0 });
    await expect(bad.responses.create(params)).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    sb.script('chat', ['429']);
    await expect(client().responses.create(params)).rejects.toBeInstanceOf(OpenAI.RateLimitError);
    sb.script('chat', ['502-after']);
    await expect(client().responses.stream(params).finalResponse()).rejects.toBeInstanceOf(OpenAI.APIError);
  });
});

describe('@anthropic-ai/sdk, Messages', () => {
  const client = () => new Anthropic({ apiKey: KEY, baseURL: sb.url, maxRetries: 0 });
  const params = { model: VERSE, max_tokens: 256, system: SYSTEM, messages: [{ role: 'user' as const, content: USER }] };

  test('create, create with stream, and the stream helper give the same text', async () => {
    const plain = await client().messages.create(params);
    const block = plain.content[0];
    const text = block?.type === 'text' ? block.text : undefined;
    expect(text).toBe(expected(VERSE));
    expect(plain.stop_reason).toBe('end_turn');
    expect(plain.usage.input_tokens).toBe(11); // Be(1) brief.(2) + Describe(2) a red fox in the snow(6)

    const raw = await client().messages.create({ ...params, stream: true });
    let streamed = '';
    for await (const ev of raw) {
      if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') streamed += ev.delta.text;
    }
    expect(streamed).toBe(text);

    const final = await client().messages.stream(params).finalMessage();
    const fb = final.content[0];
    expect(fb?.type === 'text' ? fb.text : undefined).toBe(text);
    expect(final.usage.output_tokens).toBe(plain.usage.output_tokens);
    expect(final.stop_reason).toBe('end_turn');
  });

  test('401 and 429 raise AuthenticationError and RateLimitError; a mid-stream error raises APIError', async () => {
    const bad = new Anthropic({ apiKey: 'sk-wrong', baseURL: sb.url, maxRetries: 0 });
    await expect(bad.messages.create(params)).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
    sb.script('chat', ['429']);
    const err = await client().messages.create(params).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    expect((err as InstanceType<typeof Anthropic.RateLimitError>).type).toBe('rate_limit_error');
    sb.script('chat', ['500-after']);
    await expect(client().messages.stream(params).finalMessage()).rejects.toBeInstanceOf(Anthropic.APIError);
    sb.script('chat', ['drop-after']);
    await expect(client().messages.stream(params).finalMessage()).rejects.toThrow();
  });

  test('a model of the first group: BadRequestError; an empty balance: 402', async () => {
    await expect(client().messages.create({ ...params, model: GPT })).rejects.toBeInstanceOf(Anthropic.BadRequestError);
    const poor = new Anthropic({ apiKey: 'sk-empty', baseURL: sb.url, maxRetries: 0 });
    const err = await poor.messages.create(params).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(402);
  });
});

describe.each(['v1beta', 'v1'])('@google/genai, Gemini native, apiVersion %s', (apiVersion) => {
  const client = (apiKey = KEY) => new GoogleGenAI({ apiKey, httpOptions: { baseUrl: sb.url, apiVersion } });
  const params = { model: LUMEN, contents: USER, config: { systemInstruction: SYSTEM } };

  test('generateContent and generateContentStream give the same text', async () => {
    const plain = await client().models.generateContent(params);
    expect(plain.text).toBe(expected(LUMEN));
    expect(plain.candidates?.[0]?.finishReason).toBe('STOP');
    expect(plain.usageMetadata?.promptTokenCount).toBe(11); // Be(1) brief.(2) + Describe(2) a red fox in the snow(6)

    let streamed = '';
    let last: Awaited<ReturnType<GoogleGenAI['models']['generateContent']>> | undefined;
    for await (const chunk of await client().models.generateContentStream(params)) {
      streamed += chunk.text ?? '';
      last = chunk;
    }
    expect(streamed).toBe(plain.text);
    expect(last?.usageMetadata?.totalTokenCount).toBe(plain.usageMetadata?.totalTokenCount);
    expect(last?.candidates?.[0]?.finishReason).toBe('STOP');
  });

  test('401, 429 and a mid-stream error raise ApiError with the status', async () => {
    const e401 = await client('sk-wrong').models.generateContent(params).catch((e: unknown) => e);
    expect(e401).toBeInstanceOf(ApiError);
    expect((e401 as ApiError).status).toBe(401);
    sb.script('chat', ['429']);
    const e429 = await client().models.generateContent(params).catch((e: unknown) => e);
    expect(e429).toBeInstanceOf(ApiError);
    expect((e429 as ApiError).status).toBe(429);

    sb.script('chat', ['500-after']);
    const e500 = await (async () => {
      for await (const _ of await client().models.generateContentStream(params)) void _;
    })().catch((e: unknown) => e);
    expect(e500).toBeInstanceOf(ApiError);
    expect((e500 as ApiError).status).toBe(500);

    sb.script('chat', ['drop-after']);
    let got = '';
    const cut = await (async () => {
      for await (const c of await client().models.generateContentStream(params)) got += c.text ?? '';
    })().catch((e: unknown) => e);
    expect(cut).toBeInstanceOf(Error);
    expect(expected(LUMEN).startsWith(got)).toBe(true);
    expect(got).not.toBe(expected(LUMEN));
  });

  test('a model of another group: 400; unknown: 404', async () => {
    const e400 = await client().models.generateContent({ ...params, model: VERSE }).catch((e: unknown) => e);
    expect((e400 as ApiError).status).toBe(400);
    expect((e400 as Error).message).toContain('INVALID_ARGUMENT');
    const e404 = await client().models.generateContent({ ...params, model: 'vendorc/unknown-9' }).catch((e: unknown) => e);
    expect((e404 as ApiError).status).toBe(404);
  });
});
