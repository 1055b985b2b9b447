import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  CHAT_MODELS,
  CHAT_PRICE,
  SANDBOX_CHAT_CREDITS_PER_1K_TOKENS,
  chatInput,
  chatProtocolsFor,
  checkChatJob,
  findChatModel,
  isChatModelId,
} from '../src/models/chat.js';
import { findModel } from '../src/models/index.js';

const hi = { messages: [{ role: 'user', content: 'hi' }] };

describe('chat catalogue', () => {
  it('holds the four vendor groups of the service table', () => {
    const byGroup = new Map<string, string[]>();
    for (const m of CHAT_MODELS) byGroup.set(m.group, [...(byGroup.get(m.group) ?? []), m.id]);
    const sizes = [...byGroup.values()].map((ids) => ids.length);
    expect(sizes).toEqual([5, 4, 2, 1]);
    const first = CHAT_MODELS.filter((m) => m.id.startsWith('vendora/'));
    expect(first.filter((m) => m.older)).toHaveLength(3);
    expect(chatProtocolsFor(first[0]!.id)).toEqual(['chat-completions', 'responses']);
    expect(chatProtocolsFor(CHAT_MODELS.find((m) => m.id.startsWith('vendorb/'))!.id)).toEqual(['chat-completions', 'messages']);
    expect(chatProtocolsFor(CHAT_MODELS.find((m) => m.id.startsWith('vendorc/'))!.id)).toEqual(['chat-completions', 'gemini']);
    expect(chatProtocolsFor(CHAT_MODELS.find((m) => m.id.startsWith('vendord/'))!.id)).toEqual(['chat-completions', 'responses']);
    expect(new Set(CHAT_MODELS.map((m) => m.id)).size).toBe(12);
  });
  it('ids are <vendor>/<model> and never collide with submit models', () => {
    for (const m of CHAT_MODELS) {
      expect(isChatModelId(m.id)).toBe(true);
      expect(findModel(m.id)).toBeUndefined();
    }
    expect(findChatModel('vendora/chat-5')?.protocols).toContain('responses');
    expect(findChatModel('vendora/nope')).toBeUndefined();
    expect(chatProtocolsFor('vendora/nope')).toBeNull();
  });
  it('isChatModelId is syntactic', () => {
    expect(isChatModelId('acme/some-model-1.2')).toBe(true);
    expect(isChatModelId('alpha-image-2')).toBe(false);
    expect(isChatModelId('vendora/dream-v5.0-flash/text-to-image')).toBe(false);
    expect(isChatModelId('a b/c')).toBe(false);
    expect(isChatModelId('/c')).toBe(false);
    expect(isChatModelId('acme/model:generateContent')).toBe(false);
  });
  it('prices are unknown; the sandbox rate is documented', () => {
    expect(CHAT_PRICE.credits).toBeNull();
    expect(SANDBOX_CHAT_CREDITS_PER_1K_TOKENS).toBeGreaterThan(0);
  });
});

describe('checkChatJob: protocol rules', () => {
  it('a known model without a protocol uses chat-completions', () => {
    expect(checkChatJob({ model: 'vendorb/verse-4.5', input: hi })).toEqual({ protocol: 'chat-completions', input: hi, issues: [] });
  });
  it('a known model on a supported protocol passes', () => {
    expect(checkChatJob({ model: 'vendorb/verse-4.5', protocol: 'messages', input: hi }).issues).toEqual([]);
    expect(checkChatJob({ model: 'vendorc/lumen-2.5-pro', protocol: 'gemini', input: hi }).protocol).toBe('gemini');
    expect(checkChatJob({ model: 'vendord/nova-4', protocol: 'responses', input: hi }).issues).toEqual([]);
  });
  it('a known model on an unsupported protocol is an error naming the supported ones', () => {
    const r = checkChatJob({ model: 'vendora/chat-5', protocol: 'messages', input: hi });
    expect(r.protocol).toBeNull();
    expect(r.issues).toEqual([
      { path: 'protocol', message: 'vendora/chat-5 does not support messages; it supports chat-completions, responses', type: 'validation_error' },
    ]);
    expect(checkChatJob({ model: 'vendorc/lumen-2.5-flash', protocol: 'responses', input: hi }).issues[0]?.message).toContain('it supports chat-completions, gemini');
  });
  it('an unknown protocol name is an error listing the four', () => {
    const r = checkChatJob({ model: 'vendora/chat-5', protocol: 'grpc', input: hi });
    expect(r.protocol).toBeNull();
    expect(r.issues).toEqual([{ path: 'protocol', message: '"grpc" is not one of chat-completions, responses, messages, gemini', type: 'validation_error' }]);
  });
  it('an unknown <vendor>/<model> id needs an explicit protocol', () => {
    expect(checkChatJob({ model: 'acme/new-model', protocol: 'messages', input: hi })).toEqual({ protocol: 'messages', input: hi, issues: [] });
    const r = checkChatJob({ model: 'acme/new-model', input: hi });
    expect(r.protocol).toBeNull();
    expect(r.issues[0]?.path).toBe('protocol');
    expect(r.issues[0]?.message).toContain('is required for a chat model not in the catalogue');
  });
  it('a model that is not <vendor>/<model> is an error on model', () => {
    const r = checkChatJob({ model: 'gpt', protocol: 'chat-completions', input: hi });
    expect(r.issues).toEqual([{ path: 'model', message: '"gpt" is not a chat model id of the form <vendor>/<model>', type: 'validation_error' }]);
  });
});

