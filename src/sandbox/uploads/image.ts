import { fileTypeFromBuffer } from 'file-type';
import { badFile } from './refused.js';

/**
 * The image types uploads accept, detected from the bytes (file-type), with a
 * light structural check so that truncated or corrupted files are refused:
 * PNG ends with its IEND chunk, JPEG ends with the EOI marker, GIF ends with
 * its trailer byte, WebP's RIFF size fits the data.
 */

export interface ImageType {
  /** File extension: jpg, png, gif, webp. */
  ext: 'jpg' | 'png' | 'gif' | 'webp';
  mime: 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp';
}

const ACCEPTED: Readonly<Record<string, ImageType>> = {
  'image/jpeg': { ext: 'jpg', mime: 'image/jpeg' },
  'image/png': { ext: 'png', mime: 'image/png' },
  'image/gif': { ext: 'gif', mime: 'image/gif' },
  'image/webp': { ext: 'webp', mime: 'image/webp' },
};

function intact(t: ImageType, b: Buffer): boolean {
  switch (t.ext) {
    case 'png':
      return b.length >= 57 && b.toString('latin1', 12, 16) === 'IHDR' && b.toString('latin1', b.length - 8, b.length - 4) === 'IEND';
    case 'jpg': {
      let end = b.length;
      while (end > 2 && b[end - 1] === 0) end--; // tolerate zero padding after EOI
      return b.length > 4 && b[end - 2] === 0xff && b[end - 1] === 0xd9;
    }
    case 'gif':
      return b.length >= 14 && b[b.length - 1] === 0x3b;
    case 'webp':
      return b.length >= 20 && b.readUInt32LE(4) + 8 <= b.length && /^VP8[ LX]$/.test(b.toString('latin1', 12, 16));
  }
}

/** The image type of `bytes`, or throws file_format_error naming `field` (empty, unsupported, corrupted). */
export async function detectImage(bytes: Buffer, field: string): Promise<ImageType> {
  if (bytes.length === 0) throw badFile(`${field}: the file is empty`);
  const found = await fileTypeFromBuffer(bytes);
  const t = found ? ACCEPTED[found.mime] : undefined;
  if (!found) throw badFile(`${field}: not a recognisable image; only JPEG, PNG, GIF and WebP are accepted`);
  if (!t) throw badFile(`${field}: unsupported file type ${found.mime} (.${found.ext}); only JPEG, PNG, GIF and WebP are accepted`);
  if (!intact(t, bytes)) throw badFile(`${field}: the ${t.ext.toUpperCase()} data is truncated or corrupted`);
  return t;
}
