import { lstat, open, realpath } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { join, relative, resolve, sep } from 'node:path';
import { SNIFF_BYTES, inertHeaders, inertType } from '../storage/inert.js';

/**
 * GET /files/<path>: a file of the output folder, and nothing else. The path's segments are URL-decoded
 * one by one; an empty, `.` or `..` segment, a backslash or a NUL is refused; the file must be a regular
 * file (lstat) whose real path (symlinks resolved) is inside the output folder's real path, so a symlink
 * leading out of the folder is refused. The state file (and its -wal, -shm) is not served.
 * A file is served with the type its bytes show, as a bucket stores it (src/storage/inert.ts): media as
 * such, anything else (HTML, SVG, text, ...) as application/octet-stream with Content-Disposition attachment.
 */

/**
 * The segments of a /files/ URL path, each URL-decoded, or null when one is empty, `.` or `..`, holds a
 * slash, a backslash or a NUL, or when it names a state file (`*.db`, `-wal`, `-shm`, `-journal`).
 */
export function pathSegments(urlPath: string): string[] | null {
  let segments: string[];
  try {
    segments = urlPath.split('/').map((s) => decodeURIComponent(s));
  } catch {
    return null;
  }
  if (segments.some((s) => s === '' || s === '.' || s === '..' || s.includes('/') || s.includes('\\') || s.includes('\0'))) return null;
  if (/\.db(-wal|-shm|-journal)?$/i.test(segments.at(-1)!)) return null;
  return segments;
}

/** The absolute path of a file under `outDir` named by the URL path after /files/, or null when it may not be served. */
export async function servedFile(outDir: string, urlPath: string): Promise<string | null> {
  const segments = pathSegments(urlPath);
  if (segments === null) return null;
  const root = resolve(outDir);
  const path = join(root, ...segments);
  if (relative(root, path).startsWith('..')) return null;
  try {
    const [st, real, realRoot] = await Promise.all([lstat(path), realpath(path), realpath(root)]);
    if (!st.isFile()) return null;
    if (!real.startsWith(realRoot + sep)) return null;
    return real;
  } catch {
    return null;
  }
}

/** Sends the file's bytes with inert headers: its type read from its first bytes, through the handle the bytes are read from. */
export async function sendFile(res: ServerResponse, path: string): Promise<void> {
  const file = await open(path, 'r');
  try {
    const size = (await file.stat()).size;
    const head = Buffer.alloc(Math.min(SNIFF_BYTES, size));
    await file.read(head, 0, head.length, 0);
    res.writeHead(200, { ...inertHeaders(await inertType(head)), 'content-length': size, 'cache-control': 'no-cache' });
  } catch (err) {
    await file.close();
    throw err;
  }
  await new Promise<void>((done) => {
    const stream = file.createReadStream({ start: 0 });
    stream.on('error', () => {
      res.destroy();
      done();
    });
    stream.on('end', () => done());
    res.on('close', () => {
      stream.destroy();
      done();
    });
    stream.pipe(res);
  });
}
