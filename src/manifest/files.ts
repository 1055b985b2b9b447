import { open, stat } from 'node:fs/promises';
import { fileTypeFromBuffer } from 'file-type';

/**
 * Checks of local image files named in a manifest: the file exists and its
 * first bytes say JPEG, PNG, GIF or WebP (the upload endpoints' formats).
 * Results are cached per absolute path, so 100,000 jobs sharing one reference
 * image read it once.
 */

const IMAGE_TYPES = new Map([
  ['image/jpeg', 'JPEG'],
  ['image/png', 'PNG'],
  ['image/gif', 'GIF'],
  ['image/webp', 'WebP'],
]);

/** Bytes read from the start of a file to detect its type. */
const HEAD_BYTES = 4100;

export class FileChecks {
  private readonly cache = new Map<string, Promise<string | null>>();

  /** Null when `file` (absolute) is a JPEG/PNG/GIF/WebP image; else the rule it breaks. */
  checkImage(file: string): Promise<string | null> {
    let hit = this.cache.get(file);
    if (!hit) {
      hit = checkImageFile(file);
      this.cache.set(file, hit);
    }
    return hit;
  }
}

async function checkImageFile(file: string): Promise<string | null> {
  try {
    const st = await stat(file);
    if (!st.isFile()) return `local file ${file} is not a regular file`;
    if (st.size === 0) return `local file ${file} is empty`;
  } catch {
    return `local file ${file} does not exist`;
  }
  let head: Uint8Array;
  const fh = await open(file, 'r');
  try {
    const buf = Buffer.alloc(HEAD_BYTES);
    const { bytesRead } = await fh.read(buf, 0, HEAD_BYTES, 0);
    head = buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
  const type = await fileTypeFromBuffer(head);
  if (type && IMAGE_TYPES.has(type.mime)) return null;
  const seen = type ? `${type.mime}` : 'an unknown type';
  return `local file ${file} is not a JPEG, PNG, GIF or WebP image (its bytes say ${seen})`;
}
