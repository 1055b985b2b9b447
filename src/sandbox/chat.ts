import type { FastifyInstance } from 'fastify';
import type { SandboxContext } from './context.js';
import { sendError } from './http.js';

/**
 * Chat protocol endpoints. Placeholder until the chat engineer replaces this
 * file: every chat path answers 501 with a clear message. Keep every chat
 * route in this one file, exported as chatRoutes(app, ctx).
 */
export function chatRoutes(app: FastifyInstance, _ctx: SandboxContext): void {
  const notYet = async (_req: unknown, reply: import('fastify').FastifyReply) =>
    sendError(reply, 501, 'chat endpoints are not implemented in this sandbox yet');
  const config = { endpoint: 'chat' };
  app.post('/v1/chat/completions', { config }, notYet);
  app.post('/v1/responses', { config }, notYet);
  app.post('/v1/messages', { config }, notYet);
  // Gemini-native: /v1beta/models/<vendor>/<model>:generateContent (the model id contains a slash).
  app.post('/v1beta/models/*', { config }, notYet);
  app.post('/v1/models/*', { config }, notYet);
}
