import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import { finished } from 'node:stream/promises';
import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { chatRoutes } from './chat.js';
import { capConnections, HTTP_OPTIONS } from './connections.js';
import type { SandboxContext } from './context.js';
import { clientErrorHandler, frameworkAnswer, MAX_PARAM_LENGTH, poisonedKey } from './framework.js';
import { FAULT_ENDPOINTS, isAfterKind, type FaultEndpoint } from './faults.js';
import { requestKey } from './accounts.js';
import { authMessage, drop, isUnauthenticated, markUnauthenticated, sendError, setFault, type ErrorStyle } from './http.js';
import { accountRoutes } from './routes/account.js';
import { adminAllowed, adminRoutes } from './routes/admin.js';
import { fileRoutes } from './routes/files.js';
import { generateRoutes, submitStyle } from './routes/generate.js';
import { notFoundHandler } from './routes/methods.js';
import { uploadRoutes } from './upload.js';

/**
 * The sandbox HTTP server (fastify 5: fast, typed, per-route config and hooks,
 * and @fastify/multipart for the stream upload). Route modules each take
 * (app, ctx); faults and request counting run in one onRequest hook.
 */

const DETAIL_ENDPOINTS = new Set(['status', 'detail']);
/** Endpoints whose key is checked in onRequest, before the body is parsed. */
const AUTH_ENDPOINTS = new Set(['submit', 'status', 'detail', 'balance', 'upload']);
const FAULT_STATUS: Readonly<Record<string, number>> = { '429': 429, '500': 500, '502': 502, '503': 503 };
const FAULT_MESSAGE: Readonly<Record<number, string>> = {
  429: 'rate limit exceeded, retry later',
  500: 'internal error',
  502: 'upstream service error',
  503: 'service unavailable',
};

/**
 * A request on a connection past a cap (connections.ts): its body read (so that closing the connection loses
 * nothing the client could miss the answer for), then 503 with Retry-After: 1, and the connection closed.
 */
async function busy(raw: IncomingMessage, reply: FastifyReply, endpoint: string, ctx: SandboxContext): Promise<FastifyReply> {
  raw.resume();
  // Ends when the body is read or the connection lost (then the answer goes nowhere, harmlessly).
  await finished(raw).catch(() => undefined);
  ctx.stats.connections.answered_503++;
  reply.header('retry-after', '1').header('connection', 'close');
  return sendError(reply, 503, 'service unavailable: too many connections open from your address; retry later', styleOf(endpoint));
}

function styleOf(endpoint: string | undefined): ErrorStyle {
  return endpoint && DETAIL_ENDPOINTS.has(endpoint) ? 'detail' : 'error';
}

export function buildServer(ctx: SandboxContext): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: 32 * 1024 * 1024,
    keepAliveTimeout: 30_000,
    requestTimeout: ctx.options.connections.requestMs,
    http: HTTP_OPTIONS,
    return503OnClosing: false,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    onProtoPoisoning: 'ignore',
    onConstructorPoisoning: 'ignore',
    frameworkErrors: (err, req, reply) => {
      const a = frameworkAnswer(err.code, req.raw.url ?? '');
      const body = JSON.stringify(a.body);
      reply.hijack();
      reply.raw.writeHead(a.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
      reply.raw.end(body);
    },
    clientErrorHandler,
  });
  const pastCap = capConnections(app.server, ctx.options.connections, ctx.stats.connections);
  // Every endpoint takes JSON (or multipart, stream upload): a text/plain body is a 415 like any
  // other non-JSON type, instead of a string that then fails as "must be a JSON object".
  app.removeContentTypeParser('text/plain');

  app.addHook('onRequest', async (req, reply) => {
    const endpoint = req.routeOptions.config.endpoint ?? 'other';
    if (pastCap(req.raw.socket)) return busy(req.raw, reply, endpoint, ctx);
    ctx.stats.request(endpoint, req.url);
    if (endpoint === 'admin' && !adminAllowed(ctx, req)) {
      const which = req.routeOptions.config.secret === true ? `${req.routeOptions.url ?? 'this endpoint'} needs` : 'the /__sandbox/ endpoints need';
      return sendError(reply, 401, `${which} the admin token in the X-Sandbox-Admin-Token header (printed at start, or set with --admin-token)`);
    }
    const fault = (FAULT_ENDPOINTS as readonly string[]).includes(endpoint) ? ctx.faults.draw(endpoint as FaultEndpoint) : null;
    if (fault?.kind === 'slow') await sleep(fault.delayMs ?? ctx.options.slowMs);
    else if (fault && (isAfterKind(fault.kind) || fault.kind === 'truncate')) setFault(req, fault);
    else if (fault?.kind === 'drop') return drop(req, reply);
    else if (fault) {
      const status = FAULT_STATUS[fault.kind] ?? 500;
      if (status === 429) reply.header('retry-after', String(Math.ceil(ctx.options.retryAfterS)));
      return sendError(reply, status, FAULT_MESSAGE[status] ?? 'internal error', styleOf(endpoint));
    }
    // The key is checked before the body is read: an unauthenticated request gets 401 whatever its body.
    // Submit waits for its body when it can (dream-5.0-lite answers {detail}), but a body that
    // cannot be read is then a 401 too (see the error handler).
    if (!AUTH_ENDPOINTS.has(endpoint) || !req.url.startsWith('/api/')) return;
    const key = requestKey(req.headers);
    if (key !== null && ctx.accounts.get(key)) return;
    if (endpoint === 'submit') return markUnauthenticated(req);
    return sendError(reply, 401, authMessage(req), styleOf(endpoint));
  });

  // `__proto__` and `constructor.prototype` keys are parsed as plain own keys (no prototype is
  // touched), then refused here naming the field, before any handler sees the body.
  app.addHook('preValidation', async (req, reply) => {
    const key = poisonedKey(req.body);
    if (key === null) return;
    const endpoint = req.routeOptions.config.endpoint;
    const style = endpoint === 'submit' ? submitStyle(req.body) : styleOf(endpoint);
    return sendError(reply, 400, `${key}: this field name is not allowed (__proto__ and constructor.prototype are refused)`, style);
  });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const style = styleOf(req.routeOptions.config?.endpoint);
    if (isUnauthenticated(req)) return sendError(reply, 401, authMessage(req), style);
    const status = err.statusCode ?? 500;
    if (status === 413) return sendError(reply, 413, `body: the request body is larger than the limit of ${req.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit ?? 0} bytes`, style);
    if (status === 415) return sendError(reply, 415, `body: unsupported content type ${String(req.headers['content-type'] ?? '(none)')}; send application/json`, style);
    if (status >= 400 && status < 500) return sendError(reply, status, `body: ${err.message}`, style);
    return sendError(reply, 500, 'internal error', style);
  });

  app.setNotFoundHandler(notFoundHandler(app));

  generateRoutes(app, ctx);
  accountRoutes(app, ctx);
  fileRoutes(app, ctx);
  uploadRoutes(app, ctx);
  chatRoutes(app, ctx);
  adminRoutes(app, ctx);
  return app;
}
