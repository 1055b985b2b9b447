import * as z from 'zod';
import { fieldIssue, httpsImageRef, intRange, oneOf, prompt, schemaOf } from './common.js';
import type { ModelSpec } from './types.js';

/**
 * The Grok-style video 1.5 model. Its identifier is not shown by the contract:
 * it is catalogued here as `imagine-video-1.5` (next to `imagine-video`).
 * Modes, from the fields present:
 *   reference_image_urls (1 to 7) -> reference-to-video (480p, 720p; default 8 s)
 *   image_urls (exactly 1)        -> image-to-video (no aspect_ratio; default 6 s)
 *   neither                       -> text-to-video (default 6 s)
 * Price: 14.5 / 25 / 45 credits per second (480p / 720p / 1080p) x duration, plus 2 per image.
 */

export const VIDEO_15_ID = 'imagine-video-1.5';

export type Video15Mode = 'text-to-video' | 'image-to-video' | 'reference-to-video';

const RESOLUTIONS = ['480p', '720p', '1080p'] as const;
const ASPECT_RATIOS = ['16:9', '4:3', '3:2', '1:1', '2:3', '3:4', '9:16'] as const;
const RATE: Record<(typeof RESOLUTIONS)[number], number> = { '480p': 14.5, '720p': 25, '1080p': 45 };
const IMAGE_CREDITS = 2;

export function video15Mode(input: Record<string, unknown>): Video15Mode {
  if (input.reference_image_urls !== undefined) return 'reference-to-video';
  if (input.image_urls !== undefined) return 'image-to-video';
  return 'text-to-video';
}

/** The duration the service uses: the given one, else 8 s for reference mode and 6 s otherwise. */
export function video15Duration(input: Record<string, unknown>): number {
  if (typeof input.duration === 'number') return input.duration;
  return video15Mode(input) === 'reference-to-video' ? 8 : 6;
}

const input = () =>
  z
  .strictObject({
    prompt: prompt(4096),
    duration: intRange(1, 15).optional().describe('Seconds 1 to 15; default 6 (text, image) or 8 (reference)'),
    resolution: oneOf(RESOLUTIONS, 'resolution').default('720p').describe('480p, 720p, 1080p; default 720p; reference mode: 480p or 720p'),
    aspect_ratio: oneOf(ASPECT_RATIOS, 'aspect_ratio').optional().describe('Text and reference modes only; default 16:9'),
    image_urls: z
      .array(httpsImageRef, { error: 'must be an array with one image URL' })
      .length(1, { error: 'must hold exactly one image URL (the first frame)' })
      .optional()
      .describe('Image-to-video: exactly one public HTTPS image'),
    reference_image_urls: z
      .array(httpsImageRef, { error: 'must be an array of image URLs' })
      .min(1, { error: 'must hold at least 1 image' })
      .max(7, { error: 'must hold at most 7 images' })
      .optional()
      .describe('Reference-to-video: 1 to 7 public HTTPS images, referenced in the prompt by numbered tags'),
  })
  .superRefine((v, ctx) => {
    if (v.image_urls !== undefined && v.reference_image_urls !== undefined) {
      fieldIssue(ctx, 'reference_image_urls', 'cannot be used together with image_urls (use one or the other)');
      return;
    }
    const mode = video15Mode(v);
    if (mode === 'image-to-video' && v.aspect_ratio !== undefined) {
      fieldIssue(ctx, 'aspect_ratio', 'is not available for image-to-video (the first frame sets it); use it for text or reference modes');
    }
    if (mode === 'reference-to-video' && v.resolution === '1080p') {
      fieldIssue(ctx, 'resolution', 'reference-to-video supports 480p and 720p only');
    }
  });

export const video15: ModelSpec = {
  id: VIDEO_15_ID,
  family: 'video-1.5',
  kind: 'video',
  summary: 'Grok-style video 1.5: text-, image- or reference-to-video, 1 to 15 s, 480p/720p/1080p, priced per second',
  get input() {
    return schemaOf(this, input);
  },
  workflows: ['text-to-video', 'image-to-video', 'reference-to-video'] satisfies Video15Mode[],
  workflow: video15Mode,
  priceBasis: `per second by resolution (480p ${RATE['480p']}, 720p ${RATE['720p']}, 1080p ${RATE['1080p']}) x duration (default 6 s, 8 s for reference) + ${IMAGE_CREDITS} per input or reference image (service price)`,
  price: (i) => {
    const resolution = typeof i.resolution === 'string' && i.resolution in RATE ? (i.resolution as keyof typeof RATE) : '720p';
    const seconds = video15Duration(i);
    const images = (Array.isArray(i.image_urls) ? i.image_urls.length : 0) + (Array.isArray(i.reference_image_urls) ? i.reference_image_urls.length : 0);
    const credits = RATE[resolution] * seconds + IMAGE_CREDITS * images;
    const imagePart = images > 0 ? ` + ${images} image(s) x ${IMAGE_CREDITS}` : '';
    return { credits, basis: `${resolution}: ${RATE[resolution]} credits per second x ${seconds} s${imagePart}` };
  },
  imageFields: ['image_urls[]', 'reference_image_urls[]'],
  urlOnlyFields: [],
  typicalSeconds: [90, 300],
  resultEndpoint: 'status',
  outputCount: () => 1,
  // The sandbox's video is as long as what is billed: 6 s by default, 8 s in reference mode.
  videoSeconds: video15Duration,
  choices: [
    'model identifier not shown: catalogued as imagine-video-1.5',
    'duration and aspect_ratio defaults depend on the mode: not filled into the input; price uses 6 s (8 s in reference mode) when duration is omitted',
    'image URLs must be public HTTPS: http:// and data: URLs are rejected (except http on a loopback host, for the local sandbox); local paths pass (genbatch uploads them)',
    'the numbered prompt tags for reference images are not checked',
  ],
};

export const specs: ModelSpec[] = [video15];
