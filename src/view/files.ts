import { createReadStream } from 'node:fs';
import { lstat, realpath } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { extname, join, relative, resolve, sep } from 'node:path';

/**
 * GET /files/<path>: a file of the output folder, and nothing else. The path's segments are URL-decoded
 * one by one; an empty, `.` or `..` segment, a backslash or a NUL is refused; the file must be a regular
 * file (lstat) whose real path (symlinks resolved) is inside the output folder's real path, so a symlink
 * leading out of the folder is refused. The state file (and its -wal, -shm) is not served.
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

export async function sendFile(res: ServerResponse, path: string): Promise<void> {
  const st = await lstat(path);
  res.writeHead(200, {
    'content-type': contentTypeOf(path),
    'content-length': st.size,
    'cache-control': 'no-cache',
  });
  await new Promise<void>((done) => {
    const stream = createReadStream(path);
    stream.on('error', () => {
      res.destroy();
      done();
    });
    stream.on('end', () => done());
    stream.pipe(res);
  });
}
