/** HTTP helpers shared by the whole-body path (whole.ts) and the streaming path (stream.ts): URL checks, headers, error mapping. */
import type { Dispatcher } from 'undici';
import { ApiError, NetworkError, UnsafeResultError } from '../errors.js';

/** Redirects followed per download (each target must be http or https too). */
export const MAX_REDIRECTS = 5;

/** The URL without query or fragment, for messages (signed URLs carry tokens in the query). */
export function shown(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

export function parseHttpUrl(raw: string, base?: URL): URL {
  let url: URL;
  try {
    url = new URL(raw, base);
  } catch {
    throw new UnsafeResultError('file_url: not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UnsafeResultError(`file_url: only http and https are allowed, got ${url.protocol}`);
  }
  if (url.username || url.password) throw new UnsafeResultError('file_url: credentials in the URL are not allowed');
  return url;
}

/**
 * The media type of a Content-Type header (`image/png`), lower case, without parameters; null when
 * the header is absent or not a plain type/subtype of at most 64 + 64 characters. What is stored is
 * then never a server's free text (which could carry anything, the API key included).
 */
export function mediaType(value: string | null): string | null {
  const m = /^\s*([a-z0-9!#$&^_.+-]{1,64}\/[a-z0-9!#$&^_.+-]{1,64})\s*(?:;|$)/i.exec(value ?? '');
  return m?.[1] ? m[1].toLowerCase() : null;
}

export function header(headers: Record<string, string | string[] | undefined>, name: string): string | null {
  const v = headers[name];
  return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
}


/** Errors raised before anything reached the server. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

export function asNetworkError(err: unknown, url: URL, phase: 'request' | 'body'): unknown {
  if (err instanceof ApiError || err instanceof UnsafeResultError || err instanceof NetworkError) return err;
  if (err instanceof Error && (err.name === 'AbortError' || (err as { code?: string }).code === 'UND_ERR_ABORTED')) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const sent = !(phase === 'request' && typeof code === 'string' && NOT_SENT.has(code));
  const what = phase === 'body' ? 'body interrupted' : 'request failed';
  const detail = err instanceof Error ? `${typeof code === 'string' ? `${code} ` : ''}${err.message}` : String(err);
  return new NetworkError(`download of ${shown(url)}: ${what} (${detail})`, sent, { cause: err });
}

/** Stops reading a response body; the abort error undici then emits is expected, not a crash. */
export function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}
