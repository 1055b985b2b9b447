import { request, type Dispatcher, type FormData } from 'undici';
import { ApiError, BadResponseError, NetworkError } from '../errors.js';
import { abortReason } from './retry.js';
import { ErrorBodySchema } from './schemas.js';

/**
 * One HTTP exchange with the service: sends the key in the Authorization
 * header only, reads the whole answer, and turns every failure into ApiError,
 * NetworkError (with `sent`) or BadResponseError. No retries here: see retry.ts.
 */

export interface HttpContext {
  /** Base URL without a trailing slash. */
  base: string;
  apiKey: string;
  dispatcher: Dispatcher;
}

export interface SendOptions {
  method: 'GET' | 'POST';
  /** Path under the base URL, with its query string. */
  path: string;
  json?: unknown;
  form?: FormData;
  signal?: AbortSignal;
}

/** Remove the key from any text that may end in a message (a server may echo a header back). */
export function redact(text: string, apiKey: string): string {
  return apiKey.length >= 4 ? text.split(apiKey).join('[redacted]') : text;
}

/**
 * Sends one request and returns the parsed JSON body of a 2xx answer.
 * `sent` is tracked exactly: undici calls onRequestStart just before writing
 * the request on a connected socket, so a failure before it (refused
 * connection, DNS, connect timeout) cannot have reached the service.
 */
export async function send(ctx: HttpContext, opts: SendOptions): Promise<unknown> {
  const tracker = { sent: false };
  const dispatcher = ctx.dispatcher.compose(trackSent(tracker));
  const what = `${opts.method} ${opts.path}`;
  const headers: Record<string, string> = { authorization: `Bearer ${ctx.apiKey}`, accept: 'application/json' };
  let body: string | FormData | undefined;
  if (opts.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.json);
  } else if (opts.form) {
    body = opts.form;
  }

  let res: Dispatcher.ResponseData;
  try {
    res = await request(ctx.base + opts.path, { method: opts.method, headers, body, signal: opts.signal, dispatcher });
  } catch (err) {
    throw transportError(err, tracker.sent, what, ctx.apiKey, opts.signal);
  }
  let text: string;
  try {
    text = await res.body.text();
  } catch (err) {
    throw transportError(err, true, what, ctx.apiKey, opts.signal);
  }

  const status = res.statusCode;
  if (status < 200 || status >= 300) throw apiError(status, res.headers['retry-after'], text, what, ctx.apiKey);

  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BadResponseError(status, redact(`${what}: the answer is not JSON (HTTP ${status}, ${text.length} bytes)`, ctx.apiKey));
  }
  // An HTTP 200 carrying an error envelope is still an error.
  const asError = typeof parsed === 'object' && parsed !== null && 'error' in parsed ? ErrorBodySchema.safeParse(parsed) : null;
  if (asError?.success && 'error' in asError.data) {
    const code = asError.data.code ?? status;
    if (code !== 200) throw new ApiError(code >= 400 && code < 600 ? code : 500, asError.data.error.type ?? null, redact(asError.data.error.message, ctx.apiKey), retryAfterMs(res.headers['retry-after']));
  }
  return parsed;
}

function trackSent(tracker: { sent: boolean }): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (opts, handler) =>
    dispatch(opts, {
      onRequestStart: (controller, context) => {
        tracker.sent = true;
        handler.onRequestStart?.(controller, context);
      },
      onRequestUpgrade: (controller, statusCode, headers, socket) => handler.onRequestUpgrade?.(controller, statusCode, headers, socket),
      onResponseStart: (controller, statusCode, headers, statusMessage) => handler.onResponseStart?.(controller, statusCode, headers, statusMessage),
      onResponseData: (controller, chunk) => handler.onResponseData?.(controller, chunk),
      onResponseEnd: (controller, trailers) => handler.onResponseEnd?.(controller, trailers),
      onResponseError: (controller, error) => handler.onResponseError?.(controller, error),
    });
}

function errorCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string') return err.code;
  return undefined;
}

function transportError(err: unknown, sent: boolean, what: string, apiKey: string, signal?: AbortSignal): unknown {
  if (signal?.aborted) {
    // Stopping: before sending, nothing happened; after sending, the outcome is unknown.
    if (!sent) return abortReason(signal);
    return new NetworkError(`${what}: request aborted after it was sent`, true, { cause: signal.reason });
  }
  const code = errorCode(err) ?? (err instanceof Error ? err.name : 'unknown');
  const detail = err instanceof Error ? err.message : String(err);
  return new NetworkError(redact(`${what}: ${code}: ${detail}${sent ? '' : ' (request not sent)'}`, apiKey), sent, { cause: err });
}

/** Retry-After in ms from delta-seconds or an HTTP date; null when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined, now: number = Date.now()): number | null {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined) return null;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const date = Date.parse(v);
  if (Number.isNaN(date)) return null;
  return Math.max(0, date - now);
}

function apiError(status: number, retryAfter: string | string[] | undefined, text: string, what: string, apiKey: string): ApiError {
  let type: string | null = null;
  let message = '';
  try {
    const body = ErrorBodySchema.safeParse(JSON.parse(text));
    if (body.success) {
      if ('error' in body.data) {
        type = body.data.error.type ?? null;
        message = body.data.error.message;
      } else {
        message = detailText(body.data.detail);
      }
    }
  } catch {
    // not JSON: fall through to the raw text
  }
  if (!message) message = text.trim() ? text.trim().slice(0, 300) : `${what} failed`;
  return new ApiError(status, type, redact(message, apiKey), retryAfterMs(retryAfter));
}

/** `detail` as a string: a FastAPI-style list of `{loc, msg}` becomes `loc: msg; ...`. */
function detailText(detail: unknown): string {
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((d) => {
        if (typeof d === 'object' && d !== null && 'msg' in d && typeof d.msg === 'string') {
          const loc = 'loc' in d && Array.isArray(d.loc) ? d.loc.map(String).join('.') : '';
          return loc ? `${loc}: ${d.msg}` : d.msg;
        }
        return JSON.stringify(d);
      })
      .join('; ');
  }
  return JSON.stringify(detail);
}
