import { openAsBlob } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Agent, Dispatcher, FormData } from 'undici';
import { KEEP_IDLE, undici } from './undici.js';
import type * as z from 'zod';
import { ApiError, BadResponseError, UsageError, serverText } from '../errors.js';
import { HttpContext, type SendOptions } from './http.js';
import { ANSWER_MAX_BYTES, DEFAULT_REQUEST_TIMEOUT_MS } from './limits.js';
import { TokenBucket, UploadLimiter } from './limiters.js';
import { checkPolicy, DEFAULT_POLICY, withRetry, type RetryInfo, type RetryMethod, type RetryPolicy } from './retry.js';
import {
  BALANCE_FIELDS,
  EnvelopeSchema,
  fastEnvelopeData,
  fastSubmitResult,
  fastTask,
  issuesText,
  MusicTaskSchema,
  SubmitResultSchema,
  TaskSchema,
  UploadRecordSchema,
  type MusicTask,
  type SubmitResult,
  type Task,
  type UploadRecord,
} from './schemas.js';

export interface ServiceClientOptions {
  /** e.g. `https://api.example.com` or the sandbox URL; a trailing slash is ignored. */
  baseUrl: string;
  /** Sent only as `Authorization: Bearer <key>`; never part of any message. */
  apiKey: string;
  policy?: RetryPolicy;
  /** Use this dispatcher instead of the client's own keep-alive Agent (the caller closes it). */
  dispatcher?: Dispatcher;
  /** Global cap on status and music-detail requests per second, shared by all callers (default 10). */
  statusRatePerSec?: number;
  /** Upload limiter (default: 5 per 60 s). Pass one with a short window in tests, or share one per key. */
  uploadLimiter?: UploadLimiter;
  /**
   * Timeouts in ms. `requestMs`: the total deadline of one request, headers and body (default 60 s);
   * `stopGraceMs`: how long a submit already written may still answer after its signal fired (default 5 s).
   * Of the client's own Agent: connect (10 s), headers and body idle (default: 1 s past `requestMs`).
   */
  timeouts?: { connectMs?: number; headersMs?: number; bodyMs?: number; requestMs?: number; stopGraceMs?: number };
  /** Called before each retry wait (for logs and progress; the error message never holds the key). */
  onRetry?: (info: RetryInfo & { operation: string }) => void;
}

export interface SubmitRequest {
  model: string;
  callback_url?: string;
  input: Record<string, unknown>;
}

export interface UploadOptions {
  /** Sent as `file_name`; the service generates a unique name when absent. */
  fileName?: string;
  /** Sent as `upload_path`; the service stores under `temp/<path>`. */
  uploadPath?: string;
  signal?: AbortSignal;
  /**
   * A slot of an upload window shared with other processes (a PostgreSQL state: WorkStore.acquireUploadSlot),
   * taken for every try besides this client's own limiter, and ended with the try's outcome (a 429 starts
   * the shared cool-down).
   */
  slot?: SharedUploadSlot;
}

/** Waits for a shared upload slot; the returned function ends it with the outcome of the try (called once). */
export type SharedUploadSlot = (signal?: AbortSignal) => Promise<(outcome: { rateLimited: boolean; retryAfterMs: number | null }) => Promise<void>>;

/** `{signal}`, or the AbortSignal itself (both forms are accepted by every method). */
export type CallOptions = { signal?: AbortSignal } | AbortSignal;

function signalOf(opts: CallOptions | undefined): AbortSignal | undefined {
  return opts instanceof AbortSignal ? opts : opts?.signal;
}

/**
 * The service's API client. One instance per key and base URL; share it.
 * Every method retries per retry.ts (the one retry layer) and accepts an AbortSignal.
 */
export class ServiceClient {
  readonly baseUrl: string;
  readonly policy: RetryPolicy;
  readonly uploadLimiter: UploadLimiter;
  readonly statusBucket: TokenBucket;
  #http: HttpContext;
  #ownAgent: Agent | undefined;
  #onRetry: ServiceClientOptions['onRetry'];

