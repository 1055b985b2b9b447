import * as z from 'zod';
import { contentText } from './reply.js';
import { bearer, cutPoint, firstIssue, type ChatCall, type ProtocolHandler } from './protocol.js';
import { midStreamError } from './errors.js';
import { checkParts, checkRole } from './parts.js';

/**
 * OpenAI Chat Completions: POST /v1/chat/completions (and /chat/completions).
 * Key: Authorization: Bearer. Stream: data-only chunks, the first delta with
 * role "assistant", the last choice chunk with finish_reason, a usage chunk
 * (choices: []) only when stream_options.include_usage, then `data: [DONE]`.
 */

/** Roles the protocol accepts (`function` is OpenAI's deprecated one, still accepted there). */
const ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'] as const;

const tokens = z.number({ error: 'must be a positive integer' }).int({ error: 'must be a positive integer' }).positive({ error: 'must be a positive integer' });

const body = z.looseObject({
  model: z.string({ error: 'is required (a model id string)' }).min(1, { error: 'is required (a model id string)' }),
  messages: z
    .array(
      z
        .looseObject({
          role: z.unknown(),
          content: z.union([z.string(), z.array(z.unknown()), z.null()], { error: 'must be a string or an array of parts' }).optional(),
        }, { error: 'must be an object with role and content' })
        .superRefine((m, ctx) => {
          checkRole(ctx, m.role, ['role'], ROLES);
          checkParts(ctx, m.content, ['content'], ['text']);
        }),
      { error: 'is required (a non-empty array of {role, content})' },
    )
    .min(1, { error: 'must hold at least one message' }),
  stream: z.boolean({ error: 'must be true or false' }).nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean({ error: 'must be true or false' }).nullish() }, { error: 'must be an object' }).nullish(),
  max_completion_tokens: tokens.nullish(),
  max_tokens: tokens.nullish(),
});

function includeUsage(b: Record<string, unknown>): boolean {
  const o = b.stream_options;
  return typeof o === 'object' && o !== null && 'include_usage' in o && o.include_usage === true;
}

function usage(call: ChatCall) {
  const r = call.reply;
  return { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens };
}

export const completions: ProtocolHandler = {
  protocol: 'chat-completions',
  keyHint: 'Authorization: Bearer <API_KEY>',
  key: bearer,

  parse(raw) {
    const p = body.safeParse(raw);
    if (!p.success) return firstIssue(p.error);
    const b = p.data;
    const texts = b.messages.map((m) => contentText(m.content));
    const lastUser = [...b.messages].reverse().find((m) => m.role === 'user');
    return {
      prompt: { model: b.model, texts, lastUser: lastUser ? contentText(lastUser.content) : '', maxTokens: b.max_completion_tokens ?? b.max_tokens ?? null },
      stream: b.stream === true,
    };
  },

  unknownModel: (model) => `The model \`${model}\` does not exist or you do not have access to it.`,

  json(call) {
    return {
      id: call.id,
      object: 'chat.completion',
      created: call.created,
      model: call.model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: call.reply.text, refusal: null, annotations: [] },
          logprobs: null,
          finish_reason: call.reply.truncated ? 'length' : 'stop',
        },
      ],
      usage: usage(call),
      system_fingerprint: 'fp_sandbox',
    };
  },

  stream(call, sse, cut) {
    const withUsage = includeUsage(call.body);
    const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
      id: call.id,
      object: 'chat.completion.chunk',
      created: call.created,
      model: call.model,
      system_fingerprint: 'fp_sandbox',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(withUsage ? { usage: null } : {}),
    });
    sse.send(chunk({ role: 'assistant', content: '', refusal: null }, null));
    const deltas = call.reply.deltas;
    const stopAt = cut ? cutPoint(deltas.length) : deltas.length;
    for (let i = 0; i < stopAt; i++) sse.send(chunk({ content: deltas[i] }, null));
    if (cut) {
      if (cut.kind === 'drop') return sse.cut();
      sse.send(midStreamError('chat-completions', cut.status, cut.message));
      return sse.end();
    }
    sse.send(chunk({}, call.reply.truncated ? 'length' : 'stop'));
    if (withUsage) {
      sse.send({ id: call.id, object: 'chat.completion.chunk', created: call.created, model: call.model, system_fingerprint: 'fp_sandbox', choices: [], usage: usage(call) });
    }
    sse.send('[DONE]');
    sse.end();
  },
};
