import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import { ApiError, DeadlineError, GenbatchError, NetworkError, UnusableAnswerError } from '../errors.js';
import { MAX_DEPTH, NestingGauge, sizeText } from './limits.js';
import { abortReason, retryAfterMs } from './retry.js';

/**
 * One exchange's undici handler and the watch of a request's AbortSignal (src/client/http.ts sends through
 * them): the answer collected within its size and nesting limits, the total deadline and the stop grace,
 * and `sent` recorded exactly.
 */

/** `60 s`, `0.5 s`. */
export function seconds(ms: number): string {
  return `${+(ms / 1000).toFixed(3)} s`;
}

/**
 * The exchange's handler: collects the answer's chunks and records `sent`
 * exactly: undici calls onRequestStart just before writing the request on a
 * connected socket, so a failure before it (refused connection, DNS, connect
 * timeout) cannot have reached the service.
 */
export class Exchange implements Dispatcher.DispatchHandler {
  sent = false;
  status = 0;
  retryAfter: string | string[] | undefined = undefined;
  /** The watch of the request's signal, while watched. */
  watchedBy: SignalWatch | null = null;
  #chunks: Buffer[] = [];
  #length = 0;
  #gauge: NestingGauge | null = null;
  #controller: Dispatcher.DispatchController | null = null;
  /** The signal fired before the request started: abort it as it starts. */
  #abortAtStart = false;
  #reason: unknown = undefined;
  #deadline: NodeJS.Timeout | null = null;
  #grace: NodeJS.Timeout | null = null;
  #ended = false;
  readonly #resolve: (text: string) => void;
  readonly #reject: (err: unknown) => void;
  readonly #keepIfSent: boolean;
  readonly #what: string;
  readonly #maxBytes: number;
  readonly #stopGraceMs: number;

  constructor(resolve: (text: string) => void, reject: (err: unknown) => void, o: { keepIfSent: boolean; what: string; maxBytes: number; requestMs: number; stopGraceMs: number }) {
    this.#resolve = resolve;
    this.#reject = reject;
    this.#keepIfSent = o.keepIfSent;
    this.#what = o.what;
    this.#maxBytes = o.maxBytes;
    this.#stopGraceMs = o.stopGraceMs;
    this.#deadline = setTimeout(() => this.#cut(new DeadlineError(`${o.what}: no complete answer within ${seconds(o.requestMs)} (the request deadline)`, this.sent)), o.requestMs);
  }

  /** Called by the signal's one listener (or at once when it had fired already). */
  abort(reason: unknown): void {
    if (this.sent && this.#keepIfSent) {
      // Written: its answer says whether a task was made, so it is awaited a short grace, then cut (unknown outcome).
      this.#grace ??= setTimeout(
        () => this.#cut(new NetworkError(`${this.#what}: no answer ${seconds(this.#stopGraceMs)} after the run was stopped (request cut)`, true)),
        this.#stopGraceMs,
      );
      return;
    }
    this.#cut(reason);
  }

  #cut(reason: unknown): void {
    if (this.#ended) return;
    if (this.#controller !== null) this.#controller.abort(reason as Error);
    else {
      this.#abortAtStart = true;
      this.#reason = reason;
    }
  }

  /** The exchange is over (or its dispatch threw): timers cleared, the signal no longer watched. */
  end(): void {
    this.#ended = true;
    if (this.#deadline !== null) clearTimeout(this.#deadline);
    if (this.#grace !== null) clearTimeout(this.#grace);
    this.unwatch();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // The signal fired while the request waited for a connection: aborted here, undici writes nothing
    // (client-h1 writeH1 returns when the request is aborted after onRequestStart), so it is not sent.
    // (undici's request() marked such a request sent, making a never-written submit uncertain.)
    if (this.#abortAtStart) controller.abort(this.#reason as Error);
    else this.sent = true;
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200) return; // 1xx informational: the answer follows
    this.status = statusCode;
    this.retryAfter = headers['retry-after'];
    if (statusCode < 300) this.#gauge = new NestingGauge(MAX_DEPTH);
    const length = Number(headers['content-length']);
    if (Number.isFinite(length) && length > this.#maxBytes) controller.abort(this.#tooLarge(`Content-Length ${length}`));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#ended) return;
    this.#length += chunk.length;
    if (this.#length > this.#maxBytes) return controller.abort(this.#tooLarge(`reading stopped at ${sizeText(this.#maxBytes)}`));
    if (this.#gauge !== null && !this.#gauge.feed(chunk)) {
      return controller.abort(new UnusableAnswerError(this.status, `${this.#what}: the answer is nested deeper than ${MAX_DEPTH} levels (reading stopped)`));
    }
    this.#chunks.push(chunk);
  }

  /** A 2xx answer over the limit is unusable; an error answer keeps its status (the retry decision is made from it). */
  #tooLarge(detail: string): GenbatchError {
    const message = `${this.#what}: the answer is over the limit of ${sizeText(this.#maxBytes)} (${detail})`;
    this.#chunks = [];
    if (this.status >= 200 && this.status < 300) return new UnusableAnswerError(this.status, message);
    return new ApiError(this.status, null, message, retryAfterMs(this.retryAfter));
  }

  onResponseEnd(): void {
    this.end();
    this.#resolve(decodeBody(this.#chunks, this.#length));
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.end();
    this.#chunks = [];
    this.#reject(error);
  }

  unwatch(): void {
    if (this.watchedBy !== null) {
      this.watchedBy.remove(this);
      this.watchedBy = null;
    }
  }
}

/**
 * One abort listener for all the exchanges in flight on one signal (a run
 * passes the same signal to every call). It is removed when the last of them
 * ends, so nothing stays attached to a signal that is no longer in use.
 */
export class SignalWatch {
  readonly #signal: AbortSignal;
  readonly #inFlight = new Set<Exchange>();
  readonly #onAbort = (): void => {
    const reason = abortReason(this.#signal);
    for (const e of [...this.#inFlight]) e.abort(reason);
  };
  readonly #watches: WeakMap<AbortSignal, SignalWatch>;

  constructor(signal: AbortSignal, watches: WeakMap<AbortSignal, SignalWatch>) {
    this.#signal = signal;
    this.#watches = watches;
    watches.set(signal, this);
    signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  add(ex: Exchange): void {
    this.#inFlight.add(ex);
    ex.watchedBy = this;
  }

  remove(ex: Exchange): void {
    this.#inFlight.delete(ex);
    if (this.#inFlight.size === 0) {
      this.#signal.removeEventListener('abort', this.#onAbort);
      this.#watches.delete(this.#signal);
    }
  }
}

/** The body as UTF-8 text, a leading BOM skipped (as undici's `body.text()`). */
function decodeBody(chunks: Buffer[], length: number): string {
  if (chunks.length === 0 || length === 0) return '';
  const buf = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, length);
  const start = buf.length > 2 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0;
  return buf.toString('utf8', start);
}
