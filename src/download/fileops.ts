/** File operations and fsync helpers: temporary names and files, batched writes, fsync, hashing, verify and cleanup of leftovers. */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, constants, createReadStream, fsync, lstatSync, openSync, unlinkSync, writeFileSync, writev } from 'node:fs';
import { readdir, unlink } from 'node:fs/promises';
import { safeJoin } from './names.js';

/** Temporary files: `.<name>.<12 hex>.part`, in the target folder. */
const PART_RE = /^\..+\.[0-9a-f]{12}\.part$/;

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

/** Writes all of `bufs` at the file's current position (off the main thread), continuing after a short write. */
export async function writeAllV(fd: number, bufs: Buffer[]): Promise<void> {
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
export async function fillSyncClose(fd: number, data: string | Buffer | readonly Buffer[]): Promise<void> {
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

export function removeQuietly(path: string): void {
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

/** The sha256 of the file `path` in the output folder, opened O_NOFOLLOW: a link put in its place since it was lstat'ed is refused (ELOOP), never read through. */
export async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  const fd = openSync(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
  for await (const chunk of createReadStream('', { fd })) hash.update(chunk as Buffer);
  return hash.digest('hex');
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
  // A job folder that is a symbolic link is not followed: its target's files are not ours (the run refuses the folder).
  if (lstatSync(dir, { throwIfNoEntry: false })?.isSymbolicLink()) return removed;
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
      for (const name of await cleanupPartials(path, true)) removed.push(name);
    }
  }
  return removed;
}
