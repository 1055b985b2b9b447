import type { Dispatcher, FormData } from 'undici';
import { undici } from './undici.js';
import { ApiError, BadResponseError, DeadlineError, GenbatchError, NetworkError, serverText } from '../errors.js';
import { ANSWER_MAX_BYTES, DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_STOP_GRACE_MS, UPLOAD_MIN_BYTES_PER_SEC } from './limits.js';
import { abortReason, retryAfterMs } from './retry.js';
import { ErrorBodySchema } from './schemas.js';
import { redact, redactDeep, redactType } from './redact.js';
import { Exchange, SignalWatch } from './exchange.js';

/**
 * One HTTP exchange with the service: sends the key in the Authorization
 * header only, reads the whole answer, and turns every failure into ApiError,
 * NetworkError (with `sent`) or BadResponseError. No retries here: see retry.ts.
 *
 * Each exchange is one `dispatcher.dispatch()` with a small handler of our own
 * (no `request()` API, no response stream): what never changes per request
 * (origin, base path, header lists) is computed once per client.
 *
 * Bounds (limits.ts): a total deadline per request (connect, headers and body: a server
 * dripping bytes cannot keep it open), a size limit per endpoint and a nesting limit on a
 * 2xx answer; reading stops at the limit and the connection is dropped.
 */

export interface SendOptions {
  method: 'GET' | 'POST';
  /** Path under the base URL, with its query string. */
  path: string;
  json?: unknown;
  form?: FormData;
  signal?: AbortSignal;
  /**
   * The signal does not abort the request at once once it is written (a run's submits): its answer is what
   * says whether a task was made, so a stop waits for it a short grace (HttpTiming.stopGraceMs), then cuts it
   * (an unknown outcome: NetworkError, sent).
   */
  keepIfSent?: boolean;
  /** Size limit of the answer (default ANSWER_MAX_BYTES.status). */
  maxBytes?: number;
  /** Bytes this request uploads: its deadline grows by the time to send them at UPLOAD_MIN_BYTES_PER_SEC. */
  uploadBytes?: number;
}

/** Deadlines of every exchange of one HttpContext, in ms. */
export interface HttpTiming {
  /** Total deadline of one request: connect, headers and the whole body (default 60 s). */
  requestMs?: number;
  /** After the signal fired, how long a written keepIfSent request may still take (default 5 s). */
  stopGraceMs?: number;
}

export { redact } from './redact.js';
export { retryAfterMs } from './retry.js';

/**
 * Characters a path (then an optional query) may hold to be sent as written:
 * none of them is changed by URL parsing (no percent-encoding added, no `\`).
 * encodeURIComponent's output, `/`, and `=`/`&` in a non-empty query (an empty one is dropped by URL parsing).
 */
const PLAIN_TARGET = /^\/[A-Za-z0-9\-._~!*'()%/]*(?:\?[A-Za-z0-9\-._~!*()%=&]+)?$/;
/** A `.` or `..` segment (also as %2e), which URL parsing would resolve away. */
const DOT_SEGMENT = /\/(?:\.|%2e){1,2}(?:[/?]|$)/i;

/** Origin and base path of a base URL, when `base + path` can be joined without parsing a URL each time; null otherwise. Exported for tests. */
export function splitBase(base: string): { origin: string; basePath: string } | null {
  let probe: URL;
  try {
    probe = new URL(`${base}/x`);
  } catch {
    return null; // the old way, per request, throws the same error it always did
  }
  if (probe.protocol !== 'http:' && probe.protocol !== 'https:') return null;
  if (probe.search !== '' || probe.hash !== '' || !probe.pathname.endsWith('/x')) return null;
  return { origin: probe.origin, basePath: probe.pathname.slice(0, -2) };
}

/**
 * Origin and request target that undici's `request(base + path)` would use
 * (it parses the whole URL with WHATWG URL): joined as strings when nothing
 * in `path` would be changed by parsing, parsed otherwise. Exported for tests.
 */
export function requestTarget(base: string, split: { origin: string; basePath: string } | null, path: string): { origin: string; path: string } {
  if (split !== null && PLAIN_TARGET.test(path) && !DOT_SEGMENT.test(path)) return { origin: split.origin, path: split.basePath + path };
  const url = new URL(base + path);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new (undici().errors.InvalidArgumentError)('Invalid URL protocol: the URL must start with `http:` or `https:`.');
  }
  return { origin: url.origin, path: url.search ? `${url.pathname}${url.search}` : url.pathname };
}

/**
 * The HTTP side of one ServiceClient: base URL, key and dispatcher, with
 * everything that does not change per request computed once, and one abort
 * listener per AbortSignal (not one per request).
 */
export class HttpContext {
  /** Base URL without a trailing slash. */
  readonly base: string;
  readonly dispatcher: Dispatcher;
  readonly #apiKey: string;
  readonly #split: { origin: string; basePath: string } | null;
  readonly #plainHeaders: string[];
  readonly #jsonHeaders: string[];
  /** The watch of each signal with exchanges in flight. */
  readonly #watches = new WeakMap<AbortSignal, SignalWatch>();

  readonly #requestMs: number;
  readonly #stopGraceMs: number;

