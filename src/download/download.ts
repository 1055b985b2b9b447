import { createHash, randomBytes, type Hash } from 'node:crypto';
import { closeSync, createReadStream, fsync, linkSync, lstatSync, mkdirSync, openSync, renameSync, unlinkSync, writeFileSync, writev } from 'node:fs';
import { readdir, unlink } from 'node:fs/promises';
import { errors as undiciErrors, getGlobalDispatcher, request, type Dispatcher } from 'undici';
import { ApiError, NetworkError, UnsafeResultError } from '../errors.js';
import { numberedName, safeJoin, sanitizeName } from './names.js';

/** Default cap on one downloaded file. */
export const DEFAULT_MAX_BYTES = 2 * 1024 ** 3;
/** Redirects followed per download (each target must be http or https too). */
const MAX_REDIRECTS = 5;
/** Names `name (2).ext` ... `name (999).ext` are tried before giving up. */
const MAX_NUMBERED = 999;
/** Temporary files: `.<name>.<12 hex>.part`, in the target folder. */
const PART_RE = /^\..+\.[0-9a-f]{12}\.part$/;
/**
 * Bodies of at most this many bytes are read into memory (still counted, checked and hashed chunk
 * by chunk) and written with one write once complete, so a body that fails midway leaves no
 * temporary file to remove: when `file_size` says so before the request (one undici dispatch with
 * a small handler, no Readable stream), or when Content-Length says so (the streaming path's
 * request). Larger or unannounced bodies stream to the temporary file as they come.
 */
export const SMALL_BODY = 64 * 1024;

/**
 * File operations: the cheap ones (open, write of a small buffer, close, link, unlink, rename,
 * mkdir, lstat) are synchronous on the main thread, each a few microseconds of system time; a
 * thread-pool trip costs more CPU than most of them (futex wake-ups, context switches, the
 * completion's event-loop turn). Only fsync, which waits for the disk, goes to the thread pool,
 * one trip per file and one per folder. fsync, not fdatasync: fdatasync was no cheaper in isolation
 * and costlier end to end on ext4 (2af7fa4).
 */
export function fsyncFd(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));
}

/** The streaming path writes the body to the temporary file in batches of about this many bytes. */
const WRITE_BATCH = 1024 * 1024;

/** Writes all of `bufs` at the file's current position (off the main thread), continuing after a short write. */
async function writeAllV(fd: number, bufs: Buffer[]): Promise<void> {
  let rest = bufs;
  for (;;) {
    let total = 0;
    for (const b of rest) total += b.length;
    const written = await new Promise<number>((resolve, reject) => writev(fd, rest, null, (err, n) => (err ? reject(err) : resolve(n))));
    if (written >= total) return;
    if (written <= 0) throw new Error(`write to a temporary file made no progress (${written} of ${total} bytes)`);
    let skip = written;
    const next: Buffer[] = [];
    for (const b of rest) {
      if (skip >= b.length) skip -= b.length;
      else {
        next.push(skip > 0 ? b.subarray(skip) : b);
        skip = 0;
      }
    }
    rest = next;
  }
}

/**
 * Write `data` to a new file `tmp` (`wx` by default: fails if it exists), fsync it, close it.
 * The name is made durable by the caller's folder fsync after the rename or link.
 */
export async function writeNewFileSynced(tmp: string, data: string | Buffer | readonly Buffer[], flags: 'wx' | 'w' = 'wx'): Promise<void> {
  await fillSyncClose(openSync(tmp, flags, 0o644), data);
}

/** Writes `data` to `fd` (all of it), fsyncs it and closes it, also on failure. */
async function fillSyncClose(fd: number, data: string | Buffer | readonly Buffer[]): Promise<void> {
  try {
    // writeFileSync on a descriptor writes everything (looping on short writes) and does not close it.
    if (typeof data === 'string' || Buffer.isBuffer(data)) writeFileSync(fd, data);
    else if (data.length === 1) writeFileSync(fd, data[0]!);
    else writeFileSync(fd, Buffer.concat(data));
    await fsyncFd(fd);
  } finally {
    closeSync(fd);
  }
}

