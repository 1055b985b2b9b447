import { mkdirSync, renameSync, unlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { place, tmpSuffix, writeNewFileSynced } from '../download/index.js';
import { sha256Hex } from './results.js';

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

/**
 * Write `text` under `name` in `dir` without replacing another file, placed like a download
 * (src/download/place.ts): a taken name with other content gives `name (2).ext`; the same content
 * is reused. The file is fsynced, the folder is not (the caller fsyncs it once before recording).
 * Returns the path used.
 */
export async function writeTextNoReplace(dir: string, name: string, text: string): Promise<string> {
  const tmp = join(dir, `.${name}.${tmpSuffix()}.part`);
  await writeNewFileSynced(tmp, text);
  try {
    const placed = await place(tmp, dir, name, Buffer.byteLength(text), sha256Hex(text), true);
    return placed.path;
  } finally {
    try {
      unlinkSync(tmp); // placed by a link, or the same content was there: the temporary name goes
    } catch {
      // already renamed into place (filesystems without hard links)
    }
  }
}
