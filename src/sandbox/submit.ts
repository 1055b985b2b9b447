import type { ModelKind, ModelSpec } from '../models/index.js';
import { joinPath } from '../models/index.js';

/**
 * Submit-time checks beyond the catalogue's schema, and the sandbox price.
 */

/** Sandbox-only price per output when the catalogue has neither a price nor sandboxCredits. Never used by the runner's estimate. */
export const SANDBOX_DEFAULT_CREDITS: Readonly<Record<ModelKind, number>> = {
  image: 4,
  video: 30,
  music: 12,
  audio: 6,
  lyrics: 2,
  chat: 1,
};

/**
 * Credits charged at submission: spec.price(input).credits (the whole submission)
 * when known; else spec.sandboxCredits, else the sandbox default, per output x outputs asked.
 */
export function priceOf(spec: ModelSpec, input: Record<string, unknown>, asked: number): number {
  const q = spec.price(input).credits;
  if (q !== null && Number.isFinite(q) && q >= 0) return q;
  return (spec.sandboxCredits ?? SANDBOX_DEFAULT_CREDITS[spec.kind]) * asked;
}

/** Outputs a submission asks for (n images, music variations); 1 when the catalogue does not say. */
export function outputsAsked(spec: ModelSpec, input: Record<string, unknown>): number {
  const n = spec.outputCount?.(input);
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 ? n : 1;
}

/** Every value at a catalogue path like `image_urls[]` or `start_image_url`, with its concrete path. */
function valuesAt(input: Record<string, unknown>, path: string): Array<{ path: string; value: unknown }> {
  let cur: Array<{ parts: Array<string | number>; value: unknown }> = [{ parts: [], value: input }];
  for (const seg of path.split('.')) {
    const isArray = seg.endsWith('[]');
    const name = isArray ? seg.slice(0, -2) : seg;
    const next: typeof cur = [];
    for (const c of cur) {
      if (typeof c.value !== 'object' || c.value === null || Array.isArray(c.value)) continue;
      const v = (c.value as Record<string, unknown>)[name];
      if (v === undefined || v === null) continue;
      if (isArray) {
        if (Array.isArray(v)) v.forEach((item, i) => next.push({ parts: [...c.parts, name, i], value: item }));
      } else next.push({ parts: [...c.parts, name], value: v });
    }
    cur = next;
  }
  return cur.map((c) => ({ path: joinPath('input', c.parts), value: c.value }));
}

const IMAGE_MIME = /^image\/(jpeg|jpg|png|gif|webp)$/i;
const NOT_IMAGE_EXT = /\.(mp4|mov|webm|mp3|wav|flac|ogg|m4a|pdf|txt|json|zip|html?)$/i;

/**
 * The first image field whose value is not usable as an image, as `path: rule`, or null.
 * Accepted: an http(s) URL (not ending in a known non-image extension) or a
 * data URL of type image/jpeg, png, gif or webp. Local paths are refused: the
 * runner uploads them first.
 */
export function fileFormatProblem(spec: ModelSpec, input: Record<string, unknown>): string | null {
  for (const field of spec.imageFields) {
    for (const { path, value } of valuesAt(input, field)) {
      if (typeof value !== 'string') continue;
      const data = /^data:([^;,]*)(;base64)?,/i.exec(value);
      if (data) {
        if (!IMAGE_MIME.test(data[1] ?? '')) return `${path}: data URL of type "${data[1] || 'none'}" is not a JPEG, PNG, GIF or WebP image`;
        continue;
      }
      if (!/^https?:\/\//i.test(value)) return `${path}: must be an http(s) URL or an image data URL (local paths must be uploaded first)`;
      let pathname = '';
      try {
        pathname = new URL(value).pathname;
      } catch {
        return `${path}: is not a valid URL`;
      }
      if (NOT_IMAGE_EXT.test(pathname)) return `${path}: points to a file that is not an image (JPEG, PNG, GIF or WebP)`;
    }
  }
  return null;
}

/** Build a matcher for banned words (case-insensitive, whole words). */
export function bannedMatcher(words: string[]): RegExp | null {
  if (words.length === 0) return null;
  const alt = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
  return new RegExp(`(^|[^\\p{L}\\p{N}])(${alt})(?=$|[^\\p{L}\\p{N}])`, 'iu');
}

/** Path of the first string in `input` containing a banned word, or null. */
export function moderationHit(input: unknown, re: RegExp | null, path = 'input'): string | null {
  if (!re) return null;
  if (typeof input === 'string') return re.test(input) ? path : null;
  if (Array.isArray(input)) {
    for (let i = 0; i < input.length; i++) {
      const hit = moderationHit(input[i], re, `${path}[${i}]`);
      if (hit) return hit;
    }
    return null;
  }
  if (typeof input === 'object' && input !== null) {
    for (const [k, v] of Object.entries(input)) {
      const hit = moderationHit(v, re, `${path}.${k}`);
      if (hit) return hit;
    }
  }
  return null;
}