/** 12 hex for a temporary name: 6 random per process, then a counter (cheaper than randomBytes per file; opened with `wx` anyway). */
const TMP_PREFIX = randomBytes(3).toString('hex');
let tmpCounter = 0;
export function tmpSuffix(): string {
  tmpCounter = (tmpCounter + 1) % 0x1000000;
  return TMP_PREFIX + tmpCounter.toString(16).padStart(6, '0');
}

export interface DownloadOptions {
  url: string;
  /** Target folder (created when missing). The caller keeps it inside the output folder (see safeJoin). */
  dir: string;
  /** Wanted file name; cleaned with sanitizeName (fallback `file`). */
  name: string;
  /** The File object's `file_size`: the body must have exactly this many bytes. Null/undefined: not checked. */
  expectedSize?: number | null;
  /** Refuse bodies larger than this (default 2 GiB). */
  maxBytes?: number;
  signal?: AbortSignal;
  /** undici dispatcher (Agent, Pool with timeouts...). Default: undici's global dispatcher. */
  dispatcher?: Dispatcher;
  /** `dir` exists already (the caller made it): no mkdir. */
  dirExists?: boolean;
  /**
   * The caller fsyncs `dir` once after its last file (fsyncDir) and records the
   * files only after that; default false: the folder is fsynced here after the rename.
   */
  deferDirSync?: boolean;
  /**
   * Always use the streaming path (undici `request`, a Readable body), also when `expectedSize`
   * is at most SMALL_BODY. Same files, hashes and errors either way; tests compare the two paths.
   */
  stream?: boolean;
}

export interface DownloadResult {
  /** Absolute final path. */
  path: string;
  /** Final file name (differs from the cleaned requested name when `renamed`). */
  name: string;
  size: number;
  /** Hex sha256 of the content. */
  sha256: string;
  /** Content-Type header, or null. */
  contentType: string | null;
  /** An existing file with the same content was found under the final name and kept; nothing was written. */
  reused: boolean;
  /** The requested name held a different file, so `name (n).ext` was used instead. */
  renamed: boolean;
}

/** True for an HTTP 404 or 410 answer: the result is expired or gone, retrying will not help. */
export function isGone(err: unknown): boolean {
  return err instanceof ApiError && (err.status === 404 || err.status === 410);
}

/** The URL without query or fragment, for messages (signed URLs carry tokens in the query). */
function shown(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

function parseHttpUrl(raw: string, base?: URL): URL {
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

function header(headers: Record<string, string | string[] | undefined>, name: string): string | null {
  const v = headers[name];
  return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
}

function retryAfterMs(value: string | null): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

/** Errors raised before anything reached the server. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

function asNetworkError(err: unknown, url: URL, phase: 'request' | 'body'): unknown {
  if (err instanceof ApiError || err instanceof UnsafeResultError || err instanceof NetworkError) return err;
  if (err instanceof Error && (err.name === 'AbortError' || (err as { code?: string }).code === 'UND_ERR_ABORTED')) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const sent = !(phase === 'request' && typeof code === 'string' && NOT_SENT.has(code));
  const what = phase === 'body' ? 'body interrupted' : 'request failed';
  const detail = err instanceof Error ? `${typeof code === 'string' ? `${code} ` : ''}${err.message}` : String(err);
  return new NetworkError(`download of ${shown(url)}: ${what} (${detail})`, sent, { cause: err });
}

/** Stops reading a response body; the abort error undici then emits is expected, not a crash. */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone, or not ours to remove
  }
}

/** fsync a folder, so the names linked or renamed into it survive a power loss. */
export async function fsyncDir(dir: string): Promise<void> {
  const fd = openSync(dir, 'r');
  try {
    await fsyncFd(fd);
  } catch (err) {
    // Some platforms and filesystems refuse fsync on a directory; the rename is still done.
    const code = (err as { code?: string }).code;
    if (code !== 'EINVAL' && code !== 'EISDIR' && code !== 'EPERM' && code !== 'ENOTSUP') throw err;
  } finally {
    closeSync(fd);
  }
}