describe('checkChatJob: input', () => {
  const M = 'vendora/chat-5';
  const one = (input: unknown) => {
    const r = checkChatJob({ model: M, input });
    expect(r.issues).toHaveLength(1);
    expect(r.input).toBeNull();
    return r.issues[0]!;
  };
  it('accepts every role, string or part-array content, stream, and passes other keys through', () => {
    const input = {
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'developer', content: 'rules' },
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        { role: 'assistant', content: 'hello' },
        { role: 'tool', content: 'result', tool_call_id: 'call_1' },
      ],
      stream: true,
      temperature: 0.2,
      max_tokens: 64,
    };
    const r = checkChatJob({ model: M, input });
    expect(r.issues).toEqual([]);
    expect(r.input).toEqual(input);
  });
  it('messages is required and non-empty', () => {
    expect(one({})).toMatchObject({ path: 'input.messages', message: 'is required (a non-empty array of {role, content})' });
    expect(one({ messages: [] })).toMatchObject({ path: 'input.messages', message: 'must hold at least one message' });
    expect(one({ messages: 'hi' })).toMatchObject({ path: 'input.messages', message: 'must be an array of {role, content}' });
  });
  it('role must be one of the five', () => {
    expect(one({ messages: [{ role: 'bot', content: 'x' }] })).toMatchObject({
      path: 'input.messages[0].role',
      message: 'role "bot" is not one of system, developer, user, assistant, tool',
    });
    expect(one({ messages: [{ content: 'x' }] })).toMatchObject({ path: 'input.messages[0].role', message: expect.stringContaining('is required') });
  });
  it('content must be a string or an array of parts', () => {
    expect(one({ messages: [{ role: 'user', content: 3 }] })).toMatchObject({ path: 'input.messages[0].content', message: 'must be a string or an array of parts' });
    expect(one({ messages: [{ role: 'user' }] })).toMatchObject({ path: 'input.messages[0].content', message: 'is required (a string or an array of parts)' });
    expect(one({ messages: [{ role: 'user', content: ['hi'] }] }).path).toMatch(/^input\.messages\[0\]\.content/);
  });
  it('stream must be a boolean; model inside input is rejected; input must be an object', () => {
    expect(one({ ...hi, stream: 'yes' })).toMatchObject({ path: 'input.stream', message: 'must be true or false' });
    expect(one({ ...hi, model: 'vendora/chat-4o' })).toMatchObject({ path: 'input.model', message: expect.stringContaining('belongs to the job') });
    expect(one('hello')).toMatchObject({ path: 'input', message: 'must be an object with messages' });
  });
  it('reports protocol and input issues together', () => {
    const r = checkChatJob({ model: M, protocol: 'gemini', input: { messages: [] } });
    expect(r.issues.map((i) => i.path)).toEqual(['protocol', 'input.messages']);
  });
  it('the input schema converts to JSON Schema', () => {
    const schema = JSON.stringify(z.toJSONSchema(chatInput, { io: 'input' }));
    expect(schema).toContain('messages');
  });
});
