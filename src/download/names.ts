import { isAbsolute, relative, resolve, sep } from 'node:path';
import { UnsafeResultError } from '../errors.js';

/**
 * Longest file name we produce, in UTF-8 bytes. Filesystems allow 255; the
 * margin leaves room for ` (NNN)` on a name collision and for the temporary
 * name `.<name>.<12 hex>.part` used while downloading.
 */
export const MAX_NAME_BYTES = 180;

/** Extensions kept as such: 1-10 ASCII letters or digits after the last dot. */
const SANE_EXT = /\.[A-Za-z0-9]{1,10}$/;
/** Windows device names, refused on any platform so an output folder can be copied anywhere. */
const RESERVED = /^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?$/i;

/** Names clean() leaves unchanged for sure (see sanitizeName's fast path). */
// Stryker disable next-line Regex: a fast path only; a name it lets through to clean() comes out the same.
const PLAIN_NAME = /^[A-Za-z0-9_()-](?:[A-Za-z0-9._()-]*[A-Za-z0-9_()-])?$/;

function clean(raw: string): string {
  // Keep only the last path segment: "../../etc/passwd" -> "passwd", "a\\b" -> "b".
  // Stryker disable next-line Regex: splitting at each separator instead of each run of them only adds empty segments, which the filter drops.
  const segments = raw.normalize('NFC').split(/[/\\]+/).filter((s) => s.length > 0);
  let name = segments.at(-1) ?? '';
  name = name
    .replace(/[\p{Cc}\p{Cf}\u2028\u2029]/gu, '') // NUL, control, bidi overrides and other invisible format chars
    .replace(/[<>:"|?*]/g, '_') // characters Windows refuses
    .replace(/\s+/g, ' ')
    .replace(/^[\s.]+/, '') // leading dots would hide the file; leading spaces confuse
    .replace(/[\s.]+$/, ''); // trailing dots and spaces are dropped by Windows
  if (RESERVED.test(name)) name = `_${name}`;
  return truncate(name, MAX_NAME_BYTES);
}

/** Cuts a name to at most `max` UTF-8 bytes on a code point boundary, keeping a sane extension. */
function truncate(name: string, max: number): string {
  if (Buffer.byteLength(name) <= max) return name;
  const ext = SANE_EXT.exec(name)?.[0] ?? '';
  // Stryker disable next-line MethodExpression: the name is longer than max, so the loop stops inside the stem either way and keeps the same prefix.
  const stem = ext ? name.slice(0, -ext.length) : name;
  let out = '';
  let bytes = Buffer.byteLength(ext);
  for (const ch of stem) {
    const b = Buffer.byteLength(ch);
    if (bytes + b > max) break;
    out += ch;
    bytes += b;
  }
  return out.replace(/[\s.]+$/, '') + ext;
}

/**
 * A safe file name from a server-supplied name: the last path segment only,
 * no control or format characters, no characters Windows refuses, no leading
 * dots, at most MAX_NAME_BYTES bytes with its extension kept. When nothing
 * usable is left, the (equally cleaned) `fallback` is used; when that is
 * unusable too, throws UnsafeResultError. Idempotent: a cleaned name is unchanged.
 */
export function sanitizeName(serverName: string | null | undefined, fallback: string): string {
  // Fast path: a name that clean() would return unchanged (plain ASCII letters, digits, `._()-`,
  // no leading or trailing dot, short enough, not a device name) is returned as is.
  // Stryker disable next-line ConditionalExpression,EqualityOperator: a fast path only; clean() returns such a name unchanged.
  if (serverName != null && serverName.length <= MAX_NAME_BYTES && PLAIN_NAME.test(serverName) && !RESERVED.test(serverName)) return serverName;
  const name = serverName == null ? '' : clean(serverName);
  if (name) return name;
  const fb = clean(fallback);
  if (!fb) throw new UnsafeResultError(`file name: neither the server name nor the fallback "${fallback}" gives a usable name`);
  return fb;
}

/** A part that safeJoin's fast path leaves to the full check: separators (either kind) or NUL. */
// Stryker disable next-line Regex: a fast path only; the full check below refuses what it lets through.
const PLAIN_UNSAFE = /[/\\\0]/;

/**
 * Joins `parts` under `outDir` and returns the absolute path, throwing
 * UnsafeResultError when a part holds NUL or the result is not strictly
 * inside `outDir` (".." escapes, absolute parts, the folder itself).
 * It checks, it does not clean: pass server names through sanitizeName first.
 */
export function safeJoin(outDir: string, ...parts: string[]): string {
  // Stryker disable next-line all: a fast path only; resolve() gives the same path for such a part, and the full check refuses the rest.
  if (parts.length === 1 && sep === '/') {
    // Fast path for the usual call, one plain name (no separator, NUL, "." or ".."): it cannot
    // leave the folder, and resolve() would only append it to the normalised folder.
    const p = parts[0]!;
    // Stryker disable next-line ConditionalExpression,BlockStatement: the same fast path (see above).
    if (p !== '' && p !== '.' && p !== '..' && !PLAIN_UNSAFE.test(p)) {
      const root = resolve(outDir);
      return root === '/' ? `/${p}` : `${root}/${p}`;
    }
  }
  if (parts.some((p) => p.includes('\0'))) throw new UnsafeResultError('file path: contains a NUL character');
  const root = resolve(outDir);
  const full = resolve(root, ...parts);
  const rel = relative(root, full);
  if (rel === '' || rel === '..' || rel.startsWith('../') || rel.startsWith('..\\') || isAbsolute(rel)) {
    throw new UnsafeResultError(`file path: "${parts.join('/')}" resolves outside the output folder`);
  }
  return full;
}

/**
 * The name `name (n).ext` used when `name` is taken by a different file
 * (n >= 2). The extension is the sane one of `name`, if any.
 */
export function numberedName(name: string, n: number): string {
  const ext = SANE_EXT.exec(name)?.[0] ?? '';
  const stem = ext ? name.slice(0, -ext.length) : name;
  return `${stem} (${n})${ext}`;
}

/** The decoded last path segment of a URL, or null (for a File object with no `file_name`). */
export function nameFromUrl(url: string): string | null {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    return null;
  }
  const last = path.split('/').filter(Boolean).at(-1);
  if (!last) return null;
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}
