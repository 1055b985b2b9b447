import * as z from 'zod';
import { ApiError, BadResponseError, NetworkError, UnusableAnswerError } from '../../errors.js';
import { MAX_DEPTH, nestingWithin } from '../limits.js';
import type { ChatProtocol } from '../../models/chat.js';

/**
 * Chat answers, per protocol: the text, the token usage and the raw answer.
 * JSON bodies are parsed with zod (loose: only the fields read are checked);
 * streams are split into SSE events, the text is the joined deltas, and a
 * stream counts only when its terminator arrived (chat-completions: [DONE];
 * responses: response.completed; messages: message_stop; gemini: a chunk with
 * finishReason). An error event inside a stream is thrown as ApiError (its
 * status: the protocol's, or 500 when the event names none), a stream that
 * ends without its terminator (or is cut inside its last event) as NetworkError
 * (sent): both are retried.
 */

export interface ChatUsage {
  input_tokens: number;
  output_tokens: number;
}

export interface ChatAnswer {
  text: string;
  usage: ChatUsage;
  /** The JSON body, or for a stream the list of its events `{event, data}` in order. */
  raw: unknown;
}

export interface SseEvent {
  event: string | null;
  /** The data lines joined (parsed as JSON when possible by the protocol readers). */
  data: string;
}

/** Split an SSE body into events; `\n` and `\r\n` framing, comments and blank events dropped. */
export function parseSse(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.replace(/\r\n?/g, '\n').split('\n\n')) {
    let event: string | null = null;
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (event !== null || data.length > 0) out.push({ event, data: data.join('\n') });
  }
  return out;
}

const num = z.number().int().nonnegative();
const usageOf = (input: number | null | undefined, output: number | null | undefined): ChatUsage => ({ input_tokens: input ?? 0, output_tokens: output ?? 0 });

// ---- chat-completions ----

const ccJson = z.looseObject({
  choices: z.array(z.looseObject({ message: z.looseObject({ content: z.string().nullish() }) })).min(1),
  usage: z.looseObject({ prompt_tokens: num, completion_tokens: num }).nullish(),
});
const ccChunk = z.looseObject({
  choices: z.array(z.looseObject({ index: z.number().optional(), delta: z.looseObject({ content: z.string().nullish() }).optional() })).optional(),
  usage: z.looseObject({ prompt_tokens: num, completion_tokens: num }).nullish(),
});

// ---- responses ----

const outputItems = z.array(z.looseObject({ type: z.string(), content: z.array(z.looseObject({ type: z.string(), text: z.string().optional() })).optional() }));
const respUsage = z.looseObject({ input_tokens: num, output_tokens: num }).nullish();
const respJson = z.looseObject({ status: z.string().optional(), output: outputItems, usage: respUsage, error: z.looseObject({ message: z.string() }).nullish() });
const respDelta = z.looseObject({ delta: z.string() });
const respDone = z.looseObject({ response: respJson });

function responsesText(output: z.infer<typeof outputItems>): string {
  let text = '';
  for (const item of output) if (item.type === 'message') for (const c of item.content ?? []) if (c.type === 'output_text' && c.text !== undefined) text += c.text;
  return text;
}

// ---- messages ----

const msgJson = z.looseObject({
  content: z.array(z.looseObject({ type: z.string(), text: z.string().optional() })),
  usage: z.looseObject({ input_tokens: num, output_tokens: num }),
});
const msgStart = z.looseObject({ message: z.looseObject({ usage: z.looseObject({ input_tokens: num, output_tokens: num.optional() }) }) });
const msgDelta = z.looseObject({ delta: z.looseObject({ type: z.string(), text: z.string().optional() }) });
const msgEnd = z.looseObject({ usage: z.looseObject({ output_tokens: num, input_tokens: num.nullish() }) });

const ANTHROPIC_STATUS: Readonly<Record<string, number>> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529,
};

// ---- gemini ----

