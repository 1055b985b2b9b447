/** The whole-body path: `file_size` at most SMALL_BODY, read through one undici dispatch with a small handler. */
import { createHash, type Hash } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { undici } from '../client/undici.js';
import { ApiError, NetworkError, UnsafeResultError } from '../errors.js';
import { tmpSuffix } from './fileops.js';
import { MAX_REDIRECTS, asNetworkError, header, mediaType, parseHttpUrl, shown } from './http.js';
import { retryAfterMs } from '../client/http.js';
import { safeJoin } from './names.js';
import { ownDispatcher, type DownloadOptions, type DownloadResult } from './options.js';
import { commitWhole } from './place.js';

/** What one GET of the whole-body path gave: a redirect to follow, or a complete checked body. */
type WholeOutcome =
  | { kind: 'redirect'; url: URL; location: string }
  | { kind: 'body'; url: URL; chunks: Buffer[]; size: number; sha256: string; contentType: string | null };

/** The body of a redirect or an error status is read and ignored up to this, as `body.dump()` does; beyond, the connection is dropped. */
const DUMP_LIMIT = 128 * 1024;

/**
 * One GET through undici's dispatcher with a small handler that collects the body (no Readable
 * stream, no async iterator): the same checks, in the same order and with the same errors, as
 * get() followed by small() (Content-Length present) or by the streaming loop (no Content-Length).
 * `expected` is at most SMALL_BODY, so the body held in memory is bounded by it.
 */
class WholeBody implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  private abortReason: Error | null = null;
  private started = false;
  /** Redirect or error status: the body is read and ignored (up to DUMP_LIMIT), then this is settled. */
  private drain: { outcome: WholeOutcome } | { error: Error } | null = null;
  private drained = 0;
  private declared: number | null = null;
  private contentType: string | null = null;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private readonly hash: Hash = createHash('sha256');
  private readonly onAbort: (() => void) | null = null;
  private done = false;

  constructor(
    private readonly url: URL,
    private readonly expected: number,
    private readonly maxBytes: number,
    private readonly signal: AbortSignal | null,
    private readonly resolve: (o: WholeOutcome) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    if (signal?.aborted) {
      this.abortReason = (signal.reason as Error | undefined) ?? new (undici().errors.RequestAbortedError)();
    } else if (signal) {
      this.onAbort = () => {
        const reason = (signal.reason as Error | undefined) ?? new (undici().errors.RequestAbortedError)();
        this.abortReason = reason;
        this.controller?.abort(reason);
      };
      signal.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  private settle(): void {
    this.done = true;
    if (this.signal && this.onAbort) this.signal.removeEventListener('abort', this.onAbort);
  }

  private finishDrain(): void {
    const d = this.drain!;
    this.settle();
    if ('error' in d) this.reject(d.error);
    else this.resolve(d.outcome);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortReason) controller.abort(this.abortReason);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    if (statusCode < 200) return; // informational
    this.started = true;
    const url = this.url;
    if (statusCode >= 300 && statusCode < 400 && header(headers, 'location')) {
      this.drain = { outcome: { kind: 'redirect', url, location: header(headers, 'location')! } };
      return;
    }
    if (statusCode < 200 || statusCode >= 300) {
      this.drain = { error: new ApiError(statusCode, null, `download of ${shown(url)} failed`, retryAfterMs(header(headers, 'retry-after') ?? undefined)) };
      return;
    }
    if (statusCode !== 200 && statusCode !== 203) {
      this.drain = { error: new UnsafeResultError(`download of ${shown(url)}: unexpected HTTP ${statusCode} for a whole-file GET`) };
      return;
    }
    // Thrown here: undici aborts the request and hands the error to onResponseError.
    const where = shown(url);
    this.contentType = mediaType(header(headers, 'content-type'));
    const encoding = header(headers, 'content-encoding');
    const lengthHeader = header(headers, 'content-length');
    const declared = lengthHeader !== null && /^\d+$/.test(lengthHeader.trim()) ? Number(lengthHeader.trim()) : null;
    if (encoding && encoding.toLowerCase() !== 'identity') throw new UnsafeResultError(`download of ${where}: content-encoding "${encoding}" is not supported`);
    if (declared !== null && declared > this.maxBytes) throw new UnsafeResultError(`download of ${where}: Content-Length ${declared} is over the limit of ${this.maxBytes} bytes`);
    if (declared !== null && declared !== this.expected) {
      throw new UnsafeResultError(`download of ${where}: Content-Length ${declared} differs from file_size ${this.expected}`);
    }
    this.declared = declared;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.drain) {
      this.drained += chunk.length;
      if (this.drained > DUMP_LIMIT) controller.abort(new Error('body not read'));
      return;
    }
    this.size += chunk.length;
    if (this.declared !== null) {
      // As small(): Content-Length is the bound (it equals file_size here).
      if (this.size > this.declared) throw new NetworkError(`download of ${shown(this.url)}: body is longer than Content-Length ${this.declared}`, true);
    } else {
      // As the streaming loop: maxBytes first, then file_size.
      if (this.size > this.maxBytes) throw new UnsafeResultError(`download of ${shown(this.url)}: body is over the limit of ${this.maxBytes} bytes`);
      if (this.size > this.expected) throw new UnsafeResultError(`download of ${shown(this.url)}: body is longer than file_size ${this.expected}`);
    }
    this.hash.update(chunk);
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.done) return;
    if (this.drain) return this.finishDrain();
    this.settle();
    const where = shown(this.url);
    const { size, declared, expected } = this;
    if (declared !== null && size !== declared) return this.reject(new NetworkError(`download of ${where}: body has ${size} bytes, Content-Length said ${declared}`, true));
    if (size !== expected) return this.reject(new UnsafeResultError(`download of ${where}: body has ${size} bytes, file_size said ${expected}`));
    this.resolve({ kind: 'body', url: this.url, chunks: this.chunks, size, sha256: this.hash.digest('hex'), contentType: this.contentType });
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.done) return;
    // An error while draining an error status or a redirect is ignored, as get() ignores dump() failures.
    if (this.drain) return this.finishDrain();
    this.settle();
    this.reject(asNetworkError(err, this.url, this.started ? 'body' : 'request'));
  }
}

