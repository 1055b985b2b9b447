import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/**
 * What keeps the view safe by default: a random token, printed in the URL at start, that every request, reads
 * included, must carry (the cookie the printed URL sets, `HttpOnly; SameSite=Strict`, or the header
 * `X-Genbatch-Token`; compared in constant time), so another user of the machine cannot read prompts or
 * results; a check of the Origin of every write; and a check of the Host header against the names the server
 * answers to (no DNS rebinding: a page of another site whose name now points at 127.0.0.1 sends its own name
 * as Host).
 */
export const TOKEN_HEADER = 'x-genbatch-token';

export function newToken(): string {
  return randomBytes(24).toString('base64url');
}

/** True when `given` equals `token`; the time taken does not depend on where they differ. */
export function tokenMatches(token: string, given: string | string[] | undefined): boolean {
  if (typeof given !== 'string') return false;
  const a = createHash('sha256').update(token).digest();
  const b = createHash('sha256').update(given).digest();
  return timingSafeEqual(a, b);
}

/** The Host values the server answers to: the bound host, localhost and 127.0.0.1 (and [::1]), each with the port. */
export function allowedHosts(boundHost: string, port: number): Set<string> {
  const host = boundHost.includes(':') && !boundHost.startsWith('[') ? `[${boundHost}]` : boundHost;
  return new Set([host, 'localhost', '127.0.0.1', '[::1]'].map((h) => `${h.toLowerCase()}:${port}`));
}

export function hostAllowed(req: IncomingMessage, allowed: ReadonlySet<string>): boolean {
  const host = req.headers.host;
  return typeof host === 'string' && allowed.has(host.toLowerCase());
}

/** The cookie that holds the token: one name per port, so two views on one machine keep their own. */
export function cookieName(port: number): string {
  return `genbatch_view_${port}`;
}

/** The Set-Cookie value the printed URL answers with (no Max-Age: gone when the browser closes). */
export function tokenCookie(name: string, token: string): string {
  return `${name}=${token}; Path=/; HttpOnly; SameSite=Strict`;
}

/** The value of the cookie `name` in the request, or undefined. */
export function cookieValue(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

/** True when `origin` (the Origin header of a write) is `http://` and a Host this view answers to. */
export function originAllowed(origin: string, allowed: ReadonlySet<string>): boolean {
  return origin.startsWith('http://') && allowed.has(origin.slice('http://'.length).toLowerCase());
}
