import type { ChatProtocol } from '../../models/chat.js';

/**
 * The wire request of one chat call, per protocol (chat-protocols.md).
 *
 * | protocol         | path                                                        | key header             |
 * |------------------|-------------------------------------------------------------|------------------------|
 * | chat-completions | /v1/chat/completions                                        | Authorization: Bearer  |
 * | responses        | /v1/responses                                               | Authorization: Bearer  |
 * | messages         | /v1/messages                                                | x-api-key              |
 * | gemini           | /v1beta/models/<vendor>/<model>:generateContent             | x-goog-api-key         |
 * |                  | /v1beta/models/<vendor>/<model>:streamGenerateContent?alt=sse |                      |
 *
 * Messages are the manifest's `{role, content}` list (content a string or an
 * array of parts); every other input key is passed through as is, at the top
 * level of the body, so each protocol's own options apply (`temperature`,
 * `max_tokens`, `generationConfig`, ...). Options never override `model`,
 * the messages or the stream switch.
 */

export interface ChatMessage {
  role: string;
  content: string | ReadonlyArray<Record<string, unknown>>;
}

export interface ChatRequest {
  model: string;
  protocol: ChatProtocol;
  messages: readonly ChatMessage[];
  stream: boolean;
  /** Protocol options, passed through (everything in input except messages and stream). */
  options: Record<string, unknown>;
}

export interface WireRequest {
  path: string;
  /** Headers besides content-type and the key. */
  headers: Record<string, string>;
  /** The header that carries the key, and its value given the key. */
  keyHeader: (key: string) => [string, string];
  body: Record<string, unknown>;
}

/** Choice: the Messages protocol requires max_tokens; when the job gives none, 1024 is sent. */
export const MESSAGES_DEFAULT_MAX_TOKENS = 1024;
/** anthropic-version sent with Messages requests (the 0.x SDKs' value; any is accepted). */
export const ANTHROPIC_VERSION = '2023-06-01';

const bearer = (key: string): [string, string] => ['authorization', `Bearer ${key}`];

/** Text of a content value: a string, or the `text` of each part, joined with newlines. */
export function contentText(content: ChatMessage['content']): string {
  if (typeof content === 'string') return content;
  return content.map((p) => (typeof p.text === 'string' ? p.text : '')).join('\n');
}

/** Parts with type "text" renamed for Responses (input_text, or output_text for assistant turns). */
function responsesContent(m: ChatMessage): ChatMessage['content'] {
  if (typeof m.content === 'string') return m.content;
  const textType = m.role === 'assistant' ? 'output_text' : 'input_text';
  return m.content.map((p) => (p.type === 'text' ? { ...p, type: textType } : p));
}

const isSystem = (m: ChatMessage): boolean => m.role === 'system' || m.role === 'developer';

export function wireRequest(req: ChatRequest): WireRequest {
  const { model, messages, stream, options } = req;
  switch (req.protocol) {
    case 'chat-completions': {
      const body: Record<string, unknown> = { ...options, model, messages, stream };
      if (stream) {
        const given = typeof options.stream_options === 'object' && options.stream_options !== null ? options.stream_options : {};
        body.stream_options = { ...given, include_usage: true };
      }
      return { path: '/v1/chat/completions', headers: {}, keyHeader: bearer, body };
    }
    case 'responses': {
      const input = messages.map((m) => ({ role: m.role, content: responsesContent(m) }));
      return { path: '/v1/responses', headers: {}, keyHeader: bearer, body: { ...options, model, input, stream } };
    }
    case 'messages': {
      const system = messages.filter(isSystem).map((m) => contentText(m.content));
      const turns = messages.filter((m) => !isSystem(m)).map((m) => ({ role: m.role === 'assistant' ? 'assistant' : 'user', content: m.content }));
      const body: Record<string, unknown> = { max_tokens: MESSAGES_DEFAULT_MAX_TOKENS, ...options, model, messages: turns, stream };
      if (system.length > 0 && body.system === undefined) body.system = system.join('\n');
      return { path: '/v1/messages', headers: { 'anthropic-version': ANTHROPIC_VERSION }, keyHeader: (k) => ['x-api-key', k], body };
    }
    case 'gemini': {
      const system = messages.filter(isSystem);
      const contents = messages
        .filter((m) => !isSystem(m))
        .map((m) => ({ role: m.role === 'assistant' ? 'model' : 'user', parts: [{ text: contentText(m.content) }] }));
      const body: Record<string, unknown> = { ...options, contents };
      if (system.length > 0 && body.systemInstruction === undefined) body.systemInstruction = { parts: system.map((m) => ({ text: contentText(m.content) })) };
      // The model id keeps its vendor slash in the path (the SDK does not encode it either).
      const path = `/v1beta/models/${model}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`;
      return { path, headers: {}, keyHeader: (k) => ['x-goog-api-key', k], body };
    }
  }
}