const gemChunk = z.looseObject({
  candidates: z
    .array(
      z.looseObject({
        content: z.looseObject({ parts: z.array(z.looseObject({ text: z.string().optional(), thought: z.boolean().optional() })).optional() }).optional(),
        finishReason: z.string().optional(),
      }),
    )
    .optional(),
  usageMetadata: z.looseObject({ promptTokenCount: num.optional(), candidatesTokenCount: num.optional() }).optional(),
});

function geminiText(chunk: z.infer<typeof gemChunk>): string {
  let text = '';
  for (const p of chunk.candidates?.[0]?.content?.parts ?? []) if (p.text !== undefined && p.thought !== true) text += p.text;
  return text;
}

// ---- errors ----

/** Every protocol's error body: {error:{message,type|status,code}} or {type:"error",error:{type,message}}. */
const errorBody = z.looseObject({
  error: z.looseObject({ message: z.string(), type: z.string().nullish(), status: z.string().nullish(), code: z.union([z.number(), z.string()]).nullish() }),
});

/** The message and type of an error body in any protocol's shape, or null. */
export function errorOf(payload: unknown): { message: string; type: string | null; code: number | null } | null {
  const r = errorBody.safeParse(payload);
  if (!r.success) return null;
  const e = r.data.error;
  return { message: e.message, type: e.type ?? e.status ?? null, code: typeof e.code === 'number' ? e.code : null };
}

function streamError(protocol: ChatProtocol, payload: unknown, what: string): ApiError {
  const e = errorOf(payload);
  let status = 500;
  if (protocol === 'messages' && e?.type) status = ANTHROPIC_STATUS[e.type] ?? 500;
  else if (protocol === 'gemini' && e?.code !== null && e?.code !== undefined && e.code >= 400 && e.code < 600) status = e.code;
  return new ApiError(status, e?.type ?? null, `${what}: error in the stream: ${e?.message ?? 'no message'}`);
}

function bad(what: string, detail: string): BadResponseError {
  return new BadResponseError(200, `${what}: ${detail}`);
}

function check<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (!r.success) {
    const iss = r.error.issues[0];
    throw bad(what, `unexpected answer (${iss ? `${iss.path.join('.') || 'body'}: ${iss.message}` : 'invalid'})`);
  }
  return r.data;
}

/** A non-streaming 200 body. */
export function readJson(protocol: ChatProtocol, body: unknown, what: string): ChatAnswer {
  switch (protocol) {
    case 'chat-completions': {
      const b = check(ccJson, body, what);
      return { text: b.choices[0]?.message.content ?? '', usage: usageOf(b.usage?.prompt_tokens, b.usage?.completion_tokens), raw: body };
    }
    case 'responses': {
      const b = check(respJson, body, what);
      if (b.status === 'failed') throw new ApiError(500, 'server_error', `${what}: response failed: ${b.error?.message ?? 'no message'}`);
      return { text: responsesText(b.output), usage: usageOf(b.usage?.input_tokens, b.usage?.output_tokens), raw: body };
    }
    case 'messages': {
      const b = check(msgJson, body, what);
      return { text: b.content.map((c) => (c.type === 'text' ? (c.text ?? '') : '')).join(''), usage: usageOf(b.usage.input_tokens, b.usage.output_tokens), raw: body };
    }
    case 'gemini': {
      const b = check(gemChunk, body, what);
      return { text: geminiText(b), usage: usageOf(b.usageMetadata?.promptTokenCount, b.usageMetadata?.candidatesTokenCount), raw: body };
    }
  }
}

function json(data: string, what: string): unknown {
  if (!nestingWithin(data)) throw new UnusableAnswerError(200, `${what}: a stream event is nested deeper than ${MAX_DEPTH} levels`);
  try {
    return JSON.parse(data);
  } catch {
    throw bad(what, `a stream event is not JSON (${data.slice(0, 80)})`);
  }
}

