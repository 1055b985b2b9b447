/**
 * A folder as a handle, in the spirit of Go's os.Root: every open, write, rename, removal and listing is
 * named relative to the root, and nothing may lead outside it: not `..`, not an absolute name, not a
 * symbolic link at any level. Node has no openat(2), so each operation, at the moment it runs,
 * - checks the name's text (relative, `/`-separated, no empty, `.` or `..` part, no backslash or NUL),
 * - lstats every folder on the way (a symbolic link or a file there is refused, never followed),
 * - compares the realpath of the final folder with the root's realpath (taken when the root is opened),
 * - opens the last component with O_NOFOLLOW (reads: and fstat says it is a regular file; new files:
 *   O_CREAT|O_EXCL, which never writes through an existing name).
 * The cost is a few lstats and one realpath per operation, never per byte. A refusal is an
 * UnsafePathError (exit 74) naming the path and why; callers that go on with the rest (export) catch it.
 *
 * The output folder (run: downloads, placing, previous-<n>/, reports; view: listings and served files) and
 * an export folder go through this module; nothing else in src/ resolves, lstats or realpaths them.
 */
import { createHash } from 'node:crypto';
import {
  closeSync,
  constants,
  createReadStream,
  fstatSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmdirSync,
  unlinkSync,
  type Dirent,
  type ReadStream,
  type Stats,
} from 'node:fs';
import { basename, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { UnsafePathError } from '../errors.js';

/** O_NOFOLLOW where the platform has it (not on Windows: there the lstat walk is the only check). */
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const READ = constants.O_RDONLY | NOFOLLOW;
const CREATE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NOFOLLOW;

/** True when `child` is `parent` or below it, by their text (both absolute). */
export function within(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}

/** The realpath of `path`, or of its nearest existing ancestor with the rest appended (a folder to be made). */
export function realpathOrAncestor(path: string): string {
  let cur = resolve(path);
  const rest: string[] = [];
  for (;;) {
    try {
      return join(realpathSync.native(cur), ...rest.reverse());
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw err;
      const up = resolve(cur, '..');
      // Stryker disable next-line ConditionalExpression: the filesystem's root always resolves, so the walk stops there first (kept for a root that cannot be read).
      if (up === cur) return resolve(path);
      rest.push(basename(cur));
      cur = up;
    }
  }
}

/** Why `name` is not a plain relative name (text only), or null. */
export function nameProblem(name: string): string | null {
  if (name === '') return 'is an empty name';
  if (name.includes('\0')) return 'holds a NUL character';
  if (name.includes('\\')) return 'holds a backslash';
  if (isAbsolute(name)) return 'is an absolute name';
  for (const p of name.split('/')) {
    if (p === '' || p === '.') return 'has an empty or "." part';
    if (p === '..') return 'has a ".." part';
  }
  return null;
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    // Stryker disable next-line all: a folder on the way replaced by a file after the walk checked it (a race with another process): as missing.
    if (code === 'ENOTDIR') return null;
    throw err;
  }
}

/** True when the names `a` and `b` (relative, `/`-separated) are in the same folder by their text. */
function sameFolder(a: string, b: string): boolean {
  const i = a.lastIndexOf('/');
  return i === b.lastIndexOf('/') && a.slice(0, i + 1) === b.slice(0, i + 1);
}

export class Root {
  /** The root with its symbolic links resolved, as it was when opened. */
  readonly real: string;
  /** The root as given, absolute. */
  readonly dir: string;

  private constructor(dir: string, real: string, private readonly flag: string) {
    this.dir = dir;
    this.real = real;
  }

  /**
   * The folder `dir` as a root; made (with its parents) when `create` and missing. The root itself may be reached
   * through links. `flag`: the option that chose the folder, named in a refusal (default `--out`).
   */
  static open(dir: string, o: { create?: boolean; flag?: string } = {}): Root {
    const abs = resolve(dir);
    const flag = o.flag ?? '--out';
    if (o.create) mkdirSync(abs, { recursive: true });
    const real = realpathSync.native(abs);
    if (!lstatSync(real).isDirectory()) throw new UnsafePathError(abs, 'is not a folder', flag);
    return new Root(abs, real, flag);
  }

  /** The absolute path of `name` under the root (its text checked; nothing on disk looked at). */
  path(name: string): string {
    const why = nameProblem(name);
    if (why !== null) throw new UnsafePathError(join(this.dir, name.replace(/\0/g, '\\0')), why, this.flag);
    return join(this.dir, name);
  }

  /** The name of `abs` relative to the root, or null when its text is not under it. */
  nameOf(abs: string): string | null {
    const rel = relative(this.dir, resolve(abs));
    if (rel === '' || !within(this.dir, resolve(abs))) return null;
    return rel.split(sep).join('/');
  }

  /**
   * Every folder of `parts` (joined under the root) is a real folder, none a link; made when `create` and
   * missing. Returns the folder's path, or null when one is missing (and not `create`). Then the folder's
   * realpath must still be inside the root's.
   */
  private folder(parts: readonly string[], create: boolean, made?: { made: boolean }): string | null {
    let cur = this.dir;
    for (const p of parts) {
      cur = join(cur, p);
      let st = lstatOrNull(cur);
      if (st === null) {
        if (!create) return null;
        // recursive: a folder another process made since the lstat is no error (it is checked below like any).
        // Stryker disable next-line ObjectLiteral,BooleanLiteral: the parent exists, so the two differ only in that race.
        mkdirSync(cur, { recursive: true });
        if (made) made.made = true;
        st = lstatSync(cur);
      }
      if (st.isSymbolicLink()) throw new UnsafePathError(cur, 'is a symbolic link', this.flag);
      if (!st.isDirectory()) throw new UnsafePathError(cur, 'is not a folder', this.flag);
    }
    const real = realpathSync.native(cur);
    if (!within(this.real, real)) throw new UnsafePathError(cur, `resolves to ${real}, outside ${this.real}`, this.flag);
    return cur;
  }

