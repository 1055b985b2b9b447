import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { SandboxContext } from '../context.js';
import { servedChunks, type Served } from '../files.js';
import { faultOf, sendError } from '../http.js';

/** Generated files stay downloadable this long after their task finished; then 410. */
export const FILE_TTL_MS = 24 * 3600 * 1000;

/**
 * GET /files/:task_id/:name (generated results) and GET /temp/* (uploads).
 * No key needed, as with a CDN link. A `truncate` fault sends the full
 * Content-Length and closes the connection halfway through the body. A file
 * padded to `videoBytes` is streamed as it is made (servedChunks).
 */
export function fileRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  app.get<{ Params: { task_id: string; name: string } }>('/files/:task_id/:name', { config: { endpoint: 'file' } }, async (req, reply) => {
    const task = ctx.tasks.get(req.params.task_id);
    const now = ctx.now();
    const result = task ? ctx.servedResult(task, now) : null;
    const blob = result?.blobs.find((b) => b.name === req.params.name);
    if (!task || !blob) return sendError(reply, 404, `file ${req.params.task_id}/${req.params.name} not found`);
    if (now >= task.endAt + FILE_TTL_MS) return sendError(reply, 410, `file ${req.params.name} expired 24 hours after its task finished`);
    return send(req, reply, ctx.files.served(task, blob), blob.contentType, blob.name);
  });

  app.get<{ Params: { '*': string } }>('/temp/*', { config: { endpoint: 'file' } }, async (req, reply) => {
    const path = `temp/${req.params['*']}`;
    const u = ctx.files.getUpload(path, ctx.now());
    if (u === 'expired') return sendError(reply, 410, `upload ${path} expired 72 hours after upload`);
    if (!u) return sendError(reply, 404, `upload ${path} not found`);
    return send(req, reply, { head: u.bytes, pad: 0 }, u.contentType, path.split('/').pop() ?? 'file');
  });
}

function send(req: FastifyRequest, reply: FastifyReply, served: Served, contentType: string, name: string): FastifyReply {
  const { head: bytes, pad } = served;
  const size = bytes.length + pad;
  const headers = {
    'content-type': contentType,
    'content-length': String(size),
    'content-disposition': `inline; filename="${name.replace(/"/g, '')}"`,
    'cache-control': 'private, max-age=86400',
  };
  if (faultOf(req)?.kind === 'truncate') {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, headers);
    if (pad === 0) res.write(bytes.subarray(0, Math.floor(size / 2)), () => res.socket?.destroy());
    else Readable.from(servedChunks(served, Math.floor(size / 2))).on('end', () => res.socket?.destroy()).pipe(res, { end: false });
    return reply;
  }
  return reply.headers(headers).send(pad === 0 ? bytes : Readable.from(servedChunks(served)));
}
