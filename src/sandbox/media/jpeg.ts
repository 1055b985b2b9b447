import jpegJs from 'jpeg-js';
import { checkDimensions, paint } from './pattern.js';

/**
 * A valid baseline JPEG (JFIF, SOF0, 3 YCbCr components without chroma
 * subsampling) encoded by jpeg-js at quality 75 from the seeded
 * gradient of pattern.ts. jpeg-js is pure JavaScript: a 4K image takes about
 * a second, so callers that need many large images should cache by (w, h, seed).
 */
export function jpeg(width: number, height: number, seed: number | string, quality = 75): Buffer {
  checkDimensions(width, height);
  const data = paint(width, height, seed, 4, 0);
  return jpegJs.encode({ width, height, data }, quality).data;
}
