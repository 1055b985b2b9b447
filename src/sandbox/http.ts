import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Account } from './accounts.js';
import { requestKey } from './accounts.js';
import type { SandboxContext } from './context.js';
import type { Fault } from './faults.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Endpoint name for stats and faults: submit, status, detail, balance, upload, file, chat, admin. */
    endpoint?: string;
    /** An admin endpoint that shows secrets (callback URLs and their tokens, other keys' data): the admin token always. */
    secret?: boolean;
  }
}

/**
 * Error bodies. Most endpoints answer `{code, error: {message, type}}`; the
 * status and music detail endpoints (and dream-5.0-lite submits) answer `{detail: message}`.
 */
export type ErrorStyle = 'error' | 'detail';

/** Error type per status: the contract's table; 401, 405, 409, 413, 415, 422 and 501 are our choice (not in the table). */
export const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'validation_error',
  401: 'authentication_error',
  402: 'insufficient_credits_error',
  403: 'permission_denied_error',
  404: 'resource_not_found_error',
  405: 'method_not_allowed_error',
  408: 'timeout_error',
  409: 'conflict_error',
  410: 'resource_not_found_error',
  413: 'content_too_long_error',
  415: 'validation_error',
  422: 'validation_error',
  429: 'rate_limit_error',
  500: 'internal_error',
  501: 'not_implemented_error',
  502: 'upstream_error',
  503: 'service_error',
};

/** The error body of a status in a style. */
export function errorBody(status: number, message: string, style: ErrorStyle = 'error', type?: string): Record<string, unknown> {
  return style === 'detail' ? { detail: message } : { code: status, error: { message, type: type ?? ERROR_TYPES[status] ?? 'internal_error' } };
}

export function sendError(reply: FastifyReply, status: number, message: string, style: ErrorStyle = 'error', type?: string): FastifyReply {
  const body = errorBody(status, message, style, type);
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

/** The account of the request's key, or null (missing or unknown key). Counts the request for the key. */
export function authenticate(ctx: SandboxContext, req: FastifyRequest): Account | null {
  const key = requestKey(req.headers);
  const account = key === null ? undefined : ctx.accounts.get(key);
  if (!account) return null;
  ctx.stats.keyRequest(account.hash);
  return account;
}

export const AUTH_MISSING = 'missing API key: send Authorization: Bearer <API_KEY>';
export const AUTH_INVALID = 'invalid API key';
export const AUTH_MALFORMED = 'invalid Authorization header: expected Bearer <API_KEY>';

/** An Authorization header was sent but holds no Bearer token (`Token k`, a bare key, `Bearer a b`). */
export function malformedAuthorization(req: FastifyRequest): boolean {
  const v = req.headers.authorization;
  return typeof v === 'string' && v.trim() !== '';
}

/** The 401 message: invalid key, malformed Authorization header, or missing key. */
export function authMessage(req: FastifyRequest): string {
  if (requestKey(req.headers) !== null) return AUTH_INVALID;
  return malformedAuthorization(req) ? AUTH_MALFORMED : AUTH_MISSING;
}

const unauthenticated = new WeakSet<object>();

/** Remember that a request carries no valid key (submit decides its 401 style once the body is read). */
export function markUnauthenticated(req: FastifyRequest): void {
  unauthenticated.add(req.raw);
}

export function isUnauthenticated(req: FastifyRequest): boolean {
  return unauthenticated.has(req.raw);
}

const faultOfRequest = new WeakMap<object, Fault>();

/** Remember a fault that the handler itself applies (submit *-after, file truncate). */
export function setFault(req: FastifyRequest, f: Fault): void {
  faultOfRequest.set(req.raw, f);
}

export function faultOf(req: FastifyRequest): Fault | undefined {
  return faultOfRequest.get(req.raw);
}

/** Close the connection without any response. */
export function drop(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.hijack();
  req.raw.socket.destroy();
  return reply;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
