/**
 * Pure, deterministic generators of real result files for the sandbox.
 * Each returns a Buffer; the same arguments always give the same bytes.
 */
export { png, crc32 } from './png.js';
export { jpeg } from './jpeg.js';
export { wav, mp3, MP3 } from './audio.js';
export { mp4, MP4_FPS } from './mp4.js';
export { glb } from './glb.js';
export { lrc, type AlignedWord } from './text.js';
export { seedToInt } from './pattern.js';

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  png: 'image/png',
  jpeg: 'image/jpeg',
  jpg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  mp4: 'video/mp4',
  glb: 'model/gltf-binary',
  gltf: 'model/gltf+json',
  lrc: 'text/plain; charset=utf-8',
  txt: 'text/plain; charset=utf-8',
  json: 'application/json',
};

/** MIME type for a file format/extension (case-insensitive, leading dot allowed); unknown: application/octet-stream. */
export function contentTypeOf(format: string): string {
  return CONTENT_TYPES[format.toLowerCase().replace(/^\./, '')] ?? 'application/octet-stream';
}
