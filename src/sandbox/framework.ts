import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { errorBody, type ErrorStyle } from './http.js';

/**
 * Errors fastify raises before any route runs, answered in the contract's shapes
 * instead of fastify's own: `{detail}` under /api/generate/status/ and
 * /api/generate/detail/, `{code, error: {message, type}}` elsewhere.
 *   - a path that is not valid percent-encoded UTF-8: 400 validation_error
 *     (on the status route a task id that cannot exist: 404, like any unknown id)
 *   - a path segment over MAX_PARAM_LENGTH characters (no task id is that long): 404
 *   - request headers over the HTTP parser's limit (16 KiB): 431, written on the socket
 * Messages never echo more than 64 characters of the request path.
 */

/** Longest path parameter (a task id, a file name) routed; longer ones are unknown (404). */
export const MAX_PARAM_LENGTH = 512;

/** Whether a path (or a request line's target) belongs to the `{detail}` endpoints. */
export function detailStyle(path: string): ErrorStyle {
  return /^\/api\/generate\/(status|detail)(\/|\?|$)/.test(path) ? 'detail' : 'error';
}

/** At most 64 characters of a text (an id, a path), for messages. */
export function clip(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

/** A path for messages: query dropped, at most 64 characters. */
export function clipPath(url: string): string {
  return clip(url.split('?')[0] ?? '');
}

/** The answer to a fastify framework error for a request to `url`: status and body. */
export function frameworkAnswer(code: string | undefined, url: string): { status: number; body: Record<string, unknown> } {
  const style = detailStyle(url);
  const onStatus = url.startsWith('/api/generate/status/');
  const id = clipPath(url.slice('/api/generate/status/'.length));
  if (code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return { status: 404, body: errorBody(404, onStatus ? `task ${id} not found (task ids are short)` : `no such resource ${clipPath(url)}`, style) };
  }
  if (code === 'FST_ERR_BAD_URL') {
    if (onStatus) return { status: 404, body: errorBody(404, `task ${id} not found (the id is not valid percent-encoded UTF-8)`, style) };
    return { status: 400, body: errorBody(400, `path: ${clipPath(url)} is not valid percent-encoded UTF-8`, style) };
  }
  return { status: 500, body: errorBody(500, 'internal error', style) };
}

/** Errors of the HTTP parser (no request object yet): header overflow 431, time-out 408, anything else 400. */
export function clientErrorHandler(err: Error & { code?: string; rawPacket?: unknown }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const raw = Buffer.isBuffer(err.rawPacket) ? err.rawPacket : Buffer.alloc(0);
  const line = raw.toString('latin1', 0, Math.min(raw.length, 2048)).split('\r\n')[0] ?? '';
  const style = detailStyle(line.split(' ')[1] ?? '');
  let status = 400;
  let message = 'request: malformed HTTP request';
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    message = 'headers: the request headers are larger than the limit of 16 KiB';
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    message = 'request: the request was not received in time';
  }
  const body = JSON.stringify(errorBody(status, message, style, status === 408 ? 'timeout_error' : 'validation_error'));
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}

/**
 * The path of the first `__proto__` key, or `constructor` key holding a `prototype`, in a
 * parsed JSON body (fastify is told to keep them as plain own keys, `onProtoPoisoning:
 * 'ignore'`, so that the answer can name the field instead of "not valid JSON"); null when none.
 */
export function poisonedKey(body: unknown): string | null {
  const stack: Array<{ value: unknown; path: string }> = [{ value: body, path: '' }];
  while (stack.length > 0) {
    const { value, path } = stack.pop() as { value: unknown; path: string };
    if (typeof value !== 'object' || value === null) continue;
    if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, path: `${path}[${i}]` }));
      continue;
    }
    for (const [k, v] of Object.entries(value)) {
      const p = path ? `${path}.${k}` : k;
      if (k === '__proto__') return p;
      if (k === 'constructor' && typeof v === 'object' && v !== null && Object.hasOwn(v, 'prototype')) return `${p}.prototype`;
      stack.push({ value: v, path: p });
    }
  }
  return null;
}