async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Sends GET, follows up to MAX_REDIRECTS redirects, returns the final 2xx response. */
async function get(start: URL, opts: DownloadOptions): Promise<{ url: URL; res: Dispatcher.ResponseData }> {
  let url = start;
  for (let hop = 0; ; hop++) {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(url, {
        method: 'GET',
        headers: { 'accept-encoding': 'identity' },
        signal: opts.signal ?? null,
        ...(opts.dispatcher ? { dispatcher: opts.dispatcher } : {}),
      });
    } catch (err) {
      throw asNetworkError(err, url, 'request');
    }
    const { statusCode, headers } = res;
    if (statusCode >= 300 && statusCode < 400 && header(headers, 'location')) {
      await res.body.dump().catch(() => undefined);
      if (hop >= MAX_REDIRECTS) throw new UnsafeResultError(`file_url: more than ${MAX_REDIRECTS} redirects from ${shown(start)}`);
      url = parseHttpUrl(header(headers, 'location')!, url);
      continue;
    }
    if (statusCode < 200 || statusCode >= 300) {
      await res.body.dump().catch(() => undefined);
      throw new ApiError(statusCode, null, `download of ${shown(url)} failed`, retryAfterMs(header(headers, 'retry-after')));
    }
    if (statusCode !== 200 && statusCode !== 203) {
      // We never send Range, so 206 (or a bodiless 204) cannot be the whole file.
      await res.body.dump().catch(() => undefined);
      throw new UnsafeResultError(`download of ${shown(url)}: unexpected HTTP ${statusCode} for a whole-file GET`);
    }
    return { url, res };
  }
}

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
      this.abortReason = (signal.reason as Error | undefined) ?? new undiciErrors.RequestAbortedError();
    } else if (signal) {
      this.onAbort = () => {
        const reason = (signal.reason as Error | undefined) ?? new undiciErrors.RequestAbortedError();
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
      this.drain = { error: new ApiError(statusCode, null, `download of ${shown(url)} failed`, retryAfterMs(header(headers, 'retry-after'))) };
      return;
    }
    if (statusCode !== 200 && statusCode !== 203) {
      this.drain = { error: new UnsafeResultError(`download of ${shown(url)}: unexpected HTTP ${statusCode} for a whole-file GET`) };
      return;
    }
    // Thrown here: undici aborts the request and hands the error to onResponseError.
    const where = shown(url);
    this.contentType = header(headers, 'content-type');
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
    (opts.dispatcher ?? getGlobalDispatcher()).dispatch(
      { origin: url.origin, path: url.search ? `${url.pathname}${url.search}` : url.pathname, method: 'GET', headers: { 'accept-encoding': 'identity' } },
      handler,
    );
  });
}

/**
 * `expected` (file_size) is at most SMALL_BODY: the body is read whole by WholeBody (redirects
 * followed as get() does), checked and hashed, then written to a temporary file made only then.
 */