  constructor(base: string, apiKey: string, dispatcher: Dispatcher, timing: HttpTiming = {}) {
    this.base = base;
    this.#requestMs = timing.requestMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#stopGraceMs = timing.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
    this.dispatcher = dispatcher;
    this.#apiKey = apiKey;
    this.#split = splitBase(base);
    // Same headers, same order as before: authorization, accept (, content-type).
    this.#plainHeaders = ['authorization', `Bearer ${apiKey}`, 'accept', 'application/json'];
    this.#jsonHeaders = [...this.#plainHeaders, 'content-type', 'application/json'];
  }

  /**
   * Sends one request and returns the parsed JSON body of a 2xx answer.
   * Failures: see transportError (NetworkError with exact `sent`, or the
   * signal's reason), apiError (non-2xx), BadResponseError (not JSON), and an
   * ApiError for a 200 carrying an error envelope.
   */
  async send(opts: SendOptions): Promise<unknown> {
    const apiKey = this.#apiKey;
    const signal = opts.signal;
    let headers = this.#plainHeaders;
    let body: string | FormData | undefined;
    if (opts.json !== undefined) {
      headers = this.#jsonHeaders;
      body = JSON.stringify(opts.json);
    } else if (opts.form) {
      body = opts.form;
    }

    let ex: Exchange | undefined;
    let text: string;
    try {
      const target = requestTarget(this.base, this.#split, opts.path);
      text = await new Promise<string>((resolve, reject) => {
        const e = new Exchange(resolve, reject, {
          keepIfSent: opts.keepIfSent === true,
          what: redact(what(opts), apiKey), // every message of ours starts with it
          maxBytes: opts.maxBytes ?? ANSWER_MAX_BYTES.status,
          requestMs: this.#requestMs + Math.ceil(((opts.uploadBytes ?? 0) * 1000) / UPLOAD_MIN_BYTES_PER_SEC),
          stopGraceMs: this.#stopGraceMs,
        });
        ex = e;
        if (signal !== undefined) {
          if (signal.aborted) e.abort(abortReason(signal));
          else (this.#watches.get(signal) ?? new SignalWatch(signal, this.#watches)).add(e);
        }
        try {
          this.dispatcher.dispatch({ origin: target.origin, path: target.path, method: opts.method, headers, body }, e);
        } catch (err) {
          e.end();
          throw err;
        }
      });
    } catch (err) {
      throw transportError(err, ex?.sent ?? false, opts, apiKey, signal);
    }
    const { status, retryAfter } = ex as Exchange;

    if (status < 200 || status >= 300) throw apiError(status, retryAfter, text, opts, apiKey);

    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new BadResponseError(status, redact(`${what(opts)}: the answer is not JSON (HTTP ${status}, ${text.length} bytes)`, apiKey));
    }
    // An HTTP 200 carrying an error envelope is still an error.
    const asError = typeof parsed === 'object' && parsed !== null && 'error' in parsed ? ErrorBodySchema.safeParse(parsed) : null;
    if (asError?.success && 'error' in asError.data) {
      const code = asError.data.code ?? status;
      if (code !== 200) throw new ApiError(code >= 400 && code < 600 ? code : 500, redactType(asError.data.error.type, apiKey), serverText(redact(asError.data.error.message, apiKey)), retryAfterMs(retryAfter));
    }
    // The key never goes further than this: a server may echo it in any field.
    return redactDeep(parsed, apiKey);
  }
}

function what(opts: SendOptions): string {
  return `${opts.method} ${opts.path}`;
}

function errorCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string') return err.code;
  return undefined;
}

function transportError(err: unknown, sent: boolean, opts: SendOptions, apiKey: string, signal?: AbortSignal): unknown {
  if (signal?.aborted && !(sent && opts.keepIfSent === true)) {
    // Stopping: before sending, nothing happened; after sending, the outcome is unknown.
    if (!sent) return abortReason(signal);
    return new NetworkError(`${what(opts)}: request aborted after it was sent`, true, { cause: signal.reason });
  }
  // Ours: a deadline, a size or nesting limit (messages hold no server text).
  if (err instanceof GenbatchError) return err;
  const code = errorCode(err) ?? (err instanceof Error ? err.name : 'unknown');
  const detail = err instanceof Error ? err.message : String(err);
  // undici's own idle timeouts (set a little past the deadline) are cuts for time too.
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') return new DeadlineError(redact(`${what(opts)}: ${code}: ${detail}`, apiKey), sent, { cause: err });
  return new NetworkError(redact(`${what(opts)}: ${code}: ${detail}${sent ? '' : ' (request not sent)'}`, apiKey), sent, { cause: err });
}

function apiError(status: number, retryAfter: string | string[] | undefined, text: string, opts: SendOptions, apiKey: string): ApiError {
  let type: string | null = null;
  let message = '';
  try {
    const body = ErrorBodySchema.safeParse(JSON.parse(text));
    if (body.success) {
      if ('error' in body.data) {
        type = redactType(body.data.error.type, apiKey);
        message = body.data.error.message;
      } else {
        message = detailText(body.data.detail);
      }
    }
  } catch {
    // not JSON: fall through to the raw text
  }
  if (!message) message = text.trim() ? text.trim().slice(0, 300) : `${what(opts)} failed`;
  return new ApiError(status, type, serverText(redact(message, apiKey)), retryAfterMs(retryAfter));
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
