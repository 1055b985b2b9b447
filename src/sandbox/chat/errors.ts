import type { ChatProtocol } from '../../models/chat.js';

/**
 * Error bodies in each protocol's own shape (chat-protocols.md section 6).
 *
 *   chat-completions, responses: {"error":{"message","type","param","code"}}
 *   messages:                    {"type":"error","error":{"type","message"},"request_id"}
 *   gemini:                      {"error":{"code":<status>,"message","status":"<RPC status>"}}
 *
 * Statuses: 400 bad request, 401 missing/unknown key, 402 insufficient credits
 * (every protocol; choice: the contract's 402 insufficient_credits_error, which
 * no SDK retries), 404 unknown model, 429 rate limit (faults), 500/502/503 (faults).
 */

export interface ChatErrorOptions {
  /** OpenAI `code` (e.g. invalid_api_key, model_not_found). */
  code?: string | null;
  /** OpenAI `param` (e.g. model). */
  param?: string | null;
  /** Anthropic request id. */
  requestId?: string;
}

const OPENAI_TYPE: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'invalid_request_error',
  402: 'insufficient_quota',
  403: 'permission_error',
  404: 'invalid_request_error',
  413: 'invalid_request_error',
  415: 'invalid_request_error',
  429: 'requests',
  500: 'server_error',
  502: 'server_error',
  503: 'server_error',
};

const OPENAI_CODE: Readonly<Record<number, string>> = {
  401: 'invalid_api_key',
  402: 'insufficient_quota',
  404: 'model_not_found',
  429: 'rate_limit_exceeded',
};

const ANTHROPIC_TYPE: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  415: 'invalid_request_error',
  429: 'rate_limit_error',
  500: 'api_error',
  502: 'api_error',
  503: 'overloaded_error',
  529: 'overloaded_error',
};

const GOOGLE_STATUS: Readonly<Record<number, string>> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  402: 'RESOURCE_EXHAUSTED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  413: 'INVALID_ARGUMENT',
  415: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
};

export function chatErrorBody(protocol: ChatProtocol, status: number, message: string, o: ChatErrorOptions = {}): Record<string, unknown> {
  switch (protocol) {
    case 'chat-completions':
    case 'responses':
      return {
        error: {
          message,
          type: OPENAI_TYPE[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error'),
          param: o.param ?? null,
          code: o.code !== undefined ? o.code : (OPENAI_CODE[status] ?? null),
        },
      };
    case 'messages':
      return {
        type: 'error',
        error: { type: ANTHROPIC_TYPE[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'), message },
        request_id: o.requestId ?? null,
      };
    case 'gemini':
      return { error: { code: status, message, status: GOOGLE_STATUS[status] ?? (status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT') } };
  }
}

/**
 * The error event sent in the middle of a stream (faults 500-after, 502-after):
 *   chat-completions: data: {"error":{...}} (the SDK throws APIError)
 *   responses:        event: error, data {type:"error",code,message,param,sequence_number, error:{...}}
 *                     (the nested `error` makes openai 6.x throw too; 7.x throws on `event: error`)
 *   messages:         event: error, data {type:"error",error:{type,message}}
 *   gemini:           data: {"error":{code,message,status}}
 */
export function midStreamError(protocol: ChatProtocol, status: number, message: string): Record<string, unknown> {
  const body = chatErrorBody(protocol, status, message);
  if (protocol === 'responses') {
    const inner = body.error as Record<string, unknown>;
    return { type: 'error', code: inner.type, message, param: null, error: inner };
  }
  if (protocol === 'messages') return { type: 'error', error: body.error };
  return body;
}

/** The sandbox's shared error body `{code, error:{message, type}}` (src/sandbox/http.ts), as parsed JSON, or null. */
export function genericErrorMessage(payload: unknown): string | null {
  if (typeof payload !== 'object' || payload === null || !('code' in payload) || !('error' in payload)) return null;
  const e = payload.error;
  if (typeof payload.code !== 'number' || typeof e !== 'object' || e === null || !('message' in e) || typeof e.message !== 'string') return null;
  return e.message;
}
