import * as z from 'zod';
import { intRange, oneOf, schemaOf } from './common.js';
import { IMAGE_SECONDS, SANDBOX_IMAGE_CREDITS, TEXT_OR_IMAGE, UNPRICED_IMAGE_BASIS, imageCount, imageList, requiredPrompt, textOrImage, unpriced } from './image-common.js';
import type { ModelSpec } from './types.js';

/**
 * dream-4 (text-to-image, optional reference images) and dream-4-edit
 * (reference images required). Up to 15 images per request; reference
 * images plus n must not exceed 15.
 */

const SIZES = ['1:1', '3:4', '4:3', '16:9', '9:16', '3:2', '2:3', '21:9'] as const;
const RESOLUTIONS = ['1K', '2K', '4K'] as const;
const MAX_TOTAL = 15;

function checkTotal(input: { n?: number | undefined; image_urls?: string[] | undefined }, ctx: z.RefinementCtx): void {
  const refs = input.image_urls?.length ?? 0;
  const n = input.n ?? 1;
  // An n out of range has its own issue; the sum is checked for a valid n only.
  if (Number.isInteger(n) && n >= 1 && n <= MAX_TOTAL && refs + n > MAX_TOTAL) {
    const nText = input.n === undefined ? 'n (omitted, so 1)' : `n (${n})`;
    ctx.addIssue({
      code: 'custom',
      path: ['image_urls'],
      message: `image_urls count (${refs}) plus ${nText} is ${refs + n}, over the limit of ${MAX_TOTAL}`,
    });
  }
}

function inputSchema(edit: boolean) {
  return z
    .strictObject({
      prompt: requiredPrompt(),
      size: oneOf(SIZES, 'size').optional().describe(`Aspect ratio: ${SIZES.join(', ')}`),
      resolution: oneOf(RESOLUTIONS, 'resolution').default('2K').describe('1K, 2K or 4K; default 2K'),
      n: intRange(1, MAX_TOTAL).optional().describe('Images to generate, 1 to 15 (1 when omitted)'),
      image_urls: edit ? imageList() : imageList().optional(),
    })
    .superRefine(checkTotal);
}

const CHOICES = [
  'prompt required, no length limit (the service lists no prompt rule for dream-4)',
  'n omitted counts as 1 image, also in the image_urls plus n limit of 15',
  'size has no default (the service gives none); the service chooses',
  'fields beyond prompt, size, resolution, n and image_urls are rejected',
];

function spec(id: string, edit: boolean): ModelSpec {
  return {
    id,
    family: 'dream-4',
    kind: 'image',
    summary: edit ? 'Edit with reference images (required), 1 to 15 images per request' : 'Text-to-image with optional reference images, 1 to 15 images per request',
    get input() {
      return schemaOf(this, () => inputSchema(edit));
    },
    workflows: edit ? ['edit'] : TEXT_OR_IMAGE,
    workflow: edit ? () => 'edit' : textOrImage,
    priceBasis: UNPRICED_IMAGE_BASIS,
    price: (input) => unpriced(id, imageCount(input)),
    imageFields: ['image_urls[]'],
    urlOnlyFields: [],
    typicalSeconds: IMAGE_SECONDS,
    resultEndpoint: 'status',
    outputCount: imageCount,
    sandboxCredits: SANDBOX_IMAGE_CREDITS,
    choices: CHOICES,
  };
}

export const specs = [spec('dream-4', false), spec('dream-4-edit', true)];