async function whole(start: URL, name: string, expected: number, maxBytes: number, opts: DownloadOptions): Promise<DownloadResult> {
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

/**
 * Downloads one result file safely: streams to `.<name>.<random>.part` in
 * `dir`, counting and hashing, checks the byte count against Content-Length,
 * `expectedSize` and `maxBytes`, fsyncs, moves into place without ever
 * replacing an existing file, and fsyncs the folder. On any failure the
 * temporary file is removed. No retries here: the caller owns retries.
 *
 * Errors: ApiError for a non-2xx answer (isGone() for 404/410); NetworkError
 * (sent=true) for resets and truncated bodies; UnsafeResultError for a bad URL,
 * name or size; the signal's AbortError when aborted.
 */
export async function downloadFile(opts: DownloadOptions): Promise<DownloadResult> {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  const expected = opts.expectedSize ?? null;
  if (expected !== null && (!Number.isSafeInteger(expected) || expected < 0)) {
    throw new UnsafeResultError(`file_size: must be a whole number of bytes, got ${expected}`);
  }
  if (expected !== null && expected > maxBytes) {
    throw new UnsafeResultError(`file_size: ${expected} bytes is over the limit of ${maxBytes}`);
  }
  const startUrl = parseHttpUrl(opts.url);
  const name = sanitizeName(opts.name, 'file');
  safeJoin(opts.dir, name); // the cleaned name is a plain segment; this double-checks it
  if (!opts.dirExists) mkdirSync(opts.dir, { recursive: true });
  if (expected !== null && expected <= SMALL_BODY && opts.stream !== true) return whole(startUrl, name, expected, maxBytes, opts);

  const { url, res } = await get(startUrl, opts);
  const where = shown(url);
  const contentType = header(res.headers, 'content-type');
  const encoding = header(res.headers, 'content-encoding');
  const lengthHeader = header(res.headers, 'content-length');
  const declared = lengthHeader !== null && /^\d+$/.test(lengthHeader.trim()) ? Number(lengthHeader.trim()) : null;
  const refuse = async (message: string): Promise<never> => {
    discard(res.body);
    throw new UnsafeResultError(`download of ${where}: ${message}`);
  };
  if (encoding && encoding.toLowerCase() !== 'identity') await refuse(`content-encoding "${encoding}" is not supported`);
  if (declared !== null && declared > maxBytes) await refuse(`Content-Length ${declared} is over the limit of ${maxBytes} bytes`);
  if (declared !== null && expected !== null && declared !== expected) {
    await refuse(`Content-Length ${declared} differs from file_size ${expected}`);
  }

  const tmp = safeJoin(opts.dir, `.${name}.${tmpSuffix()}.part`);
  const hash = createHash('sha256');
  if (declared !== null && declared <= SMALL_BODY) return small(res, { url, where, tmp, name, hash, declared, expected, maxBytes, contentType, opts });
  let size = 0;
  let fd: number;
  let tmpGone = false;
  try {
    fd = openSync(tmp, 'wx', 0o644);
  } catch (err) {
    discard(res.body);
    throw err;
  }
  try {
    try {
      let diskError: unknown = null; // a local write failure (e.g. ENOSPC) is not a network error
      // Chunks are written in batches of up to WRITE_BATCH bytes: one thread-pool trip per batch
      // instead of one per chunk (undici hands over 16-64 KiB at a time).
      let batch: Buffer[] = [];
      let batchBytes = 0;
      const flush = async (): Promise<void> => {
        const bufs = batch;
        batch = [];
        batchBytes = 0;
        await writeAllV(fd, bufs).catch((err: unknown) => {
          diskError = err;
          throw err;
        });
      };
      try {
        for await (const chunk of res.body) {
          const buf = chunk as Buffer;
          size += buf.length;
          if (size > maxBytes) await refuse(`body is over the limit of ${maxBytes} bytes`);
          if (expected !== null && size > expected) await refuse(`body is longer than file_size ${expected}`);
          hash.update(buf);
          batch.push(buf);
          batchBytes += buf.length;
          if (batchBytes >= WRITE_BATCH || batch.length >= 256) await flush();
        }
        if (batch.length > 0) await flush();
      } catch (err) {
        throw err === diskError ? err : asNetworkError(err, url, 'body');
      }
      if (declared !== null && size !== declared) {
        throw new NetworkError(`download of ${where}: body has ${size} bytes, Content-Length said ${declared}`, true);
      }
      if (expected !== null && size !== expected) {
        throw new UnsafeResultError(`download of ${where}: body has ${size} bytes, file_size said ${expected}`);
      }
      await fsyncFd(fd);
    } finally {
      closeSync(fd);
    }
    const sha256 = hash.digest('hex');
    const placed = await place(tmp, opts.dir, name, size, sha256, opts.deferDirSync === true);
    tmpGone = !placed.reused; // linked and unlinked, or renamed
    return { ...placed, size, sha256, contentType };
  } finally {
    if (!tmpGone) removeQuietly(tmp);
  }
}

/**
 * A body of known length <= SMALL_BODY: read whole (counted, checked and hashed as it comes),
 * then written to the temporary file in one write, fsynced, closed and placed. The temporary
 * file is created only once the whole body is in and checked.
 */
async function small(
  res: Dispatcher.ResponseData,
  c: { url: URL; where: string; tmp: string; name: string; hash: ReturnType<typeof createHash>; declared: number; expected: number | null; maxBytes: number; contentType: string | null; opts: DownloadOptions },
): Promise<DownloadResult> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res.body) {
      const buf = chunk as Buffer;
      size += buf.length;
      if (size > c.declared) throw new NetworkError(`download of ${c.where}: body is longer than Content-Length ${c.declared}`, true);
      c.hash.update(buf);
      chunks.push(buf);
    }
  } catch (err) {
    discard(res.body);
    throw asNetworkError(err, c.url, 'body');
  }
  if (size !== c.declared) throw new NetworkError(`download of ${c.where}: body has ${size} bytes, Content-Length said ${c.declared}`, true);
  if (c.expected !== null && size !== c.expected) throw new UnsafeResultError(`download of ${c.where}: body has ${size} bytes, file_size said ${c.expected}`);
  return commitWhole(c.tmp, chunks, size, c.hash.digest('hex'), c.contentType, c.name, c.opts);
}

