/**
 * A result file streamed from the service into object storage (`--out s3://...`): the same GET, redirects,
 * pace and header checks as a download to disk (openBody), the body counted, hashed and checked on the way
 * (BodyCheck) by the storage writer it is handed to. No temporary file, no whole file in memory.
 */
import { UnsafeResultError } from '../errors.js';
import { BodyCheck } from './check.js';
import { asNetworkError, parseHttpUrl } from './http.js';
import { sanitizeName } from './names.js';
import { DEFAULT_MAX_BYTES, ownDispatcher, type DownloadOptions } from './options.js';
import { DEFAULT_PACE, paced } from './pace.js';
import { openBody } from './stream.js';

/** What the storage writer gets: the cleaned name, the body, its check, its media type. */
export interface BodyToStore {
  name: string;
  body: AsyncIterable<Buffer>;
  check: BodyCheck;
  contentType: string | null;
}

/**
 * GETs `opts.url` and hands the body to `store` (which must read it through `check` and return once the
 * object is in place). Errors as downloadFile: ApiError, NetworkError (sent), UnsafeResultError, the
 * signal's AbortError; plus whatever `store` throws.
 */
export async function downloadToStore<T>(opts: Pick<DownloadOptions, 'url' | 'name' | 'expectedSize' | 'maxBytes' | 'signal' | 'dispatcher' | 'pace'>, store: (b: BodyToStore) => Promise<T>): Promise<T> {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
  const expected = opts.expectedSize ?? null;
  if (expected !== null && (!Number.isSafeInteger(expected) || expected < 0)) throw new UnsafeResultError(`file_size: must be a whole number of bytes, got ${expected}`);
  if (expected !== null && expected > maxBytes) throw new UnsafeResultError(`file_size: ${expected} bytes is over the limit of ${maxBytes}`);
  const startUrl = parseHttpUrl(opts.url);
  const name = sanitizeName(opts.name, 'file');
  const dispatcher = paced(opts.dispatcher ?? ownDispatcher(), { ...DEFAULT_PACE, ...opts.pace });
  const { url, where, res, declared, contentType } = await openBody(startUrl, expected, maxBytes, { signal: opts.signal, dispatcher });
  const check = new BodyCheck({ where, declared, expected, maxBytes });
  async function* body(): AsyncGenerator<Buffer> {
    try {
      for await (const chunk of res.body) yield chunk as Buffer;
    } catch (err) {
      throw asNetworkError(err, url, 'body');
    }
  }
  try {
    return await store({ name, body: body(), check, contentType });
  } finally {
    if (!res.body.destroyed) {
      res.body.on('error', () => undefined);
      res.body.destroy();
    }
  }
}