/** One GET of the whole-body path (see WholeBody). */
function getWholeOnce(url: URL, expected: number, maxBytes: number, opts: DownloadOptions): Promise<WholeOutcome> {
  return new Promise((resolve, reject) => {
    const handler = new WholeBody(url, expected, maxBytes, opts.signal ?? null, resolve, reject);
    (opts.dispatcher ?? ownDispatcher()).dispatch(
      { origin: url.origin, path: url.search ? `${url.pathname}${url.search}` : url.pathname, method: 'GET', headers: { 'accept-encoding': 'identity' } },
      handler,
    );
  });
}

/**
 * `expected` (file_size) is at most SMALL_BODY: the body is read whole by WholeBody (redirects
 * followed as get() does), checked and hashed, then written to a temporary file made only then.
 */
export async function whole(start: URL, name: string, expected: number, maxBytes: number, opts: DownloadOptions): Promise<DownloadResult> {
  let url = start;
  for (let hop = 0; ; hop++) {
    const got = await getWholeOnce(url, expected, maxBytes, opts);
    if (got.kind === 'redirect') {
      if (hop >= MAX_REDIRECTS) throw new UnsafeResultError(`file_url: more than ${MAX_REDIRECTS} redirects from ${shown(start)}`);
      url = parseHttpUrl(got.location, url);
      continue;
    }
    const tmp = safeJoin(opts.dir, `.${name}.${tmpSuffix()}.part`);
    return commitWhole(tmp, got.chunks, got.size, got.sha256, got.contentType, name, opts);
  }
}
