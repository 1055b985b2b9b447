import type { ReadStream } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { extname } from 'node:path';
import { UnsafePathError } from '../errors.js';
import type { Root } from '../lib/root.js';

/**
 * GET /files/<path>: a file of the output folder, and nothing else. The path's segments are URL-decoded
 * one by one; an empty, `.` or `..` segment, a backslash or a NUL is refused; the file is read through the
 * output folder's Root (no symbolic link at any level, a regular file inside the folder's real path).
 * The state file (and its -wal, -shm) is not served.
 */
const TYPES: Record<string, string> = {
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.webp': 'image/webp', '.gif': 'image/gif', '.avif': 'image/avif', '.bmp': 'image/bmp',
  '.mp3': 'audio/mpeg', '.wav': 'audio/wav', '.ogg': 'audio/ogg', '.m4a': 'audio/mp4', '.aac': 'audio/aac', '.flac': 'audio/flac', '.opus': 'audio/ogg',
  '.mp4': 'video/mp4', '.webm': 'video/webm', '.mov': 'video/quicktime', '.m4v': 'video/mp4',
  '.json': 'application/json', '.txt': 'text/plain; charset=utf-8', '.lrc': 'text/plain; charset=utf-8', '.md': 'text/plain; charset=utf-8', '.csv': 'text/plain; charset=utf-8',
};

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

/** The content type a file is served with, by its name's extension (never text/html: the view's origin runs scripts). */
export function contentTypeOf(name: string): string {
  return TYPES[extname(name).toLowerCase()] ?? 'application/octet-stream';
}

/**
 * The file of the output folder named by the URL path after /files/, opened for reading through the output
 * folder's Root (src/lib/root.ts: no link at any level, the folder's realpath inside the root's, the file itself
 * opened O_NOFOLLOW and a regular file), or null when it may not be served.
 */
export function servedFile(root: Root, urlPath: string): { stream: ReadStream; size: number; name: string } | null {
  const segments = pathSegments(urlPath);
  if (segments === null) return null;
  try {
    const got = root.readStream(segments.join('/'));
    return got === null ? null : { ...got, name: segments.at(-1)! };
  } catch (err) {
    if (err instanceof UnsafePathError) return null;
    throw err;
  }
}

export async function sendFile(res: ServerResponse, file: { stream: ReadStream; size: number; name: string }, headOnly = false): Promise<void> {
  res.writeHead(200, {
    'content-type': contentTypeOf(file.name),
    'content-length': file.size,
    'cache-control': 'no-cache',
  });
  if (headOnly) {
    file.stream.destroy();
    return void res.end();
  }
  await new Promise<void>((done) => {
    const stream = file.stream;
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
