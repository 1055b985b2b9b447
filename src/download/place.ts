/** Moving a finished temporary file into place: never replacing an existing file, reusing identical content. */
import { linkSync, lstatSync, openSync, renameSync, unlinkSync } from 'node:fs';
import { UnsafeResultError } from '../errors.js';
import { fillSyncClose, fsyncDir, removeQuietly, sha256OfFile } from './fileops.js';
import { numberedName, safeJoin } from './names.js';
import type { DownloadOptions, DownloadResult } from './options.js';

/** Names `name (2).ext` ... `name (999).ext` are tried before giving up. */
const MAX_NUMBERED = 999;

/**
 * A complete, checked body in memory: written to a new temporary file (made only now) in one
 * write, fsynced, closed and placed; the temporary file is removed on any failure.
 */
export async function commitWhole(tmp: string, chunks: readonly Buffer[], size: number, sha256: string, contentType: string | null, name: string, opts: DownloadOptions): Promise<DownloadResult> {
  const fd = openSync(tmp, 'wx', 0o644); // on failure nothing was created: nothing to remove
  let tmpGone = false;
  try {
    await fillSyncClose(fd, chunks);
    // Stryker disable next-line ConditionalExpression,EqualityOperator,BooleanLiteral: whether the folder is fsynced now or by the caller changes durability after a power loss only, which no test can observe.
    const placed = await place(tmp, opts.dir, name, size, sha256, opts.deferDirSync === true);
    tmpGone = !placed.reused;
    return { ...placed, size, sha256, contentType };
  } finally {
    // Stryker disable next-line ConditionalExpression: removing a temporary file already linked and unlinked is a no-op (removeQuietly ignores a missing file).
    if (!tmpGone) removeQuietly(tmp);
  }
}

/**
 * Puts the finished temporary file under `name`, or under `name (n).ext`
 * when `name` holds different content; reuses a candidate that already holds
 * the same content. Never replaces an existing file.
 */
export async function place(tmp: string, dir: string, name: string, size: number, sha256: string, deferDirSync: boolean): Promise<Pick<DownloadResult, 'path' | 'name' | 'reused' | 'renamed'>> {
  for (let n = 1; n <= MAX_NUMBERED; n++) {
    const candidate = n === 1 ? name : numberedName(name, n);
    const path = safeJoin(dir, candidate);
    // The link is tried first (the usual case: a free name); a taken name is then compared.
    if (linkNoReplace(tmp, path)) {
      // Stryker disable next-line ConditionalExpression,BooleanLiteral: durability after a power loss only, which no test can observe.
      if (!deferDirSync) await fsyncDir(dir);
      return { path, name: candidate, reused: false, renamed: n > 1 };
    }
    // Stryker disable next-line ObjectLiteral,BooleanLiteral: the link just failed with EEXIST, so the name exists unless another process removed it in between.
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
 * `link` is the system's (a test passes one that fails as a filesystem without hard links does).
 */
export function linkNoReplace(tmp: string, path: string, link: (from: string, to: string) => void = linkSync): boolean {
  // Stryker disable next-line BlockStatement: without the link the existence check and rename below place the file the same way; only a concurrent writer between them tells the two apart.
  try {
    link(tmp, path);
    unlinkSync(tmp);
    return true;
    // Stryker disable next-line BlockStatement: a swallowed EEXIST reaches the existence check below, which answers "taken" the same way.
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