/**
 * A complete, checked body in memory: written to a new temporary file (made only now) in one
 * write, fsynced, closed and placed; the temporary file is removed on any failure.
 */
async function commitWhole(tmp: string, chunks: readonly Buffer[], size: number, sha256: string, contentType: string | null, name: string, opts: DownloadOptions): Promise<DownloadResult> {
  const fd = openSync(tmp, 'wx', 0o644); // on failure nothing was created: nothing to remove
  let tmpGone = false;
  try {
    await fillSyncClose(fd, chunks);
    const placed = await place(tmp, opts.dir, name, size, sha256, opts.deferDirSync === true);
    tmpGone = !placed.reused;
    return { ...placed, size, sha256, contentType };
  } finally {
    if (!tmpGone) removeQuietly(tmp);
  }
}

/**
 * Puts the finished temporary file under `name`, or under `name (n).ext`
 * when `name` holds different content; reuses a candidate that already holds
 * the same content. Never replaces an existing file.
 */
async function place(tmp: string, dir: string, name: string, size: number, sha256: string, deferDirSync: boolean): Promise<Pick<DownloadResult, 'path' | 'name' | 'reused' | 'renamed'>> {
  for (let n = 1; n <= MAX_NUMBERED; n++) {
    const candidate = n === 1 ? name : numberedName(name, n);
    const path = safeJoin(dir, candidate);
    // The link is tried first (the usual case: a free name); a taken name is then compared.
    if (linkNoReplace(tmp, path)) {
      if (!deferDirSync) await fsyncDir(dir);
      return { path, name: candidate, reused: false, renamed: n > 1 };
    }
    const existing = lstatSync(path, { throwIfNoEntry: false });
    if (existing && existing.isFile() && existing.size === size && (await sha256OfFile(path)) === sha256) {
      return { path, name: candidate, reused: true, renamed: n > 1 };
    }
  }
  throw new UnsafeResultError(`file name: "${name}" and ${MAX_NUMBERED - 1} numbered variants are all taken in ${dir}`);
}

/**
 * Creates `path` from `tmp` only if `path` does not exist: a hard link fails
 * atomically with EEXIST. Filesystems without hard links fall back to a rename
 * right after the existence check. Returns false when `path` was taken.
 */
function linkNoReplace(tmp: string, path: string): boolean {
  try {
    linkSync(tmp, path);
    unlinkSync(tmp);
    return true;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'EXDEV') throw err;
  }
  let taken = true;
  try {
    lstatSync(path);
  } catch {
    taken = false;
  }
  if (taken) return false;
  renameSync(tmp, path);
  return true;
}

/**
 * True when `path` is a regular file with exactly `size` bytes and this
 * sha256: lets a resumed run keep a file it already has instead of fetching
 * again (the URL may have expired). Missing file: false.
 */
export async function verifyFile(path: string, expected: { size: number; sha256: string }): Promise<boolean> {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return false;
  }
  if (!st.isFile() || st.size !== expected.size) return false;
  return (await sha256OfFile(path)) === expected.sha256.toLowerCase();
}

/**
 * Removes leftover `.<name>.<12 hex>.part` files in `dir` and, when
 * `recursive` (default true), in its subfolders (symlinks are not followed).
 * Call it on resume while holding the run's lease, never during downloads.
 * Returns the removed paths. A missing `dir` is not an error.
 */
export async function cleanupPartials(dir: string, recursive = true): Promise<string[]> {
  const removed: string[] = [];
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return removed;
    throw err;
  }
  for (const e of entries) {
    const path = safeJoin(dir, e.name);
    if (e.isFile() && PART_RE.test(e.name)) {
      await unlink(path);
      removed.push(path);
    } else if (recursive && e.isDirectory()) {
      removed.push(...(await cleanupPartials(path, true)));
    }
  }
  return removed;
}
