import type { Agent, Dispatcher } from 'undici';
import { KEEP_IDLE, undici } from './undici.js';
import { ApiError, BadResponseError, NetworkError, UnusableAnswerError, UsageError, serverText } from '../errors.js';
import { retryAfterMs } from './http.js';
import { ANSWER_MAX_BYTES, DEFAULT_CHAT_TIMEOUT_MS, nestingWithin, MAX_DEPTH, sizeText } from './limits.js';
import { REDACTED, holdsKey, redact, redactDeep, redactType } from './redact.js';
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
 *
 * Bounds (limits.ts): a total deadline per call (default 300 s: a model may think long), an answer or a
 * whole stream over ANSWER_MAX_BYTES.chat, one stream event over ANSWER_MAX_BYTES.chatEvent, or JSON nested
 * deeper than MAX_DEPTH is not read further (UnusableAnswerError, retried a few times).
 */

export interface ChatClientOptions {
  baseUrl: string;
  apiKey: string;
  policy?: RetryPolicy;
  dispatcher?: Dispatcher;
  /**
   * Timeouts in ms: `requestMs`, the total deadline of one call, headers and body (default 300 s); of the
   * client's own Agent: connect 10 s, headers and body idle 120 s (or `requestMs`, when smaller).
   */
  timeouts?: { connectMs?: number; headersMs?: number; bodyMs?: number; requestMs?: number };
  onRetry?: (info: RetryInfo & { operation: string }) => void;
}

export class ChatClient {
  readonly baseUrl: string;
  readonly policy: RetryPolicy;
  #apiKey: string;
  #dispatcher: Dispatcher;
  #ownAgent: Agent | undefined;
  #onRetry: ChatClientOptions['onRetry'];
  #requestMs: number;

  constructor(opts: ChatClientOptions) {
    if (!/^https?:\/\//i.test(opts.baseUrl)) throw new UsageError(`the service base URL must start with http:// or https://, got "${opts.baseUrl}"`);
    if (!opts.apiKey) throw new UsageError('the API key is empty');
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.policy = checkPolicy(opts.policy ?? DEFAULT_POLICY);
    this.#apiKey = opts.apiKey;
    this.#onRetry = opts.onRetry;
    const t = opts.timeouts ?? {};
    this.#requestMs = t.requestMs ?? DEFAULT_CHAT_TIMEOUT_MS;
    if (opts.dispatcher) this.#dispatcher = opts.dispatcher;
    else {
      const idle = Math.min(120_000, this.#requestMs + 1_000);
      this.#ownAgent = new (undici().Agent)({ ...KEEP_IDLE, connect: { timeout: t.connectMs ?? 10_000 }, headersTimeout: t.headersMs ?? idle, bodyTimeout: t.bodyMs ?? idle });
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
    let res: Dispatcher.ResponseData | null = null;
    let text: string;
    const deadline = AbortSignal.timeout(this.#requestMs);
    try {
      res = await undici().request(this.baseUrl + wire.path, { method: 'POST', headers, body: JSON.stringify(wire.body), signal: signal ? AbortSignal.any([signal, deadline]) : deadline, dispatcher: this.#dispatcher });
      text = await readBounded(res, req.stream, what);
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      if (err instanceof UnusableAnswerError) throw err;
      if (deadline.aborted) throw new NetworkError(`${what}: no complete answer within ${+(this.#requestMs / 1000).toFixed(3)} s (the request deadline)`, true, { cause: err });
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
      throw new ApiError(status, redactType(e?.type, this.#apiKey), `${what}: ${serverText(this.#redact(message))}`, retryAfterMs(res.headers['retry-after']));
    }
    try {
      if (req.stream) return this.#redactStream(readStream(req.protocol, text, what));
      let body: unknown;
      if (!nestingWithin(text)) throw new UnusableAnswerError(status, `${what}: the answer is nested deeper than ${MAX_DEPTH} levels`);
      try {
        body = JSON.parse(text);
      } catch {
        throw new BadResponseError(status, `${what}: the answer is not JSON (HTTP ${status}, ${text.length} bytes)`);
      }
      return redactDeep(readJson(req.protocol, body, what), this.#apiKey);
    } catch (err) {
      // A stream's error event carries the server's text: one visible line, bounded, as any error answer's.
      if (err instanceof Error) err.message = serverText(this.#redact(err.message));
      throw err;
    }
  }

  #redact(text: string): string {
    return redact(text, this.#apiKey);
  }

  /**
   * A streamed answer with the key redacted. Each event is redacted on its own, so a key split over
   * two events' text deltas ("sk-ab", "cd...") would survive in the events: when the joined text
   * holds the key, the events are not kept (the text, redacted, and the usage are).
   */
  #redactStream(answer: ChatAnswer): ChatAnswer {
    const split = holdsKey(answer.text, this.#apiKey);
    const clean = redactDeep(answer, this.#apiKey);
    if (split) clean.raw = [{ event: null, data: `${REDACTED}: the streamed text held the API key; its events are not kept` }];
    return clean;
  }

  async close(): Promise<void> {
    await this.#ownAgent?.close();
  }
}

/**
 * The body as text, read no further than its limits: ANSWER_MAX_BYTES.chat in total and, for a stream,
 * ANSWER_MAX_BYTES.chatEvent bytes without an event's end (a blank line). Over a limit: the body is dropped
 * and UnusableAnswerError thrown (an error answer keeps its status: ApiError).
 */
async function readBounded(res: Dispatcher.ResponseData, stream: boolean, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  let sinceBlank = 0;
  const over = (message: string): never => {
    res.body.on('error', () => undefined);
    res.body.destroy();
    if (res.statusCode >= 200 && res.statusCode < 300) throw new UnusableAnswerError(res.statusCode, `${what}: ${message} (reading stopped)`);
    throw new ApiError(res.statusCode, null, `${what}: ${message} (reading stopped)`, retryAfterMs(res.headers['retry-after']));
  };
  for await (const chunk of res.body) {
    const buf = chunk as Buffer;
    total += buf.length;
    if (total > ANSWER_MAX_BYTES.chat) over(`the answer is over the limit of ${sizeText(ANSWER_MAX_BYTES.chat)}`);
    if (stream) {
      // An event ends at a blank line (\n\n, or \r\n\r\n); a separator split across chunks only makes the count larger.
      const end = Math.max(lastEnd(buf, '\n\n'), lastEnd(buf, '\r\n\r\n'), lastEnd(buf, '\r\r'));
      sinceBlank = end < 0 ? sinceBlank + buf.length : buf.length - end;
      if (sinceBlank > ANSWER_MAX_BYTES.chatEvent) over(`a stream event is over the limit of ${sizeText(ANSWER_MAX_BYTES.chatEvent)}`);
    }
    chunks.push(buf);
  }
  const buf = Buffer.concat(chunks, total);
  return buf.toString('utf8', buf.length > 2 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0);
}

/** The index just past the last `sep` in `buf`, or -1. */
function lastEnd(buf: Buffer, sep: string): number {
  const i = buf.lastIndexOf(sep);
  return i < 0 ? -1 : i + sep.length;
}

/** Anthropic's 529 overloaded means "unavailable, try again": read as 503 so the retry layer retries it. */
function overloadedAsUnavailable(err: unknown): never {
  if (err instanceof ApiError && err.status === 529) throw new ApiError(503, err.type, `${err.message} (HTTP 529 overloaded)`, err.retryAfterMs);
  throw err;
}
