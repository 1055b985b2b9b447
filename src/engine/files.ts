import { closeSync, readFileSync } from 'node:fs';
import { fillSyncClose, place, tmpSuffix } from '../download/index.js';
import { UnsafePathError } from '../errors.js';
import { Root } from '../lib/root.js';
import { sha256Hex } from './results.js';

/**
 * The run's writes into the output folder, every one through its Root (src/lib/root.ts): the job folder is
 * made and checked (no symbolic link at any level, its realpath inside the output folder's) at the moment of
 * each operation; temporary files are new (O_CREAT|O_EXCL|O_NOFOLLOW), renames and links are made inside
 * checked folders. The Root is opened per operation (one realpath), never per byte.
 */
export function outputRoot(outDir: string): Root {
  return Root.open(outDir, { create: true });
}

/**
 * Before anything is sent: every job folder that already exists in the output folder is a real
 * folder. One listing of the output folder; job ids are only looked at when it holds a symbolic link
 * or a file (usually it holds none). Throws UnsafePathError naming the first one.
 */
export function checkJobFolders(outDir: string, folders: () => Iterable<string>): void {
  let entries;
  try {
    entries = Root.open(outDir).list('') ?? [];
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const odd = new Map(entries.filter((e) => !e.isDirectory()).map((e) => [e.name, e.isSymbolicLink() ? 'is a symbolic link' : 'is not a folder']));
  if (odd.size === 0) return;
  const root = Root.open(outDir);
  for (const f of folders()) {
    const what = odd.get(f);
    if (what !== undefined) throw new UnsafePathError(root.path(f), what);
  }
}

/** `name`'s folder and last part (`a/b/c.json` -> `a/b`, `c.json`). */
function split(name: string): { dir: string; base: string } {
  const i = name.lastIndexOf('/');
  return i < 0 ? { dir: '', base: name } : { dir: name.slice(0, i), base: name.slice(i + 1) };
}

/** A new temporary file beside `name` (`.<base>.<12 hex>.part`, the downloader's pattern: cleanupPartials removes leftovers), filled, fsynced, closed; its name under the root. */
async function newTemp(root: Root, name: string, data: string): Promise<string> {
  const { dir, base } = split(name);
  const tmp = `${dir === '' ? '' : `${dir}/`}.${base}.${tmpSuffix()}.part`;
  const { fd } = root.createNew(tmp);
  try {
    await fillSyncClose(fd, data);
  } catch (err) {
    removeQuietly(root, tmp);
    throw err;
  }
  return tmp;
}

function removeQuietly(root: Root, name: string): void {
  try {
    root.remove(name);
  } catch {
    // already gone, or its folder is no longer ours
  }
}

/**
 * Write a small file `name` (under the output folder's root) atomically: a new temporary file beside it,
 * fsync (off the main thread), rename, through the Root. The folder itself is not fsynced: callers that
 * record the file as done fsync it once (fsyncDir) first.
 */
export async function writeFileAtomic(root: Root, name: string, data: string): Promise<void> {
  const tmp = await newTemp(root, name, data);
  try {
    root.rename(tmp, name);
  } catch (err) {
    removeQuietly(root, tmp);
    throw err;
  }
}

/** The text of the regular file `name` under the root (never through a link), or null when it is missing. */
export function readSmallFile(root: Root, name: string): string | null {
  const got = root.openRead(name);
  if (got === null) return null;
  try {
    return readFileSync(got.fd, 'utf8');
  } finally {
    closeQuietly(got.fd);
  }
}

/**
 * Write `text` under `name` in the job folder `folder` of the root without replacing another file, placed
 * like a download (src/download/place.ts): a taken name with other content gives `name (2).ext`; the same
 * content is reused. The file is fsynced, the folder is not (the caller fsyncs it once before recording).
 * Returns the path used.
 */
export async function writeTextNoReplace(root: Root, folder: string, name: string, text: string): Promise<string> {
  const tmp = await newTemp(root, `${folder}/${name}`, text);
  try {
    const placed = await place(root.path(tmp), root.mkdirs(folder), name, Buffer.byteLength(text), sha256Hex(text), true);
    return placed.path;
  } finally {
    removeQuietly(root, tmp); // placed by a link, or the same content was there: the temporary name goes (already renamed into place: nothing)
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // closed already
  }
}
