import * as z from 'zod';
import { contentText } from './reply.js';
import { bearer, cutPoint, firstIssue, type ChatCall, type ProtocolHandler } from './protocol.js';
import { midStreamError } from './errors.js';
import { checkParts, checkRole } from './parts.js';

/** Roles of message input items. */
const ROLES = ['user', 'assistant', 'system', 'developer'] as const;

/**
 * OpenAI Responses: POST /v1/responses (and /responses). Key: Authorization: Bearer.
 * Stream: named events with sequence_number from 0: response.created,
 * response.in_progress, output_item.added, content_part.added,
 * output_text.delta..., output_text.done, content_part.done, output_item.done,
 * then response.completed (or response.incomplete when max_output_tokens cut
 * the reply); the connection closes, no [DONE].
 * Mid-stream fault: `event: error` (then `response.failed`), see errors.ts.
 */

const body = z.looseObject({
  model: z.string({ error: 'is required (a model id string)' }).min(1, { error: 'is required (a model id string)' }),
  input: z.union([z.string(), z.array(z.unknown())], { error: 'is required (a string or an array of input items)' }).superRefine((input, ctx) => {
    if (typeof input === 'string') return;
    input.forEach((item: unknown, i) => {
      if (typeof item !== 'object' || item === null || Array.isArray(item)) {
        ctx.addIssue({ code: 'custom', path: [i], message: 'must be an input item object such as {"role":"user","content":"..."}' });
        return;
      }
      const it = item as Record<string, unknown>;
      // Messages: {role, content} (type "message" or none); other item types (function_call, ...) pass as they are.
      if (it.type !== undefined && it.type !== 'message') return;
      checkRole(ctx, it.role, [i, 'role'], ROLES);
      if (typeof it.content !== 'string' && !Array.isArray(it.content)) ctx.addIssue({ code: 'custom', path: [i, 'content'], message: 'must be a string or an array of content parts' });
      else checkParts(ctx, it.content, [i, 'content'], ['input_text', 'output_text']);
    });
  }),
  instructions: z.string({ error: 'must be a string' }).nullish(),
  stream: z.boolean({ error: 'must be true or false' }).nullish(),
  max_output_tokens: z.number({ error: 'must be a positive integer' }).int({ error: 'must be a positive integer' }).positive({ error: 'must be a positive integer' }).nullish(),
});

interface Item {
  role?: unknown;
  content?: unknown;
  output?: unknown;
}

function itemText(item: unknown): string {
  if (typeof item === 'string') return item;
  if (typeof item !== 'object' || item === null) return '';
  const i = item as Item;
  if (i.content !== undefined) return contentText(i.content);
  return typeof i.output === 'string' ? i.output : '';
}

function usage(call: ChatCall) {
  const r = call.reply;
  return {
    input_tokens: r.promptTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: r.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: r.promptTokens + r.completionTokens,
  };
}

type Status = 'in_progress' | 'completed' | 'incomplete' | 'failed';

function responseObject(call: ChatCall, status: Status, output: unknown[], error: unknown = null): Record<string, unknown> {
  const b = call.body;
  return {
    id: call.id,
    object: 'response',
    created_at: call.created,
    status,
    error,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: typeof b.instructions === 'string' ? b.instructions : null,
    max_output_tokens: typeof b.max_output_tokens === 'number' ? b.max_output_tokens : null,
    model: call.model,
    output,
    parallel_tool_calls: true,
    previous_response_id: typeof b.previous_response_id === 'string' ? b.previous_response_id : null,
    reasoning: { effort: null, summary: null },
    store: typeof b.store === 'boolean' ? b.store : true,
    temperature: typeof b.temperature === 'number' ? b.temperature : 1,
    top_p: typeof b.top_p === 'number' ? b.top_p : 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    truncation: 'disabled',
    user: null,
    metadata: typeof b.metadata === 'object' && b.metadata !== null ? b.metadata : {},
    usage: status === 'in_progress' ? null : usage(call),
  };
}

function part(text: string) {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

function message(call: ChatCall, status: 'in_progress' | 'completed' | 'incomplete', content: unknown[]) {
  return { id: call.itemId, type: 'message', status, role: 'assistant', content };
}

export const responses: ProtocolHandler = {
  protocol: 'responses',
  keyHint: 'Authorization: Bearer <API_KEY>',
  key: bearer,

  parse(raw) {
    const p = body.safeParse(raw);
    if (!p.success) return firstIssue(p.error);
    const b = p.data;
    const items: unknown[] = typeof b.input === 'string' ? [{ role: 'user', content: b.input }] : b.input;
    const texts = [...(b.instructions ? [b.instructions] : []), ...items.map(itemText)];
    const lastUser = [...items].reverse().find((i) => typeof i === 'string' || (typeof i === 'object' && i !== null && (i as Item).role === 'user'));
    return {
      prompt: { model: b.model, texts, lastUser: lastUser === undefined ? '' : itemText(lastUser), maxTokens: b.max_output_tokens ?? null },
      stream: b.stream === true,
    };
  },

  unknownModel: (model) => `The model \`${model}\` does not exist or you do not have access to it.`,

  json(call) {
    const done = call.reply.truncated ? 'incomplete' : 'completed';
    return responseObject(call, done, [message(call, done, [part(call.reply.text)])]);
  },

  stream(call, sse, cut) {
    let seq = 0;
    const send = (type: string, fields: Record<string, unknown>) => sse.send({ type, sequence_number: seq++, ...fields }, type);
    const at = { item_id: call.itemId, output_index: 0, content_index: 0 };
    send('response.created', { response: responseObject(call, 'in_progress', []) });
    send('response.in_progress', { response: responseObject(call, 'in_progress', []) });
    send('response.output_item.added', { output_index: 0, item: message(call, 'in_progress', []) });
    send('response.content_part.added', { ...at, part: part('') });
    const deltas = call.reply.deltas;
    const stopAt = cut ? cutPoint(deltas.length) : deltas.length;
    for (let i = 0; i < stopAt; i++) send('response.output_text.delta', { ...at, delta: deltas[i], logprobs: [] });
    if (cut) {
      if (cut.kind === 'drop') return sse.cut();
      send('error', midStreamError('responses', cut.status, cut.message));
      const sent = deltas.slice(0, stopAt).join('');
      const error = { code: 'server_error', message: cut.message };
      send('response.failed', { response: responseObject(call, 'failed', [message(call, 'incomplete', [part(sent)])], error) });
      return sse.end();
    }
    const text = call.reply.text;
    const done = call.reply.truncated ? 'incomplete' : 'completed';
    send('response.output_text.done', { ...at, text, logprobs: [] });
    send('response.content_part.done', { ...at, part: part(text) });
    const item = message(call, done, [part(text)]);
    send('response.output_item.done', { output_index: 0, item });
    send(`response.${done}`, { response: responseObject(call, done, [item]) });
    sse.end();
  },
};
