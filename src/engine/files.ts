import { mkdir, rename } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { tmpSuffix, writeNewFileSynced } from '../download/index.js';

/**
 * Write a small file atomically: temp file in the same folder, fsync (off the main thread), rename.
 * The folder itself is not fsynced: callers that record the file as done fsync it once (fsyncDir) first.
 * `dirExists`: the caller made the folder already (no mkdir).
 */
export async function writeFileAtomic(path: string, data: string, o: { dirExists?: boolean } = {}): Promise<void> {
  const dir = dirname(path);
  if (!o.dirExists) await mkdir(dir, { recursive: true });
  // Same temporary name pattern as the downloader, so cleanupPartials removes leftovers of both.
  const tmp = join(dir, `.${basename(path)}.${tmpSuffix()}.part`);
  await writeNewFileSynced(tmp, data, 'w');
  await rename(tmp, path);
}
