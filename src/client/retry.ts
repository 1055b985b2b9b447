import { AmbiguousSubmitError, ApiError, BadResponseError, DeadlineError, GenbatchError, NetworkError, UnusableAnswerError } from '../errors.js';

/**
 * The one retry layer of genbatch. Decisions are made only from the error's
 * class and HTTP status, never from message text.
 *
 * | error                        | GET   | POST submit          | POST upload (UPLOAD) |
 * |------------------------------|-------|----------------------|----------------------|
 * | ApiError 429                 | retry | retry                | retry                |
 * | ApiError 503                 | retry | retry (see below)    | retry                |
 * | ApiError 500, 502, 504       | retry | AmbiguousSubmitError | retry                |
 * | NetworkError sent=false      | retry | retry                | retry                |
 * | NetworkError sent=true       | retry | AmbiguousSubmitError | retry                |
 * | UnusableAnswerError (2xx)    | retry, at most UNUSABLE_TRIES tries | AmbiguousSubmitError | retry, idem |
 * | DeadlineError (a NetworkError) | retry, counted with the unusable answers | as NetworkError | retry, idem |
 * | BadResponseError (HTTP 2xx)  | fail  | AmbiguousSubmitError | fail                 |
 * | anything else (4xx, ...)     | fail  | fail                 | fail                 |
 *
 * Choice (503 on a POST): the contract names 503 "service unavailable" and
 * tells clients to retry it; a service that is unavailable refuses work before
 * creating any, so a 503 is read as "nothing was created" and retried.
 *
 * Choice (uploads retried like a GET): an upload that may have been stored
 * costs nothing and creates no task; the worst a retry can do is store a
 * second temporary copy (deleted by the service after 72 h), and the URL of
 * the answer that arrives is the one used. So 500/502/504 and a connection
 * lost after sending are retried, as for a GET.
 *
 * Choice (unusable answers): an answer over its size limit or nested too deep (limits.ts) may be a
 * passing fault of the server, so it is asked again, but only a few times: each try costs up to the
 * limit in bytes. A NetworkError includes a request cut at its deadline (a server dripping bytes): a
 * DeadlineError, which costs a whole deadline, so it counts with the unusable answers (at most 3 tries).
 */

/** Tries (the first included) of a request whose answer is unusable (too large, nested too deep). */
export const UNUSABLE_TRIES = 3;

/** How a request is retried: GET (idempotent), POST (a submit: only when nothing can have been created), UPLOAD (a POST retried like a GET). */
export type RetryMethod = 'GET' | 'POST' | 'UPLOAD';

export interface RetryPolicy {
  /** First backoff step in ms (the contract suggests 1 s, 2 s, 4 s, 8 s). */
  baseMs: number;
  /** Cap on any single wait, including a server's Retry-After. */
  maxMs: number;
  /** Total tries including the first (1 = never retry). */
  maxAttempts: number;
  /** `full` (default): uniform in [0, step]. `decorrelated`: uniform in [base, 3 x step / 2], capped. */
  jitter?: 'full' | 'decorrelated';
}

/** Throws a RangeError naming the field when a policy cannot work. */
export function checkPolicy(p: RetryPolicy): RetryPolicy {
  if (!Number.isFinite(p.baseMs) || p.baseMs < 0) throw new RangeError(`Expected policy.baseMs to be a finite number >= 0, got ${p.baseMs}`);
  if (!Number.isFinite(p.maxMs) || p.maxMs < 0) throw new RangeError(`Expected policy.maxMs to be a finite number >= 0, got ${p.maxMs}`);
  if (!Number.isInteger(p.maxAttempts) || p.maxAttempts < 1) throw new RangeError(`Expected policy.maxAttempts to be an integer >= 1, got ${p.maxAttempts}`);
  return p;
}

export const DEFAULT_POLICY: RetryPolicy = { baseMs: 1000, maxMs: 60_000, maxAttempts: 8, jitter: 'full' };

/**
 * Wait before retry number `attempt` (1 = the first retry). A server's
 * Retry-After, when given, is honoured as is (capped at `maxMs`); otherwise
 * exponential backoff `baseMs * 2^(attempt-1)`, capped, with jitter.
 */
