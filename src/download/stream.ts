/** The streaming path: undici `request` and a Readable body, for bodies over SMALL_BODY or without file_size. */
import { createHash } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import type { Dispatcher } from 'undici';
import { undici } from '../client/undici.js';
import { ApiError, NetworkError, UnsafeResultError } from '../errors.js';
import { fsyncFd, removeQuietly, tmpSuffix, writeAllV } from './fileops.js';
import { MAX_REDIRECTS, asNetworkError, discard, header, mediaType, parseHttpUrl, shown } from './http.js';
import { retryAfterMs } from '../client/http.js';
import { safeJoin } from './names.js';
import { SMALL_BODY, ownDispatcher, type DownloadOptions, type DownloadResult } from './options.js';
import { commitWhole, place } from './place.js';
import { BodyCheck } from './check.js';

/** The streaming path writes the body to the temporary file in batches of about this many bytes. */
const WRITE_BATCH = 1024 * 1024;

/** Sends GET, follows up to MAX_REDIRECTS redirects, returns the final 2xx response. */
async function get(start: URL, opts: Pick<DownloadOptions, 'signal' | 'dispatcher'>): Promise<{ url: URL; res: Dispatcher.ResponseData }> {
  let url = start;
  for (let hop = 0; ; hop++) {
    let res: Dispatcher.ResponseData;
    try {
      res = await undici().request(url, {
        method: 'GET',
        headers: { 'accept-encoding': 'identity' },
        signal: opts.signal ?? null,
        dispatcher: opts.dispatcher ?? ownDispatcher(),
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
      throw new ApiError(statusCode, null, `download of ${shown(url)} failed`, retryAfterMs(header(headers, 'retry-after') ?? undefined));
    }
    if (statusCode !== 200 && statusCode !== 203) {
      // We never send Range, so 206 (or a bodiless 204) cannot be the whole file.
      await res.body.dump().catch(() => undefined);
      throw new UnsafeResultError(`download of ${shown(url)}: unexpected HTTP ${statusCode} for a whole-file GET`);
    }
    return { url, res };
  }
}

/** An answer whose headers passed the checks, its body not read yet. */
export interface OpenBody {
  url: URL;
  /** The URL without its query, for messages. */
  where: string;
  res: Dispatcher.ResponseData;
  /** Content-Length, or null. */
  declared: number | null;
  contentType: string | null;
}

/**
 * GET with redirects (get()), then the header checks: no content-encoding, Content-Length within
 * `maxBytes` and equal to `expected` (file_size) when both are given. The body is the caller's to read.
 */
export async function openBody(startUrl: URL, expected: number | null, maxBytes: number, opts: Pick<DownloadOptions, 'signal' | 'dispatcher'>): Promise<OpenBody> {
  const { url, res } = await get(startUrl, opts);
  const where = shown(url);
  const contentType = mediaType(header(res.headers, 'content-type'));
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
  return { url, where, res, declared, contentType };
}

/**
 * The streaming path of downloadFile (moved here from its body unchanged): GET with redirects
 * (openBody()), header checks, then the body: small() when Content-Length is at most SMALL_BODY,
 * otherwise streamed to the temporary file in batches, checked, fsynced and placed.
 */
export async function streamToFile(startUrl: URL, name: string, expected: number | null, maxBytes: number, opts: DownloadOptions): Promise<DownloadResult> {
  const { url, where, res, declared, contentType } = await openBody(startUrl, expected, maxBytes, opts);

  const tmp = safeJoin(opts.dir, `.${name}.${tmpSuffix()}.part`);
  const hash = createHash('sha256');
  if (declared !== null && declared <= SMALL_BODY) return small(res, { url, where, tmp, name, hash, declared, expected, maxBytes, contentType, opts });
  const check = new BodyCheck({ where, declared, expected, maxBytes });
  let size = 0;
  let sha256 = '';
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
          check.update(buf); // over the cap or file_size: UnsafeResultError (leaving the loop drops the body)
          batch.push(buf);
          batchBytes += buf.length;
          if (batchBytes >= WRITE_BATCH || batch.length >= 256) await flush();
        }
        if (batch.length > 0) await flush();
      } catch (err) {
        throw err === diskError ? err : asNetworkError(err, url, 'body');
      }
      ({ size, sha256 } = check.finish());
      await fsyncFd(fd);
    } finally {
      closeSync(fd);
    }
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
