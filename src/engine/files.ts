import { mkdirSync, renameSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { tmpSuffix, writeNewFileSynced } from '../download/index.js';

/**
 * Write a small file atomically: temp file in the same folder, fsync (off the main thread), rename.
 * open, write, close, rename and mkdir are synchronous (cheaper than a thread-pool trip each, see
 * src/download/fileops.ts); only the fsync goes to the thread pool.
 * The folder itself is not fsynced: callers that record the file as done fsync it once (fsyncDir) first.
 * `dirExists`: the caller made the folder already (no mkdir).
 */
export async function writeFileAtomic(path: string, data: string, o: { dirExists?: boolean } = {}): Promise<void> {
  const dir = dirname(path);
  if (!o.dirExists) mkdirSync(dir, { recursive: true });
  // Same temporary name pattern as the downloader, so cleanupPartials removes leftovers of both.
  const tmp = join(dir, `.${basename(path)}.${tmpSuffix()}.part`);
  await writeNewFileSynced(tmp, data, 'w');
  renameSync(tmp, path);
}
