/**
 * Deadlines of a download that idle timeouts cannot give (they restart on every byte, so a server
 * dripping one byte every few seconds kept a download open for ever): the answer's headers within
 * `headersMs`, then at least `minBytesPerSec` on average over every window of `windowMs`. A download
 * that breaks either is cut with a NetworkError (sent), which the caller's retry layer retries.
 *
 * Applied as an undici interceptor around the dispatcher, so both paths (whole.ts, stream.ts) and every
 * redirect hop are watched the same way.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Dispatcher } from 'undici';
import { NetworkError } from '../errors.js';

export interface DownloadPace {
  /** The answer's status and headers must arrive within this (default 60 s; undici's own default is 300 s). */
  headersMs: number;
  /** Slower than this, on average over a whole window, is cut (default 1 KiB/s). */
  minBytesPerSec: number;
  /** The window over which the rate is measured (default 60 s). */
  windowMs: number;
}

export const DEFAULT_PACE: DownloadPace = { headersMs: 60_000, minBytesPerSec: 1024, windowMs: 60_000 };

/** `dispatcher` with every request watched by `pace`. */
export function paced(dispatcher: Dispatcher, pace: DownloadPace): Dispatcher {
  return dispatcher.compose((dispatch) => (opts, handler) => dispatch(opts, new PacedHandler(handler, pace, `${opts.origin ?? ''}${(opts.path ?? '').split('?')[0]}`)));
}

const seconds = (ms: number): string => `${+(ms / 1000).toFixed(3)} s`;
const rate = (bytesPerSec: number): string => (bytesPerSec >= 1024 ? `${+(bytesPerSec / 1024).toFixed(1)} KiB/s` : `${bytesPerSec} bytes/s`);

class PacedHandler implements Dispatcher.DispatchHandler {
  #controller: Dispatcher.DispatchController | null = null;
  #pending: Error | null = null;
  #timer: NodeJS.Timeout | null;
  #bytes = 0;
  #done = false;

  constructor(
    /** The handler watched (read by test/download.paths.test.ts to tell the two paths apart). */
    readonly inner: Dispatcher.DispatchHandler,
    private readonly pace: DownloadPace,
    private readonly where: string,
  ) {
    this.#timer = setTimeout(() => this.#cut(new NetworkError(`download of ${where}: no answer within ${seconds(pace.headersMs)} (cut)`, true)), pace.headersMs);
  }

  #cut(err: Error): void {
    this.#stop();
    if (this.#controller !== null) this.#controller.abort(err);
    else this.#pending = err;
  }

  #stop(): void {
    this.#done = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }

  /** Every window: fewer bytes than the rate asks for over it is cut. */
  #watchRate(): void {
    const { windowMs, minBytesPerSec } = this.pace;
    this.#timer = setTimeout(() => {
      if (this.#done) return;
      if (this.#bytes < (minBytesPerSec * windowMs) / 1000) {
        this.#cut(new NetworkError(`download of ${this.where}: slower than ${rate(minBytesPerSec)} over ${seconds(windowMs)} (${this.#bytes} bytes; cut)`, true));
        return;
      }
      this.#bytes = 0;
      this.#watchRate();
    }, windowMs);
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.#controller = controller;
    if (this.#pending !== null) controller.abort(this.#pending);
    this.inner.onRequestStart?.(controller, context);
  }

  onRequestUpgrade(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.inner.onRequestUpgrade?.(controller, statusCode, headers, socket);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    if (statusCode >= 200 && !this.#done) {
      if (this.#timer !== null) clearTimeout(this.#timer);
      this.#watchRate();
    }
    this.inner.onResponseStart?.(controller, statusCode, headers, statusMessage);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#bytes += chunk.length;
    this.inner.onResponseData?.(controller, chunk);
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.#stop();
    this.inner.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Dispatcher.DispatchController, err: Error): void {
    this.#stop();
    this.inner.onResponseError?.(controller, err);
  }
}
