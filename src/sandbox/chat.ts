import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { findChatModel, type ChatProtocol } from '../models/chat.js';
import { completions } from './chat/completions.js';
import { chatErrorBody, genericErrorMessage, type ChatErrorOptions } from './chat/errors.js';
import { gemini, GEMINI_METHODS, parseGeminiPath } from './chat/gemini.js';
import { messages } from './chat/messages.js';
import type { ChatCall, ProtocolHandler, RouteInfo, StreamCut } from './chat/protocol.js';
import { buildReply } from './chat/reply.js';
import { responses } from './chat/responses.js';
import { SseWriter } from './chat/sse.js';
import type { SandboxContext } from './context.js';
import { AUTH_INVALID, AUTH_MALFORMED, drop, faultOf, isObject, malformedAuthorization } from './http.js';
import { Rng, mixSeed } from './rng.js';

/**
 * Chat protocol endpoints (src/sandbox/README.md, "Chat endpoints"):
 *   POST /v1/chat/completions, /chat/completions   OpenAI Chat Completions
 *   POST /v1/responses, /responses                 OpenAI Responses
 *   POST /v1/messages, /messages                   Claude-style Messages
 *   POST /{v1,v1beta,v1alpha}/models/<vendor>/<model>:generateContent
 *   POST /{v1,v1beta,v1alpha}/models/<vendor>/<model>:streamGenerateContent?alt=sse
 * One module per protocol in ./chat/; this file holds the shared flow: key,
 * body, model and protocol check, deterministic reply, charge, faults, answer.
 *
 * Faults (endpoint `chat`): 429/500/502/503, drop and slow are applied by the
 * server's shared hook; an onSend hook on every chat route rewrites the shared
 * error body `{code, error}` into the protocol's own shape. 500-after,
 * 502-after and drop-after happen after the charge: in a stream, after about
 * half the deltas, as the protocol's error event (or a cut connection).
 */

const LABEL: Readonly<Record<ChatProtocol, string>> = {
  'chat-completions': 'Chat Completions (POST /v1/chat/completions)',
  responses: 'Responses (POST /v1/responses)',
  messages: 'Claude Messages (POST /v1/messages)',
  gemini: 'Gemini native (POST /v1beta/models/<model>:generateContent)',
};

const CUT_MESSAGE: Readonly<Record<string, string>> = {
  500: 'internal error: the model stream failed (sandbox fault)',
  502: 'upstream service error: the model stream failed (sandbox fault)',
};

const ids = new WeakMap<SandboxContext, Rng>();

function idRng(ctx: SandboxContext): Rng {
  let r = ids.get(ctx);
  if (!r) {
    r = new Rng(mixSeed(ctx.options.seed, 0xc4a7));
    ids.set(ctx, r);
  }
  return r;
}

const ID_PREFIX: Readonly<Record<ChatProtocol, string>> = { 'chat-completions': 'chatcmpl-', responses: 'resp_', messages: 'msg_', gemini: '' };

function sendChatError(reply: FastifyReply, protocol: ChatProtocol, status: number, message: string, o: ChatErrorOptions = {}): FastifyReply {
  const requestId = String(reply.getHeader('request-id') ?? '');
  return reply.code(status).type('application/json; charset=utf-8').send(chatErrorBody(protocol, status, message, { requestId, ...o }));
}

