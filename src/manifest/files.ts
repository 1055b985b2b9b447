import { open, stat } from 'node:fs/promises';

/**
 * Checks of local image files named in a manifest: the file exists and its
 * first bytes say JPEG, PNG, GIF or WebP (the upload endpoints' formats).
 * Results are cached per absolute path, so 100,000 jobs sharing one reference
 * image read it once.
 */

const IMAGE_TYPES = new Map([
  ['image/jpeg', 'jpeg'],
  ['image/png', 'png'],
  ['image/gif', 'gif'],
  ['image/webp', 'webp'],
]);

/** What the bytes of a local image say. */
export interface ImageCheck {
  /** Null when the file exists and is a JPEG/PNG/GIF/WebP image; else the rule it breaks, without the file's name ("is empty"). */
  problem: string | null;
  /** `jpeg`, `png`, `gif` or `webp` (from the bytes), or null. */
  format: string | null;
  /** Size in bytes (0 when the file is missing). */
  bytes: number;
}

/** Bytes read from the start of a file to detect its type. */
const HEAD_BYTES = 4100;

export class FileChecks {
  private readonly cache = new Map<string, Promise<ImageCheck>>();

  /** The check of `file` (absolute): its problem, or its format and size. */
  checkImage(file: string): Promise<ImageCheck> {
    let hit = this.cache.get(file);
    if (!hit) {
      hit = checkImageFile(file);
      this.cache.set(file, hit);
    }
    return hit;
  }
}

async function checkImageFile(file: string): Promise<ImageCheck> {
  let bytes: number;
  try {
    const st = await stat(file);
    if (!st.isFile()) return { problem: 'is not a regular file', format: null, bytes: 0 };
    if (st.size === 0) return { problem: 'is empty', format: null, bytes: 0 };
    bytes = st.size;
  } catch {
    return { problem: 'does not exist', format: null, bytes: 0 };
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
  // Loaded on first use (~60 ms of start-up otherwise, for manifests without local images).
  const { fileTypeFromBuffer } = await import('file-type');
  const type = await fileTypeFromBuffer(head);
  const format = type ? IMAGE_TYPES.get(type.mime) : undefined;
  if (format) return { problem: null, format, bytes };
  const seen = type ? `${type.mime}` : 'an unknown type';
  return { problem: `is not a JPEG, PNG, GIF or WebP image (its bytes say ${seen})`, format: null, bytes };
}