  constructor(opts: ServiceClientOptions) {
    if (!opts.baseUrl) throw new UsageError('the service base URL is empty');
    if (!/^https?:\/\//i.test(opts.baseUrl)) throw new UsageError(`the service base URL must start with http:// or https://, got "${opts.baseUrl}"`);
    if (!opts.apiKey) throw new UsageError('the API key is empty');
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.policy = checkPolicy(opts.policy ?? DEFAULT_POLICY);
    this.uploadLimiter = opts.uploadLimiter ?? new UploadLimiter();
    this.statusBucket = new TokenBucket(opts.statusRatePerSec ?? 10);
    this.#onRetry = opts.onRetry;
    let dispatcher = opts.dispatcher;
    const t = opts.timeouts ?? {};
    if (!dispatcher) {
      this.#ownAgent = new (undici().Agent)({
        ...KEEP_IDLE,
        connect: { timeout: t.connectMs ?? 10_000 },
        // Idle timeouts a little past the request deadline, which ends a request first (with its own message).
        headersTimeout: t.headersMs ?? (t.requestMs ?? DEFAULT_REQUEST_TIMEOUT_MS) + 1_000,
        bodyTimeout: t.bodyMs ?? (t.requestMs ?? DEFAULT_REQUEST_TIMEOUT_MS) + 1_000,
      });
      dispatcher = this.#ownAgent;
    }
    this.#http = new HttpContext(this.baseUrl, opts.apiKey, dispatcher, {
      ...(t.requestMs !== undefined ? { requestMs: t.requestMs } : {}),
      ...(t.stopGraceMs !== undefined ? { stopGraceMs: t.stopGraceMs } : {}),
    });
  }

  /**
   * POST /api/generate/submit. A possibly-created task is thrown as AmbiguousSubmitError (also an abort after
   * the request was written), unless `keepIfSent`: then the signal stops waits and unsent tries at once, and a
   * written request is left a short grace to answer (its answer says whether a task was made), then cut
   * (AmbiguousSubmitError).
   */
  async submit(req: SubmitRequest, opts?: AbortSignal | { signal?: AbortSignal; keepIfSent?: boolean }): Promise<SubmitResult> {
    const body: Record<string, unknown> = { model: req.model, input: req.input };
    if (req.callback_url !== undefined) body.callback_url = req.callback_url;
    const keepIfSent = !(opts instanceof AbortSignal) && opts?.keepIfSent === true;
    const send: SendOptions = { method: 'POST', path: '/api/generate/submit', json: body, signal: signalOf(opts), keepIfSent, maxBytes: ANSWER_MAX_BYTES.submit };
    // The answer is checked inside the retry layer: an unreadable one becomes "uncertain" (AmbiguousSubmitError).
    return withRetry(async () => this.#parse(SubmitResultSchema, dataOf(await this.#http.send(send), 'submit'), 'submit', fastSubmitResult), this.#retryOptions('submit', 'POST', true, send.signal));
  }

  /** GET /api/generate/status/{task_id}, under the shared status rate cap. */
  async status(taskId: string, opts?: CallOptions): Promise<Task> {
    const path = `/api/generate/status/${encodeURIComponent(taskId)}`;
    const data = await this.#call('status', { method: 'GET', path, signal: signalOf(opts), maxBytes: ANSWER_MAX_BYTES.status }, this.statusBucket);
    return sameTask(this.#parse(TaskSchema, data, 'status', fastTask), taskId, 'status');
  }

  /** GET /api/generate/detail/music?task_id=..., under the shared status rate cap. */
  async musicDetail(taskId: string, opts?: CallOptions): Promise<MusicTask> {
    const path = `/api/generate/detail/music?task_id=${encodeURIComponent(taskId)}`;
    const data = await this.#call('music detail', { method: 'GET', path, signal: signalOf(opts), maxBytes: ANSWER_MAX_BYTES.musicDetail }, this.statusBucket);
    return sameTask(this.#parse(MusicTaskSchema, data, 'music detail'), taskId, 'music detail');
  }

  /**
   * GET /api/user/balance. The body is not shown by the contract: accepts a
   * number in `data`, or an object in `data` whose balance is a known name
   * (balance, credits, remaining, available, ...) or its only numeric field.
   */
  async balance(opts?: CallOptions): Promise<number> {
    return (await this.balanceAnswer(opts)).credits;
  }

  /** The balance as balance() reads it, and whether the service wrote it as a string (a price probe will not learn from one). */
  async balanceAnswer(opts?: CallOptions): Promise<BalanceAnswer> {
    const raw = await this.#callRaw('balance', { method: 'GET', path: '/api/user/balance', signal: signalOf(opts), maxBytes: ANSWER_MAX_BYTES.balance });
    return readBalance(raw);
  }

  /** POST /api/common/upload/stream (multipart field `file`), streamed from disk when given a path. */
  async uploadStream(file: string | Buffer, opts: UploadOptions = {}): Promise<UploadRecord> {
    const blob = typeof file === 'string' ? await openFile(file) : new Blob([new Uint8Array(file)]);
    const name = opts.fileName ?? (typeof file === 'string' ? basename(file) : 'upload');
    const makeForm = (): FormData => {
      const form = new (undici().FormData)();
      form.set('file', blob, name);
      if (opts.fileName !== undefined) form.set('file_name', opts.fileName);
      if (opts.uploadPath !== undefined) form.set('upload_path', opts.uploadPath);
      return form;
    };
    return this.#upload('upload stream', '/api/common/upload/stream', () => ({ form: makeForm(), uploadBytes: blob.size }), opts);
  }

  /**
   * POST /api/common/upload/base64. Choice: the contract does not name the
   * field carrying the data; we send `base64_data` (pure Base64 or a Data URL, as given).
   */
  async uploadBase64(dataUrlOrBase64: string, opts: UploadOptions = {}): Promise<UploadRecord> {
    const json: Record<string, unknown> = { base64_data: dataUrlOrBase64 };
    if (opts.fileName !== undefined) json.file_name = opts.fileName;
    if (opts.uploadPath !== undefined) json.upload_path = opts.uploadPath;
    return this.#upload('upload base64', '/api/common/upload/base64', () => ({ json, uploadBytes: dataUrlOrBase64.length }), opts);
  }

  /** POST /api/common/upload/url: the service fetches a public URL. */
  async uploadUrl(url: string, opts: UploadOptions = {}): Promise<UploadRecord> {
    const json: Record<string, unknown> = { file_url: url };
    if (opts.fileName !== undefined) json.file_name = opts.fileName;
    if (opts.uploadPath !== undefined) json.upload_path = opts.uploadPath;
    return this.#upload('upload url', '/api/common/upload/url', () => ({ json }), opts);
  }

  /** Closes the client's own keep-alive Agent (not a dispatcher passed in). */
  async close(): Promise<void> {
    await this.#ownAgent?.close();
  }

  async #upload(operation: string, path: string, body: () => Pick<SendOptions, 'json' | 'form' | 'uploadBytes'>, opts: UploadOptions): Promise<UploadRecord> {
    const { signal, slot } = opts;
    // Every try, retries included, takes a slot of the upload window (and of the shared one, when given).
    const data = await withRetry(
      async () => {
        const endShared = slot ? await slot(signal) : null;
        let outcome = { rateLimited: false, retryAfterMs: null as number | null };
        try {
          const releaseSlot = await this.uploadLimiter.acquire(signal);
          try {
            return dataOf(await this.#http.send({ method: 'POST', path, ...body(), signal, maxBytes: ANSWER_MAX_BYTES.upload }), operation);
          } finally {
            releaseSlot();
          }
        } catch (err) {
          if (err instanceof ApiError && err.status === 429) outcome = { rateLimited: true, retryAfterMs: err.retryAfterMs };
          throw err;
        } finally {
          // The try's own error is the one that matters: a shared slot not ended here is the store's to expire.
          await endShared?.(outcome).catch(() => undefined);
        }
      },
      // Uploads are retried like a GET (retry.ts: a duplicate temporary upload is harmless).
      this.#retryOptions(operation, 'UPLOAD', false, signal),
    );
    return this.#parse(UploadRecordSchema, data, operation);
  }

  async #call(operation: string, req: SendOptions, bucket?: TokenBucket): Promise<unknown> {
    const raw = await this.#callRaw(operation, req, bucket);
    return dataOf(raw, operation);
  }

  /** A GET, retried; under `bucket` when given (a free token is taken without waiting a turn of the event loop). */
  #callRaw(operation: string, req: SendOptions, bucket?: TokenBucket): Promise<unknown> {
    return withRetry(
      bucket === undefined
        ? () => this.#http.send(req)
        : async () => {
            if (!bucket.tryTake()) await bucket.take(req.signal);
            return this.#http.send(req);
          },
      this.#retryOptions(operation, req.method, false, req.signal),
    );
  }

  #retryOptions(operation: string, method: RetryMethod, submit: boolean, signal?: AbortSignal) {
    const onRetry = this.#onRetry;
    return {
      policy: this.policy,
      method,
      submit,
      signal,
      onRetry: onRetry ? (info: RetryInfo) => onRetry({ ...info, operation }) : undefined,
    };
  }

  /** `data` parsed by `schema`; `fast`, when given, is its exact fast path (schemas.ts), zod deciding whatever it leaves. */
  #parse<S extends z.ZodType>(schema: S, data: unknown, operation: string, fast?: (d: unknown) => z.infer<S> | undefined): z.infer<S> {
    if (fast !== undefined) {
      const quick = fast(data);
      if (quick !== undefined) return quick;
    }
    const r = schema.safeParse(data);
    if (!r.success) throw new BadResponseError(200, `${operation}: the answer's data does not have the documented shape: ${issuesText(r.error)}`);
    return r.data;
  }
}