  /** The checked parent folder of `name` and its path; the parent is null when missing (unless `create`). */
  private parent(name: string, create: boolean): { dir: string | null; path: string } {
    const path = this.path(name);
    const parts = name.split('/');
    return { dir: this.folder(parts.slice(0, -1), create), path };
  }

  /** The folder `name` ('' for the root), made when missing, checked all the way; returns its path. */
  mkdirs(name: string): string {
    return this.mkdirsMade(name).path;
  }

  /** As mkdirs, and whether this call made a folder on the way (then the last one was empty when made). */
  mkdirsMade(name: string): { path: string; made: boolean } {
    const made = { made: false };
    const path = this.folder(name === '' ? [] : (this.path(name), name.split('/')), true, made)!;
    return { path, made: made.made };
  }

  /** The folder `name` ('' for the root) checked, or null when missing. Throws when a link or a file is on the way. */
  checkDir(name: string): string | null {
    return this.folder(name === '' ? [] : (this.path(name), name.split('/')), false);
  }

  /** lstat of `name` (its folders checked), or null when it or a folder on the way is missing. */
  lstat(name: string): Stats | null {
    // A folder missing on the way leaves the name missing: lstat says ENOENT.
    return lstatOrNull(this.parent(name, false).path);
  }

  /** A regular file opened for reading (O_NOFOLLOW: a link there fails), or null when missing. Throws for a link or another kind. */
  openRead(name: string): { fd: number; size: number } | null {
    const { path } = this.parent(name, false);
    let fd: number;
    try {
      fd = openSync(path, READ);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return null;
      if (code === 'ELOOP') throw new UnsafePathError(path, 'is a symbolic link', this.flag);
      // Stryker disable next-line all: FreeBSD's answer to O_NOFOLLOW on a link (Linux answers ELOOP).
      if (code === 'EMLINK') throw new UnsafePathError(path, 'is a symbolic link', this.flag);
      throw err;
    }
    const st = fstatSync(fd);
    if (!st.isFile()) {
      closeSync(fd);
      throw new UnsafePathError(path, 'is not a regular file', this.flag);
    }
    return { fd, size: st.size };
  }

  /** A read stream of the regular file `name` (opened now, as openRead), or null when missing. */
  readStream(name: string): { stream: ReadStream; size: number } | null {
    const got = this.openRead(name);
    if (got === null) return null;
    // Stryker disable next-line StringLiteral: given an fd, createReadStream ignores the path.
    return { stream: createReadStream('', { fd: got.fd }), size: got.size };
  }

  /** Size and sha256 of the regular file `name`, or null when missing. */
  async hash(name: string): Promise<{ size: number; sha256: string } | null> {
    const got = this.readStream(name);
    if (got === null) return null;
    const h = createHash('sha256');
    let size = 0;
    for await (const chunk of got.stream) {
      size += (chunk as Buffer).length;
      h.update(chunk as Buffer);
    }
    return { size, sha256: h.digest('hex') };
  }

  /** A new file `name` (never an existing one, never through a link), its folders made; returns the fd and path. */
  createNew(name: string, mode = 0o644): { fd: number; path: string } {
    const { path } = this.parent(name, true);
    return { fd: openSync(path, CREATE, mode), path };
  }

  /** A hard link `name` to the file `from` (an absolute path another Root checked); link(2) never follows `from` if it is a link. */
  link(from: string, name: string): string {
    const { path } = this.parent(name, true);
    linkSync(from, path);
    return path;
  }

  /** `from` renamed to `to`, both under the root (their folders checked; `to`'s made). */
  rename(from: string, to: string): void {
    const a = this.parent(from, false);
    if (a.dir === null) throw Object.assign(new Error(`ENOENT: ${a.path}`), { code: 'ENOENT' });
    // Both in one folder (a temporary file renamed into place): the check just made is that folder's.
    const target = sameFolder(from, to) ? this.path(to) : this.parent(to, true).path;
    renameSync(a.path, target);
  }

  /** Removes the file (or link) `name`, never a folder; false when it was not there. */
  remove(name: string): boolean {
    const { path } = this.parent(name, false);
    const st = lstatOrNull(path);
    if (st === null) return false;
    if (st.isDirectory()) throw new UnsafePathError(path, 'is a folder', this.flag);
    unlinkSync(path);
    return true;
  }

  /** Removes the empty folder `name` (never a link, never the root); false when it was not there. Throws when it is not empty. */
  removeDir(name: string): boolean {
    if (name === '') throw new UnsafePathError(this.dir, 'is the root itself', this.flag);
    const dir = this.checkDir(name);
    if (dir === null) return false;
    rmdirSync(dir);
    return true;
  }

  /** The entries of the folder `name` ('' for the root), or null when it is missing. */
  list(name: string): Dirent[] | null {
    const dir = this.checkDir(name);
    if (dir === null) return null;
    return readdirSync(dir, { withFileTypes: true });
  }
}
