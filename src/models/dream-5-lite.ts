import * as z from 'zod';
import { intRange, schemaOf } from './common.js';
import { IMAGE_SECONDS, SANDBOX_IMAGE_CREDITS, TEXT_OR_IMAGE, UNPRICED_IMAGE_BASIS, imageCount, imageList, requiredPrompt, textOrImage, unpriced } from './image-common.js';
import type { ModelSpec } from './types.js';

/**
 * dream-5.0-lite (text-to-image, optional references) and dream-5.0-lite-edit
 * (1 to 10 references required). `size` takes four forms: a resolution preset,
 * a ratio preset, a custom `<W>x<H>` string, or an object {width, height}.
 */

/** Resolution presets. The contract shows "such as 2K, 3K"; 1K and 4K are our choice. */
export const RESOLUTION_PRESETS = ['1K', '2K', '3K', '4K'] as const;
export const RATIO_PRESETS = ['1:1', '4:3', '3:4', '16:9', '9:16', '3:2', '2:3', '21:9'] as const;
const PRESETS: readonly string[] = [...RESOLUTION_PRESETS, ...RATIO_PRESETS];

const sizeString = z.string().superRefine((value, ctx) => {
  if (PRESETS.includes(value) || /^[1-9]\d*x[1-9]\d*$/.test(value)) return;
  ctx.addIssue({
    code: 'custom',
    message: `size ${JSON.stringify(value)} is not a resolution preset (${RESOLUTION_PRESETS.join(', ')}), a ratio preset (${RATIO_PRESETS.join(', ')}), or a custom <W>x<H> such as 2048x1536`,
  });
});

const side = z
  .number({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a number') })
  .int({ error: 'must be an integer' })
  .min(1, { error: 'must be at least 1' });

const sizeObject = z.strictObject({ width: side, height: side });

const size = z
  .union([sizeString, sizeObject], {
    error: (iss) => {
      if (iss.code !== 'invalid_union') return undefined;
      const input = iss.input;
      const branch = typeof input === 'string' ? 0 : input !== null && typeof input === 'object' && !Array.isArray(input) ? 1 : -1;
      const inner = branch >= 0 ? iss.errors[branch] : undefined;
      if (!inner || inner.length === 0) return 'must be a preset string, a custom <W>x<H> string, or an object {width, height}';
      return inner.map((e) => (e.path.length > 0 ? `${e.path.join('.')} ${e.message}` : e.message)).join('; ');
    },
  })
  .describe('Resolution preset (1K, 2K, 3K, 4K), ratio preset, custom <W>x<H> string, or {width, height} object');

function inputSchema(edit: boolean) {
  return z.strictObject({
    prompt: requiredPrompt(2000),
    n: intRange(1, 15).optional().describe('Images to generate, 1 to 15 (1 when omitted)'),
    image_urls: edit ? imageList({ min: 1, max: 10, formats: ['jpeg', 'png'] }) : imageList({ min: 1, max: 10 }).optional(),
    size: size.optional(),
  });
}

const CHOICES = [
  'size resolution presets: 1K, 2K, 3K, 4K (the service says "such as 2K, 3K")',
  'custom sizes (string or object) need positive integer sides; the alpha-image-2 pixel limits are not applied',
  'n omitted counts as 1 image; size has no default (the service chooses)',
  'edit references must be JPEG or PNG: a URL or path whose name shows another format is rejected; names that show no format are left to the service',
  'fields beyond prompt, n, image_urls and size are rejected',
];

function spec(id: string, edit: boolean): ModelSpec {
  return {
    id,
    family: 'dream-5.0-lite',
    kind: 'image',
    summary: edit ? 'Edit with 1 to 10 reference images, 1 to 15 images per request' : 'Text-to-image with up to 10 optional references, 1 to 15 images per request',
    get input() {
      return schemaOf(this, () => inputSchema(edit));
    },
    workflows: edit ? ['edit'] : TEXT_OR_IMAGE,
    workflow: edit ? () => 'edit' : textOrImage,
    priceBasis: UNPRICED_IMAGE_BASIS,
    price: (input) => unpriced(id, imageCount(input)),
    imageFields: ['image_urls[]'],
    urlOnlyFields: [],
    ...(edit ? { imageFormats: ['jpeg', 'png'] } : {}),
    typicalSeconds: IMAGE_SECONDS,
    resultEndpoint: 'status',
    outputCount: imageCount,
    sandboxCredits: SANDBOX_IMAGE_CREDITS,
    choices: CHOICES,
  };
}

export const specs = [spec('dream-5.0-lite', false), spec('dream-5.0-lite-edit', true)];