/**
 * The answer about task `asked`, or a BadResponseError: an answer naming another task is not this task's (its
 * results would be saved for the wrong job); the poll reads it as a failed read and tries again.
 */
function sameTask<T extends { task_id: string }>(task: T, asked: string, operation: string): T {
  if (task.task_id !== asked) throw new BadResponseError(200, `${operation}: the answer is about task ${serverText(task.task_id)}, not ${asked}`);
  return task;
}

async function openFile(path: string): Promise<Blob> {
  try {
    if (!(await stat(path)).isFile()) throw new UsageError(`upload file ${path} is not a regular file`);
    return await openAsBlob(path);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    const code = err instanceof Error && 'code' in err ? String(err.code) : 'unreadable';
    throw new UsageError(`upload file ${path} cannot be read (${code})`);
  }
}

/** `data` of the success envelope `{code, data}`. */
function dataOf(raw: unknown, operation: string): unknown {
  const quick = fastEnvelopeData(raw);
  if (quick !== undefined) return quick;
  const env = EnvelopeSchema.safeParse(raw);
  if (!env.success || env.data.data === undefined) throw new BadResponseError(200, `${operation}: the answer has no "data" field`);
  if (env.data.code !== undefined && env.data.code !== 200) throw new BadResponseError(200, `${operation}: the answer's code is ${env.data.code}, expected 200`);
  return env.data.data;
}

