import * as z from 'zod';
import { imageRef } from './common.js';
import type { PriceQuote } from './types.js';

/**
 * Shared pieces of the image families (alpha-image-2, dream-4, dream-5.0-lite,
 * kontext, imagine-image, other-image, flash). Messages are plain words naming
 * the rule; the path (input.<field>) names the field.
 */

/** Typical image generation time from the contract (15 to 60 seconds). */
export const IMAGE_SECONDS: [number, number] = [15, 60];

/** Sandbox-only price per image for image models the contract does not price. */
export const SANDBOX_IMAGE_CREDITS = 4;

/**
 * A required prompt: "is required" when missing, at most `max` characters when
 * the contract gives a limit, and at least one non-whitespace character.
 */
export function requiredPrompt(max?: number) {
  const base = z
    .string({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a string') })
    .min(1, { error: 'must not be empty', abort: true });
  const limited = max === undefined ? base : base.max(max, { error: `must be at most ${max} characters` });
  return limited
    .refine((s) => s.trim().length > 0, { error: 'must contain at least one non-whitespace character' })
    .describe(max === undefined ? 'Prompt (length limit not documented by the service)' : `Prompt, 1 to ${max} characters`);
}

/**
 * A list of image references (URLs, or local paths in a manifest) with count
 * limits. Missing gives "is required" when the list is required.
 */
export function imageList(limits: { min?: number; max?: number; formats?: readonly ImageFormat[] } = {}) {
  const min = limits.min ?? 1;
  const item = limits.formats === undefined ? imageRef : imageRef.superRefine(formatCheck(limits.formats));
  let list = z
    .array(item, { error: (iss) => (iss.input === undefined ? 'is required' : 'must be an array of image URLs') })
    .min(min, { error: min === 1 ? 'must have at least one image URL' : `must have at least ${min} image URLs` });
  if (limits.max !== undefined) {
    list = list.max(limits.max, { error: `must have at most ${limits.max} image URL${limits.max === 1 ? '' : 's'}` });
  }
  const range = limits.max === undefined ? `at least ${min}` : min === limits.max ? `exactly ${min}` : `${min} to ${limits.max}`;
  return list.describe(`Reference images (${range}): URLs, or local image paths that genbatch uploads`);
}

export type ImageFormat = 'jpeg' | 'png' | 'webp' | 'gif';

const FORMAT_NAMES: Record<string, string> = { jpeg: 'JPEG', png: 'PNG', webp: 'WebP', gif: 'GIF', bmp: 'BMP', tiff: 'TIFF', heic: 'HEIC', avif: 'AVIF', svg: 'SVG' };
const EXTENSIONS: Record<string, string> = { jpg: 'jpeg', jpeg: 'jpeg', png: 'png', webp: 'webp', gif: 'gif', bmp: 'bmp', tif: 'tiff', tiff: 'tiff', heic: 'heic', heif: 'heic', avif: 'avif', svg: 'svg' };

/**
 * The image format a reference names, from a data: URL's MIME type or the
 * extension of its path (query and fragment ignored); null when it names none.
 */
export function namedFormat(ref: string): string | null {
  const data = /^data:image\/([a-z0-9.+-]+)[;,]/i.exec(ref);
  const ext = data ? data[1] : /\.([a-z0-9]+)$/i.exec(pathOf(ref))?.[1];
  if (ext === undefined) return null;
  const key = ext.toLowerCase().replace(/\+xml$/, '');
  return EXTENSIONS[key] ?? null;
}

/** The path part of a reference: a URL's pathname, or a local path without query or fragment. */
function pathOf(ref: string): string {
  if (/^https?:\/\//i.test(ref)) {
    try {
      return new URL(ref).pathname;
    } catch {
      return '';
    }
  }
  return ref.replace(/[?#].*$/, '');
}

/** Rejects a reference whose name shows a format outside `formats`; a reference with no telling name passes. */
function formatCheck(formats: readonly ImageFormat[]) {
  const names = formats.map((f) => FORMAT_NAMES[f] ?? f);
  const allowed = names.length > 1 ? `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}` : names.join('');
  return (ref: string, ctx: z.RefinementCtx) => {
    const format = namedFormat(ref);
    if (format !== null && !(formats as readonly string[]).includes(format)) {
      ctx.addIssue({ code: 'custom', message: `is a ${FORMAT_NAMES[format] ?? format} image by its name; this model takes ${allowed} only` });
    }
  };
}

/** A field this model refuses, with the reason (instead of a generic "unknown field"). */
export function refused(message: string) {
  return z.never({ error: message }).optional().describe(`Not accepted: ${message}`);
}

/** Number of images a request asks for: `n` when it is a positive integer, else 1. */
export function imageCount(input: Record<string, unknown>): number {
  const n = input.n;
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 ? n : 1;
}

/**
 * The quote for a model the contract does not price: credits null (never 0,
 * never another model's price). The basis says that billing is per image, so a
 * per-image price (for example one the user supplies) multiplies by the count.
 */
export function unpriced(model: string, count: number): PriceQuote {
  const per = count === 1 ? 'one image' : `n = ${count} images`;
  return { credits: null, basis: `the service gives no price for ${model}; a per-image price applies to ${per} (multiply by ${count})` };
}

/** priceBasis of an image model the contract does not price. */
export const UNPRICED_IMAGE_BASIS = 'unknown: the service gives no price; a user-supplied price is per image, times the image count';

/** Workflows of a model with optional reference images (textOrImage). */
export const TEXT_OR_IMAGE: readonly string[] = ['text-to-image', 'image-to-image'];

/** Total credits for a per-image price (a user-supplied price, say) and the spec's output count. */
export function perImageTotal(perImageCredits: number, count: number): number {
  return perImageCredits * count;
}

/** Workflow of a model with optional reference images. */
export function textOrImage(input: Record<string, unknown>): 'text-to-image' | 'image-to-image' {
  return Array.isArray(input.image_urls) && input.image_urls.length > 0 ? 'image-to-image' : 'text-to-image';
}
