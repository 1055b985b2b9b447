import * as z from 'zod';
import { oneOf, schemaOf } from './common.js';
import { IMAGE_SECONDS, SANDBOX_IMAGE_CREDITS, TEXT_OR_IMAGE, UNPRICED_IMAGE_BASIS, imageList, requiredPrompt, textOrImage, unpriced } from './image-common.js';
import type { ModelSpec } from './types.js';

/**
 * imagine-image: one model id for text-to-image and image-to-image. The
 * workflow is image-to-image when `image_urls` (exactly one URL) is present.
 */

const SIZES = ['2:3', '3:2', '1:1', '9:16', '16:9'] as const;

export const imagineImage: ModelSpec = {
  id: 'imagine-image',
  family: 'imagine-image',
  kind: 'image',
  summary: 'Text-to-image, or image-to-image with exactly one image URL',
  get input() {
    return schemaOf(this, () =>
      z.strictObject({
        prompt: requiredPrompt(),
        size: oneOf(SIZES, 'size').optional().describe(`Aspect ratio, optional: ${SIZES.join(', ')}`),
        image_urls: imageList({ min: 1, max: 1, formats: ['jpeg', 'png', 'webp'] }).optional().describe('Image-to-image: exactly one JPEG, PNG or WebP URL of at most 10.0 MB'),
      }),
    );
  },
  workflows: TEXT_OR_IMAGE,
  workflow: textOrImage,
  priceBasis: UNPRICED_IMAGE_BASIS,
  price: () => unpriced('imagine-image', 1),
  imageFields: ['image_urls[]'],
  urlOnlyFields: [],
  imageFormats: ['jpeg', 'png', 'webp'],
  // "10.0 MB" read as 10,000,000 bytes (the smaller reading: a file the service might refuse is caught here).
  imageMaxBytes: 10_000_000,
  typicalSeconds: IMAGE_SECONDS,
  resultEndpoint: 'status',
  outputCount: () => 1,
  sandboxCredits: SANDBOX_IMAGE_CREDITS,
  choices: [
    'one model id for both workflows: image_urls present (exactly one URL) means image-to-image, absent means text-to-image',
    'prompt required in both workflows, no length limit (not documented by the service)',
    'input image format: a URL or path whose name shows a format other than JPEG, PNG or WebP is rejected; the 10.0 MB limit and unnamed formats are left to the service',
    'fields beyond prompt, size and image_urls are rejected',
  ],
};

export const specs = [imagineImage];