function asNumber(v: unknown): number | null {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  // A string of 400 digits parses to Infinity: refused as a number Infinity is (charges of Infinity - Infinity are NaN).
  if (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v.trim()) && Number.isFinite(Number(v))) return Number(v);
  return null;
}

/**
 * The balance from a body whose shape the contract does not show: `data` as a
 * number (or numeric string), or an object with a known balance name, or with
 * exactly one numeric field. A body without an envelope is read the same way.
 */
export function parseBalance(raw: unknown): number {
  return readBalance(raw).credits;
}

/**
 * A balance answer as the service wrote it: the number, and whether it came as a numeric string. The
 * contract does not show the body, so balance() takes both; learning a price takes a JSON number only.
 */
export interface BalanceAnswer {
  credits: number;
  /** The value was a string such as "1000" (read as a number by balance()). */
  quoted: boolean;
}

/** parseBalance, telling a JSON number from a numeric string. */
export function readBalance(raw: unknown): BalanceAnswer {
  const answer = (v: unknown): BalanceAnswer | null => {
    const n = asNumber(v);
    return n === null ? null : { credits: n, quoted: typeof v === 'string' };
  };
  const data = typeof raw === 'object' && raw !== null && !Array.isArray(raw) && 'data' in raw ? raw.data : raw;
  const direct = answer(data);
  if (direct !== null) return direct;
  if (typeof data === 'object' && data !== null && !Array.isArray(data)) {
    const fields = Object.entries(data);
    for (const name of BALANCE_FIELDS) {
      const hit = fields.find(([k]) => k === name);
      const n = hit ? answer(hit[1]) : null;
      if (n !== null) return n;
    }
    const numeric = fields.filter(([, v]) => asNumber(v) !== null);
    if (numeric.length === 1) return answer((numeric[0] as [string, unknown])[1]) as BalanceAnswer;
    const names = numeric.map(([k]) => k).join(', ');
    throw new BadResponseError(200, numeric.length === 0
      ? 'balance: the answer\'s data has no numeric field'
      : `balance: the answer's data has several numeric fields (${names}) and none is named ${BALANCE_FIELDS.join(', ')}`);
  }
  throw new BadResponseError(200, 'balance: the answer\'s data is neither a number nor an object');
}
