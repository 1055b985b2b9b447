import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ChatProtocol } from '../../models/chat.js';
import { chatErrorBody } from '../chat/errors.js';
import { clipPath, detailStyle } from '../framework.js';
import { sendError } from '../http.js';

/**
 * Requests no route matches. A path that exists for other methods answers as HTTP
 * says (RFC 9110): 405 with `Allow` (OPTIONS: 204 with `Allow`), in the endpoint's
 * error shape (`{detail}` on status and detail, the protocol's body on chat paths,
 * else `{code, error}`); any other path is a 404.
 */

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** The methods routed at `url` (its path), in METHODS order. */
export function allowedMethods(app: FastifyInstance, url: string): string[] {
  const path = url.split('?')[0] ?? '';
  try {
    return METHODS.filter((m) => app.findRoute({ method: m, url: path }) !== null);
  } catch {
    return [];
  }
}

function chatProtocolOf(path: string): ChatProtocol | null {
  if (/^(\/v1)?\/chat\/completions$/.test(path)) return 'chat-completions';
  if (/^(\/v1)?\/responses$/.test(path)) return 'responses';
  if (/^(\/v1)?\/messages$/.test(path)) return 'messages';
  if (/^\/(v1|v1beta|v1alpha)\/models\//.test(path)) return 'gemini';
  return null;
}

export function notFoundHandler(app: FastifyInstance) {
  return (req: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const allowed = allowedMethods(app, req.url);
    if (allowed.length === 0) return sendError(reply, 404, `no endpoint ${req.method} ${clipPath(req.url)}`);
    const allow = allowed.join(', ');
    if (req.method === 'OPTIONS') return reply.code(204).header('allow', allow).send();
    reply.header('allow', allow);
    const message = `method not allowed: ${req.method} ${clipPath(req.url)}; this path takes ${allow}`;
    const protocol = chatProtocolOf(req.url.split('?')[0] ?? '');
    if (protocol) return reply.code(405).type('application/json; charset=utf-8').send(chatErrorBody(protocol, 405, message));
    return sendError(reply, 405, message, detailStyle(req.url));
  };
}
