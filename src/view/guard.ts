import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/**
 * What keeps the view safe by default: a random token, printed in the URL at start, that every request
 * changing state must carry (header `X-Genbatch-Token`, compared in constant time), and a check of the Host
 * header against the names the server answers to (no DNS rebinding: a page of another site whose name now
 * points at 127.0.0.1 sends its own name as Host).
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