function isJson(data: string): boolean {
  try {
    JSON.parse(data);
    return true;
  } catch {
    return false;
  }
}

function ended(what: string, terminator: string): NetworkError {
  return new NetworkError(`${what}: the stream ended before ${terminator}`, true);
}

/** A whole SSE body. */
export function readStream(protocol: ChatProtocol, body: string, what: string): ChatAnswer {
  const events = parseSse(body);
  // A body that does not end with a blank line was cut inside its last event (the connection
  // closed cleanly mid-event): that event is incomplete, so a failure to read it is a cut stream
  // (NetworkError, retried), not an unusable answer.
  const cutInLast = !/\n\n$/.test(body.replace(/\r\n?/g, '\n'));
  const raw: Array<{ event: string | null; data: unknown }> = [];
  let text = '';
  let usage: ChatUsage = { input_tokens: 0, output_tokens: 0 };
  let complete = false;
  for (const [i, ev] of events.entries()) {
    if (protocol === 'chat-completions' && ev.data === '[DONE]') {
      raw.push({ event: ev.event, data: ev.data });
      complete = true;
      break;
    }
    if (cutInLast && i === events.length - 1 && !isJson(ev.data)) throw ended(what, TERMINATOR[protocol]);
    const data = json(ev.data, what);
    raw.push({ event: ev.event, data });
    switch (protocol) {
      case 'chat-completions': {
        if (errorOf(data)) throw streamError(protocol, data, what);
        const c = check(ccChunk, data, what);
        for (const ch of c.choices ?? []) if ((ch.index ?? 0) === 0) text += ch.delta?.content ?? '';
        if (c.usage) usage = usageOf(c.usage.prompt_tokens, c.usage.completion_tokens);
        break;
      }
      case 'responses': {
        const type = typeof data === 'object' && data !== null && 'type' in data ? data.type : ev.event;
        if (type === 'error') throw streamError(protocol, typeof data === 'object' && data !== null && 'error' in data ? data : { error: data }, what);
        if (type === 'response.output_text.delta') text += check(respDelta, data, what).delta;
        if (type === 'response.failed') throw new ApiError(500, 'server_error', `${what}: response failed in the stream`);
        if (type === 'response.completed' || type === 'response.incomplete') {
          const r = check(respDone, data, what).response;
          text = responsesText(r.output) || text;
          usage = usageOf(r.usage?.input_tokens, r.usage?.output_tokens);
          complete = true;
        }
        break;
      }
      case 'messages': {
        if (ev.event === 'error') throw streamError(protocol, data, what);
        if (ev.event === 'message_start') {
          const m = check(msgStart, data, what).message;
          usage = usageOf(m.usage.input_tokens, m.usage.output_tokens);
        } else if (ev.event === 'content_block_delta') {
          const d = check(msgDelta, data, what).delta;
          if (d.type === 'text_delta') text += d.text ?? '';
        } else if (ev.event === 'message_delta') {
          const u = check(msgEnd, data, what).usage;
          usage = usageOf(u.input_tokens ?? usage.input_tokens, u.output_tokens);
        } else if (ev.event === 'message_stop') {
          complete = true;
        }
        break;
      }
      case 'gemini': {
        if (errorOf(data)) throw streamError(protocol, data, what);
        const c = check(gemChunk, data, what);
        text += geminiText(c);
        if (c.usageMetadata) usage = usageOf(c.usageMetadata.promptTokenCount, c.usageMetadata.candidatesTokenCount);
        if (c.candidates?.[0]?.finishReason !== undefined) complete = true;
        break;
      }
    }
  }
  if (!complete) throw ended(what, TERMINATOR[protocol]);
  return { text, usage, raw };
}

const TERMINATOR: Readonly<Record<ChatProtocol, string>> = {
  'chat-completions': 'data: [DONE]',
  responses: 'response.completed',
  messages: 'message_stop',
  gemini: 'a chunk with finishReason',
};
