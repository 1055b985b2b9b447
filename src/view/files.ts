import { closeSync, createReadStream, readSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { UnsafePathError } from '../errors.js';
import type { Root } from '../lib/root.js';
import { SNIFF_BYTES, inertHeaders, inertType } from '../storage/inert.js';

/**
 * GET /files/<path>: a file of the output folder, and nothing else. The path's segments are URL-decoded
 * one by one; an empty, `.` or `..` segment, a backslash or a NUL is refused; the file is read through the
 * output folder's Root (no symbolic link at any level, a regular file inside the folder's real path).
 * The state file (and its -wal, -shm) is not served.
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

/**
 * The file of the output folder named by the URL path after /files/, opened for reading through the output
 * folder's Root (src/lib/root.ts: no link at any level, the folder's realpath inside the root's, the file itself
 * opened O_NOFOLLOW and a regular file), or null when it may not be served. The caller sends it (sendFile).
 */
export function servedFile(root: Root, urlPath: string): { fd: number; size: number; name: string } | null {
  const segments = pathSegments(urlPath);
  if (segments === null) return null;
  try {
    const got = root.openRead(segments.join('/'));
    return got === null ? null : { ...got, name: segments.at(-1)! };
  } catch (err) {
    if (err instanceof UnsafePathError) return null;
    throw err;
  }
}

/**
 * Sends the file's bytes with inert headers: its type read from its first bytes, through the descriptor the
 * bytes are then streamed from (the descriptor is closed in every case).
 */
export async function sendFile(res: ServerResponse, file: { fd: number; size: number; name: string }, headOnly = false): Promise<void> {
  let headers: Record<string, string>;
  try {
    const head = Buffer.alloc(Math.min(SNIFF_BYTES, file.size));
    readSync(file.fd, head, 0, head.length, 0);
    headers = inertHeaders(await inertType(head));
  } catch (err) {
    closeSync(file.fd);
    throw err;
  }
  res.writeHead(200, { ...headers, 'content-length': file.size, 'cache-control': 'no-cache' });
  if (headOnly) {
    closeSync(file.fd);
    return void res.end();
  }
  await new Promise<void>((done) => {
    const stream = createReadStream('', { fd: file.fd, start: 0 });
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
