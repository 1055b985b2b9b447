import * as z from 'zod';
import { contentText } from './reply.js';
import { bearer, cutPoint, firstIssue, header, type ChatCall, type ProtocolHandler } from './protocol.js';
import { midStreamError } from './errors.js';
import { checkParts } from './parts.js';

/**
 * Claude-style Messages: POST /v1/messages (and /messages). Key: x-api-key
 * (0.x clients) or Authorization: Bearer (1.x clients); any anthropic-version.
 * `max_tokens` is required. Stream: named events message_start,
 * content_block_start, ping, content_block_delta..., content_block_stop,
 * message_delta (stop_reason and usage.output_tokens), message_stop; the
 * connection closes. Mid-stream fault: `event: error`.
 * temperature/top_p/top_k are ignored (the 2026-10-21 API refuses them; the sandbox does not).
 */

const role = z.enum(['user', 'assistant'], { error: 'must be "user" or "assistant"' });

const body = z.looseObject({
  model: z.string({ error: 'Field required (a model id string)' }).min(1, { error: 'Field required (a model id string)' }),
  max_tokens: z.number({ error: 'Field required (a positive integer)' }).int({ error: 'must be a positive integer' }).positive({ error: 'must be a positive integer' }),
  messages: z
    .array(
      z
        .looseObject({ role, content: z.union([z.string(), z.array(z.unknown())], { error: 'must be a string or an array of content blocks' }) }, { error: 'must be an object with role and content' })
        .superRefine((m, ctx) => checkParts(ctx, m.content, ['content'], ['text'])),
      { error: 'Field required (an array of {role, content})' },
    )
    .min(1, { error: 'must hold at least one message' }),
  system: z
    .union([z.string(), z.array(z.unknown())], { error: 'must be a string or an array of text blocks' })
    .nullish()
    .superRefine((sys, ctx) => checkParts(ctx, sys, [], ['text'])),
  stream: z.boolean({ error: 'must be true or false' }).nullish(),
});

function usage(call: ChatCall) {
  return { input_tokens: call.reply.promptTokens, output_tokens: call.reply.completionTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
}

function stopReason(call: ChatCall): string {
  return call.reply.truncated ? 'max_tokens' : 'end_turn';
}

export const messages: ProtocolHandler = {
  protocol: 'messages',
  keyHint: 'x-api-key: <API_KEY> or Authorization: Bearer <API_KEY>',
  key: (req) => header(req, 'x-api-key') ?? bearer(req),

  parse(raw) {
    const p = body.safeParse(raw);
    if (!p.success) return firstIssue(p.error);
    const b = p.data;
    const system = b.system == null ? [] : [contentText(b.system, ['text'])];
    const texts = [...system, ...b.messages.map((m) => contentText(m.content, ['text']))];
    const lastUser = [...b.messages].reverse().find((m) => m.role === 'user');
    return {
      prompt: { model: b.model, texts, lastUser: lastUser ? contentText(lastUser.content, ['text']) : '', maxTokens: b.max_tokens },
      stream: b.stream === true,
    };
  },

  unknownModel: (model) => `model: ${model}`,

  json(call) {
    return {
      id: call.id,
      type: 'message',
      role: 'assistant',
      model: call.model,
      content: [{ type: 'text', text: call.reply.text }],
      stop_reason: stopReason(call),
      stop_sequence: null,
      usage: usage(call),
    };
  },

  stream(call, sse, cut) {
    const start = {
      id: call.id,
      type: 'message',
      role: 'assistant',
      model: call.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...usage(call), output_tokens: 0 },
    };
    const send = (type: string, fields: Record<string, unknown> = {}) => sse.send({ type, ...fields }, type);
    send('message_start', { message: start });
    send('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
    send('ping');
    const deltas = call.reply.deltas;
    const stopAt = cut ? cutPoint(deltas.length) : deltas.length;
    for (let i = 0; i < stopAt; i++) send('content_block_delta', { index: 0, delta: { type: 'text_delta', text: deltas[i] } });
    if (cut) {
      if (cut.kind === 'drop') return sse.cut();
      sse.send(midStreamError('messages', cut.status, cut.message), 'error');
      return sse.end();
    }
    send('content_block_stop', { index: 0 });
    send('message_delta', { delta: { stop_reason: stopReason(call), stop_sequence: null }, usage: { output_tokens: call.reply.completionTokens } });
    send('message_stop');
    sse.end();
  },
};