export function delay(attempt: number, policy: RetryPolicy, retryAfterMs?: number | null, random: () => number = Math.random): number {
  if (retryAfterMs !== undefined && retryAfterMs !== null && Number.isFinite(retryAfterMs) && retryAfterMs >= 0) {
    return Math.min(retryAfterMs, policy.maxMs);
  }
  const step = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  const r = Math.min(Math.max(random(), 0), 1);
  if (policy.jitter === 'decorrelated') {
    // Stateless form of decorrelated jitter: never below base, spread up to 1.5 x the step.
    const low = Math.min(policy.baseMs, policy.maxMs);
    const high = Math.min(policy.maxMs, step * 1.5);
    return Math.round(low + r * Math.max(0, high - low));
  }
  return Math.round(r * step);
}

export type RetryDecision = 'retry' | 'ambiguous' | 'fail';

const RETRY_STATUS = new Set([429, 500, 502, 503, 504]);
/** Statuses where a non-idempotent request cannot have created anything. */
const NOTHING_CREATED_STATUS = new Set([429, 503]);

/** What to do with `err` from a request made with `method`. */
export function decide(err: unknown, method: RetryMethod): RetryDecision {
  if (method === 'UPLOAD') method = 'GET';
  if (err instanceof ApiError) {
    if (!RETRY_STATUS.has(err.status)) return 'fail';
    if (method === 'GET' || NOTHING_CREATED_STATUS.has(err.status)) return 'retry';
    return 'ambiguous';
  }
  if (err instanceof NetworkError) {
    if (method === 'GET' || !err.sent) return 'retry';
    return 'ambiguous';
  }
  if (err instanceof BadResponseError && method === 'POST' && err.status >= 200 && err.status < 300) return 'ambiguous';
  if (err instanceof UnusableAnswerError) return 'retry';
  return 'fail';
}

export interface RetryInfo {
  /** Retry number about to be made (1 = the first retry). */
  attempt: number;
  delayMs: number;
  error: GenbatchError;
}

export interface RetryOptions {
  policy: RetryPolicy;
  /** GET and UPLOAD are retried on every transient error; POST only when nothing can have been created. */
  method: RetryMethod;
  /** A POST submit: an unknown outcome is thrown as AmbiguousSubmitError (otherwise the error itself). */
  submit?: boolean;
  signal?: AbortSignal;
  onRetry?: (info: RetryInfo) => void;
  random?: () => number;
}

/**
 * Run `fn` (one try, given its 1-based try number) until it succeeds, fails
 * permanently, or the policy's tries are used up (the last error is thrown).
 * An abort during a wait throws the signal's reason at once.
 */
export async function withRetry<T>(fn: (tryNumber: number) => Promise<T>, opts: RetryOptions): Promise<T> {
  const { policy, method, signal } = opts;
  let unusable = 0;
  for (let tryNumber = 1; ; tryNumber++) {
    throwIfAborted(signal);
    try {
      return await fn(tryNumber);
    } catch (err) {
      const decision = decide(err, method);
      // Even when stopping: a submit that may have taken effect must be reported as such.
      if (decision === 'ambiguous' && opts.submit && err instanceof Error) {
        throw new AmbiguousSubmitError(err, err instanceof ApiError || err instanceof BadResponseError ? err.status : null);
      }
      if (signal?.aborted) throw abortReason(signal);
      if (decision !== 'retry' || tryNumber >= policy.maxAttempts || !(err instanceof GenbatchError)) throw err;
      // A request cut at its deadline cost a whole deadline: like an unusable answer, it is tried at most UNUSABLE_TRIES times.
      if ((err instanceof UnusableAnswerError || err instanceof DeadlineError) && ++unusable >= UNUSABLE_TRIES) throw err;
      const retryAfter = err instanceof ApiError ? err.retryAfterMs : null;
      let delayMs = delay(tryNumber, policy, retryAfter, opts.random);
      // The contract says to wait before retrying a 429: without Retry-After, never less than baseMs.
      if (err instanceof ApiError && err.status === 429 && retryAfter === null) delayMs = Math.max(delayMs, Math.min(policy.baseMs, policy.maxMs));
      opts.onRetry?.({ attempt: tryNumber, delayMs, error: err });
      await sleep(delayMs, signal);
    }
  }
}

/** The signal's reason as an Error (a DOMException AbortError when none was given). */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

export function throwIfAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw abortReason(signal);
}

/** Wait `ms`; rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
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