async function handle(ctx: SandboxContext, h: ProtocolHandler, req: FastifyRequest, reply: FastifyReply, route: RouteInfo): Promise<FastifyReply> {
  const rng = idRng(ctx);
  const requestId = `req_${rng.hex(24)}`;
  reply.header('x-request-id', requestId).header('request-id', requestId);
  const p = h.protocol;

  const key = h.key(req);
  const account = key === null ? undefined : ctx.accounts.get(key);
  if (!account) {
    if (key !== null) return sendChatError(reply, p, 401, AUTH_INVALID);
    if (malformedAuthorization(req)) return sendChatError(reply, p, 401, AUTH_MALFORMED);
    return sendChatError(reply, p, 401, `missing API key: send ${h.keyHint}`, { code: null });
  }
  ctx.stats.keyRequest(account.hash);

  const body: unknown = req.body;
  if (!isObject(body)) return sendChatError(reply, p, 400, 'body: must be a JSON object');
  const parsed = h.parse(body, route);
  if ('error' in parsed) return sendChatError(reply, p, 400, parsed.error, { param: parsed.param ?? null, code: null });
  const { prompt, stream } = parsed;

  const model = findChatModel(prompt.model);
  if (!model) return sendChatError(reply, p, 404, h.unknownModel(prompt.model, route), { param: 'model' });
  if (!model.protocols.includes(p)) {
    const supported = model.protocols.map((x) => LABEL[x]).join(', ');
    return sendChatError(reply, p, 400, `model ${model.id} does not support the ${LABEL[p]} protocol; it supports: ${supported}`, {
      param: 'model',
      code: 'unsupported_protocol',
    });
  }

  const answer = buildReply(ctx.options.seed, prompt);
  const now = ctx.now();
  const credits = answer.credits * ctx.options.priceFactor;
  if (!account.charge(credits, now)) {
    return sendChatError(reply, p, 402, `insufficient credits: this call costs ${credits} credits, the balance is ${account.balance(now)}`);
  }
  const call: ChatCall = {
    id: `${ID_PREFIX[p]}${rng.hex(24)}`,
    itemId: `msg_${rng.hex(24)}`,
    created: Math.floor(now / 1000),
    model: model.id,
    reply: answer,
    body,
    route,
  };

  const fault = faultOf(req);
  let cut: StreamCut | null = null;
  if (fault?.kind === 'drop-after') cut = { kind: 'drop' };
  else if (fault?.kind === '500-after' || fault?.kind === '502-after') {
    const status = fault.kind === '500-after' ? 500 : 502;
    cut = { kind: 'error', status, message: CUT_MESSAGE[status] ?? 'internal error' };
  }

  if (!stream) {
    if (cut?.kind === 'drop') return drop(req, reply);
    if (cut) return sendChatError(reply, p, cut.status, cut.message);
    return reply.code(200).type('application/json; charset=utf-8').send(h.json(call));
  }
  const sse = new SseWriter(reply, { 'x-request-id': requestId, 'request-id': requestId }, h.crlf === true);
  h.stream(call, sse, cut);
  return reply;
}

/** Rewrite the sandbox's shared error body (faults, body parser) into the protocol's shape. */
function translateErrors(protocol: ChatProtocol) {
  return async (_req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> => {
    if (reply.statusCode < 400 || typeof payload !== 'string') return payload;
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch {
      return payload;
    }
    const message = genericErrorMessage(parsed);
    if (message === null) return payload;
    let requestId = reply.getHeader('request-id');
    if (requestId === undefined) {
      requestId = `req_${Date.now().toString(16)}`;
      reply.header('x-request-id', requestId).header('request-id', requestId);
    }
    return JSON.stringify(chatErrorBody(protocol, reply.statusCode, message, { requestId: String(requestId) }));
  };
}

export function chatRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const plain = (h: ProtocolHandler, paths: string[]) => {
    for (const url of paths) {
      app.post(url, { config: { endpoint: 'chat' }, onSend: translateErrors(h.protocol) }, (req, reply) => handle(ctx, h, req, reply, {}));
    }
  };
  plain(completions, ['/v1/chat/completions', '/chat/completions']);
  plain(responses, ['/v1/responses', '/responses']);
  plain(messages, ['/v1/messages', '/messages']);

  // Gemini: the model id contains a slash and the method follows a colon, so match the rest by hand.
  for (const version of ['v1', 'v1beta', 'v1alpha']) {
    app.post(`/${version}/models/*`, { config: { endpoint: 'chat' }, onSend: translateErrors('gemini') }, async (req, reply) => {
      const route = parseGeminiPath(req.url);
      if (!route || !(GEMINI_METHODS as readonly string[]).includes(route.method ?? '')) {
        return sendChatError(reply, 'gemini', 404, `no method at ${req.url.split('?')[0]}: use /${version}/models/<vendor>/<model>:generateContent or :streamGenerateContent?alt=sse`);
      }
      return handle(ctx, gemini, req, reply, route);
    });
  }
}
