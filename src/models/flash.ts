import * as z from 'zod';
import { oneOf, schemaOf } from './common.js';
import { IMAGE_SECONDS, SANDBOX_IMAGE_CREDITS, imageList, requiredPrompt } from './image-common.js';
import type { ModelSpec } from './types.js';

/** vendora/dream-v5.0-flash: text-to-image (documented) and its edit sibling (fields not shown). */

const SIZES = ['1:1', '4:3', '3:4', '16:9', '9:16', '2:3', '3:2', '21:9'] as const;
const RESOLUTIONS = ['1K', '1.5K', '2K'] as const;

const textToImageInput = () =>
  z.strictObject(
  {
    prompt: requiredPrompt(5000),
    size: oneOf(SIZES, 'size').default('1:1').describe('Aspect ratio; default 1:1'),
    resolution: oneOf(RESOLUTIONS, 'resolution').default('1K').describe('Default 1K; billed the same at every resolution'),
    output_format: oneOf(['jpeg', 'png'] as const, 'output_format').optional().describe('When omitted, the model chooses'),
    enable_safety_checker: z.boolean({ error: 'must be a boolean' }).default(true),
  },
  { error: (iss) => (iss.code === 'unrecognized_keys' ? `unknown field(s) ${iss.keys.join(', ')} (this model accepts no additional fields)` : undefined) },
);

export const flashTextToImage: ModelSpec = {
  id: 'vendora/dream-v5.0-flash/text-to-image',
  family: 'dream-v5.0-flash',
  kind: 'image',
  summary: 'Text-to-image, one image per request, billed per image at the same rate across resolutions',
  get input() {
    return schemaOf(this, textToImageInput);
  },
  strictRoot: true,
  workflows: ['text-to-image'],
  workflow: () => 'text-to-image',
  priceBasis: 'unknown: billed per output image at one rate across resolutions, but the service gives no number; a user-supplied price is per image',
  price: () => ({ credits: null, basis: 'billed per output image at the same rate across resolutions; the service gives no number (one image per request)' }),
  imageFields: [],
  urlOnlyFields: [],
  typicalSeconds: IMAGE_SECONDS,
  resultEndpoint: 'status',
  outputCount: () => 1,
  sandboxCredits: SANDBOX_IMAGE_CREDITS,
};

export const flashEdit: ModelSpec = {
  id: 'vendora/dream-v5.0-flash/edit',
  family: 'dream-v5.0-flash',
  kind: 'image',
  summary: 'Edit with reference images (input fields not documented by the service)',
  get input() {
    return schemaOf(this, () => z.looseObject({ prompt: requiredPrompt(5000), image_urls: imageList() }));
  },
  workflows: ['edit'],
  workflow: () => 'edit',
  priceBasis: 'unknown: the service gives no price; a user-supplied price is per image',
  price: () => ({ credits: null, basis: 'the service gives no price for vendora/dream-v5.0-flash/edit (one image per request)' }),
  imageFields: ['image_urls[]'],
  urlOnlyFields: [],
  typicalSeconds: IMAGE_SECONDS,
  resultEndpoint: 'status',
  outputCount: () => 1,
  sandboxCredits: SANDBOX_IMAGE_CREDITS,
  choices: [
    'input fields not shown: prompt required (up to 5000, as its sibling), image_urls required (the model takes reference images, no count limit), other fields passed through',
    'one image per request assumed, as its text-to-image sibling',
  ],
};

export const specs = [flashTextToImage, flashEdit];
