import { lstatSync, mkdirSync, readdirSync, renameSync, unlinkSync, type Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { place, tmpSuffix, writeNewFileSynced } from '../download/index.js';
import { UnsafePathError } from '../errors.js';
import { sha256Hex } from './results.js';

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Throws UnsafePathError unless `path` is a real folder (lstat: a symbolic link is never followed). */
export function checkRealDir(path: string): void {
  const st = lstatOrNull(path);
  if (st === null) return;
  if (st.isSymbolicLink()) throw new UnsafePathError(path, 'is a symbolic link');
  if (!st.isDirectory()) throw new UnsafePathError(path, 'is not a folder');
}

/**
 * Before anything is sent: every job folder that already exists in the output folder is a real
 * folder. One readdir of the output folder; job ids are only looked at when it holds a symbolic link
 * or a file (usually it holds none). Throws UnsafePathError naming the first one.
 */
export function checkJobFolders(outDir: string, folders: () => Iterable<string>): void {
  let entries;
  try {
    entries = readdirSync(outDir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const odd = new Map(entries.filter((e) => !e.isDirectory()).map((e) => [e.name, e.isSymbolicLink() ? 'is a symbolic link' : 'is not a folder']));
  if (odd.size === 0) return;
  for (const f of folders()) {
    const what = odd.get(f);
    if (what !== undefined) throw new UnsafePathError(join(outDir, f), what);
  }
}

/**
 * The folder `folder` (one name) inside the output folder, made when missing, and checked to be a
 * real folder: a symbolic link placed there (out/cat -> ../victim) would send genbatch's writes and
 * moves outside the output folder, so it is refused (UnsafePathError, exit 74), never followed.
 */
export function realJobDir(outDir: string, folder: string): string {
  const dir = join(outDir, folder);
  if (folder === '' || folder === '.' || folder === '..' || folder.includes('/') || folder.includes('\\')) throw new UnsafePathError(dir, 'is not one folder name');
  if (lstatOrNull(dir) === null) {
    mkdirSync(outDir, { recursive: true });
    try {
      mkdirSync(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  checkRealDir(dir);
  return dir;
}

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
