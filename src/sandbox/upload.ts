import type { FastifyInstance } from 'fastify';
import type { SandboxContext } from './context.js';
import { authenticate, authMessage, sendError } from './http.js';

/**
 * Upload endpoints. Placeholder until the upload engineer replaces this file
 * (keep the export uploadRoutes(app, ctx)). Building blocks already in the core:
 * ctx.files.putUpload(relPath, bytes, contentType, expiresAt) stores bytes and
 * returns the URL served at GET /temp/*; ctx.stats.uploads.{accepted,refused};
 * endpoint name 'upload' for stats and faults; net.ts isPrivateHost/isLoopbackHost.
 */
export function uploadRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const notYet = async (req: import('fastify').FastifyRequest, reply: import('fastify').FastifyReply) => {
    if (!authenticate(ctx, req)) return sendError(reply, 401, authMessage(req));
    return sendError(reply, 501, 'upload endpoints are not implemented in this sandbox yet');
  };
  const config = { endpoint: 'upload' };
  app.post('/api/common/upload/base64', { config }, notYet);
  app.post('/api/common/upload/stream', { config }, notYet);
  app.post('/api/common/upload/url', { config }, notYet);
}
