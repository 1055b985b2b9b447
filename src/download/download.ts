/**
 * The public entry. The downloader is split by what each part does (this module and index.ts export
 * the same names as before the split):
 * options.ts (options, result, limits), http.ts (URL checks, headers, error mapping), whole.ts (the
 * whole-body path: one undici dispatch with a small handler), stream.ts (the streaming path),
 * place.ts (moving a finished file into place), fileops.ts (synchronous file operations, fsync helpers).
 */
import { mkdirSync } from 'node:fs';
import { ApiError, UnsafeResultError } from '../errors.js';
import { parseHttpUrl } from './http.js';
import { safeJoin, sanitizeName } from './names.js';
import { DEFAULT_MAX_BYTES, SMALL_BODY, ownDispatcher, type DownloadOptions, type DownloadResult } from './options.js';
import { DEFAULT_PACE, paced } from './pace.js';
import { streamToFile } from './stream.js';
import { whole } from './whole.js';

export { DEFAULT_MAX_BYTES, SMALL_BODY, type DownloadOptions, type DownloadResult } from './options.js';
export { DEFAULT_PACE, type DownloadPace } from './pace.js';
export { fsyncFd, fillSyncClose, writeNewFileSynced, tmpSuffix, fsyncDir, verifyFile, cleanupPartials, sha256OfFile } from './fileops.js';

/** True for an HTTP 404 or 410 answer: the result is expired or gone, retrying will not help. */
export function isGone(err: unknown): boolean {
  return err instanceof ApiError && (err.status === 404 || err.status === 410);
}

/**
 * Downloads one result file safely: streams to `.<name>.<random>.part` in
 * `dir`, counting and hashing, checks the byte count against Content-Length,
 * `expectedSize` and `maxBytes`, fsyncs, moves into place without ever
 * replacing an existing file, and fsyncs the folder. On any failure the
 * temporary file is removed. No retries here: the caller owns retries.
 *
 * Every request is paced (pace.ts): headers within 60 s, then at least 1 KiB/s over every 60 s.
 *
 * Errors: ApiError for a non-2xx answer (isGone() for 404/410); NetworkError
 * (sent=true) for resets, truncated bodies and a request cut by its pace; UnsafeResultError for a bad URL,
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
  const watched = { ...opts, dispatcher: paced(opts.dispatcher ?? ownDispatcher(), { ...DEFAULT_PACE, ...opts.pace }) };
  if (expected !== null && expected <= SMALL_BODY && opts.stream !== true) return whole(startUrl, name, expected, maxBytes, watched);
  return streamToFile(startUrl, name, expected, maxBytes, watched);
}
