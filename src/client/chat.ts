import { Agent, request, type Dispatcher } from 'undici';
import { ApiError, BadResponseError, NetworkError, UsageError } from '../errors.js';
import { retryAfterMs } from './http.js';
import { redact, redactDeep } from './redact.js';
import { abortReason, checkPolicy, DEFAULT_POLICY, withRetry, type RetryInfo, type RetryPolicy } from './retry.js';
import { errorOf, readJson, readStream, type ChatAnswer } from './chat/parse.js';
import { wireRequest, type ChatRequest } from './chat/wire.js';

export type { ChatAnswer, ChatUsage, SseEvent } from './chat/parse.js';
export type { ChatMessage, ChatRequest } from './chat/wire.js';
export { parseSse } from './chat/parse.js';
export { wireRequest, MESSAGES_DEFAULT_MAX_TOKENS } from './chat/wire.js';

/**
 * Chat calls through the four wire protocols (wire.ts builds the request,
 * parse.ts reads the answer), sent with undici through the one retry layer.
 *
 * Choice (retries): a chat POST creates no task and holds no id to look up
 * later, so an unknown outcome has nothing to protect: it is retried like a
 * GET (429, 500, 502, 503, 504, network errors before or after sending, an
 * error event or a cut inside a stream). The cost of a repeat is one more
 * call (and its tokens). Other 4xx answers (400, 401, 402, 404) are not
 * retried. Anthropic's 529 "overloaded" (HTTP or in a stream) is read as 503. The key is sent only in the protocol's key header and is redacted
 * from every message.
 */

export interface ChatClientOptions {
  baseUrl: string;
  apiKey: string;
  policy?: RetryPolicy;
  dispatcher?: Dispatcher;
  /** Timeouts of the client's own Agent, in ms (defaults: connect 10 s, headers 120 s, body 120 s). */
  timeouts?: { connectMs?: number; headersMs?: number; bodyMs?: number };
  onRetry?: (info: RetryInfo & { operation: string }) => void;
}

export class ChatClient {
  readonly baseUrl: string;
  readonly policy: RetryPolicy;
  #apiKey: string;
  #dispatcher: Dispatcher;
  #ownAgent: Agent | undefined;
  #onRetry: ChatClientOptions['onRetry'];

  constructor(opts: ChatClientOptions) {
    if (!/^https?:\/\//i.test(opts.baseUrl)) throw new UsageError(`the service base URL must start with http:// or https://, got "${opts.baseUrl}"`);
    if (!opts.apiKey) throw new UsageError('the API key is empty');
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.policy = checkPolicy(opts.policy ?? DEFAULT_POLICY);
    this.#apiKey = opts.apiKey;
    this.#onRetry = opts.onRetry;
    if (opts.dispatcher) this.#dispatcher = opts.dispatcher;
    else {
      const t = opts.timeouts ?? {};
      this.#ownAgent = new Agent({ keepAliveTimeout: 4_000, connect: { timeout: t.connectMs ?? 10_000 }, headersTimeout: t.headersMs ?? 120_000, bodyTimeout: t.bodyMs ?? 120_000 });
      this.#dispatcher = this.#ownAgent;
    }
  }

  /**
   * One chat call, retried per the policy. `onTry` is called before each try
   * (1-based), so a caller can count repeated calls.
   */
  async call(req: ChatRequest, opts: { signal?: AbortSignal; onTry?: (tryNumber: number) => void } = {}): Promise<ChatAnswer> {
    const wire = wireRequest(req);
    const what = `chat ${req.protocol} ${req.model}`;
    return withRetry(
      (n) => {
        opts.onTry?.(n);
        return this.#once(req, wire, what, opts.signal).catch(overloadedAsUnavailable);
      },
      {
        policy: this.policy,
        method: 'GET',
        ...(opts.signal ? { signal: opts.signal } : {}),
        onRetry: (info) => this.#onRetry?.({ ...info, operation: what }),
      },
    );
  }

  async #once(req: ChatRequest, wire: ReturnType<typeof wireRequest>, what: string, signal?: AbortSignal): Promise<ChatAnswer> {
    const [keyName, keyValue] = wire.keyHeader(this.#apiKey);
    const headers: Record<string, string> = { ...wire.headers, 'content-type': 'application/json', accept: req.stream ? 'text/event-stream' : 'application/json', [keyName]: keyValue };
    let res: Dispatcher.ResponseData;
    let text: string;
    try {
      res = await request(this.baseUrl + wire.path, { method: 'POST', headers, body: JSON.stringify(wire.body), signal, dispatcher: this.#dispatcher });
      text = await res.body.text();
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      const code = typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : err instanceof Error ? err.name : 'error';
      throw new NetworkError(this.#redact(`${what}: ${code}: ${err instanceof Error ? err.message : String(err)}`), true, { cause: err });
    }
    const status = res.statusCode;
    if (status < 200 || status >= 300) {
      let payload: unknown = null;
      try {
        payload = JSON.parse(text);
      } catch {
        // not JSON: the raw text is the message
      }
      const e = errorOf(payload);
      const message = e?.message ?? (text.trim().slice(0, 300) || `HTTP ${status}`);
      throw new ApiError(status, e?.type ?? null, this.#redact(`${what}: ${message}`), retryAfterMs(res.headers['retry-after']));
    }
    try {
      if (req.stream) return redactDeep(readStream(req.protocol, text, what), this.#apiKey);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new BadResponseError(status, `${what}: the answer is not JSON (HTTP ${status}, ${text.length} bytes)`);
      }
      return redactDeep(readJson(req.protocol, body, what), this.#apiKey);
    } catch (err) {
      if (err instanceof Error) err.message = this.#redact(err.message);
      throw err;
    }
  }

  #redact(text: string): string {
    return redact(text, this.#apiKey);
  }

  async close(): Promise<void> {
    await this.#ownAgent?.close();
  }
}

/** Anthropic's 529 overloaded means "unavailable, try again": read as 503 so the retry layer retries it. */
function overloadedAsUnavailable(err: unknown): never {
  if (err instanceof ApiError && err.status === 529) throw new ApiError(503, err.type, `${err.message} (HTTP 529 overloaded)`, err.retryAfterMs);
  throw err;
}
