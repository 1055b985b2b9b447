import { randomBytes } from 'node:crypto';
import { mkdir, open, rename } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** Write a small file atomically: temp file in the same folder, fsync (off the main thread), rename. */
export async function writeFileAtomic(path: string, data: string): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  // Same temporary name pattern as the downloader, so cleanupPartials removes leftovers of both.
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.part`);
  const fh = await open(tmp, 'w');
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
}
