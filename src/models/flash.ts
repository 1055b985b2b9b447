import { z } from 'zod';
import { oneOf, prompt } from './common.js';
import type { ModelSpec } from './types.js';

/** vendora/dream-v5.0-flash: text-to-image (documented) and its edit sibling (fields not shown). */

const SIZES = ['1:1', '4:3', '3:4', '16:9', '9:16', '2:3', '3:2', '21:9'] as const;
const RESOLUTIONS = ['1K', '1.5K', '2K'] as const;

const textToImageInput = z.strictObject(
  {
    prompt: prompt(5000),
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
  input: textToImageInput,
  strictRoot: true,
  workflow: () => 'text-to-image',
  price: () => ({ credits: null, basis: 'per-image price not given by the contract' }),
  imageFields: [],
  urlOnlyFields: [],
  typicalSeconds: [15, 60],
  resultEndpoint: 'status',
  outputCount: () => 1,
  sandboxCredits: 4,
};

export const flashEdit: ModelSpec = {
  id: 'vendora/dream-v5.0-flash/edit',
  family: 'dream-v5.0-flash',
  kind: 'image',
  summary: 'Edit with reference images (input fields not shown by the contract)',
  input: z.looseObject({ prompt: prompt(5000), image_urls: z.array(z.string()).min(1).optional() }),
  workflow: () => 'edit',
  price: () => ({ credits: null, basis: 'price not given by the contract' }),
  imageFields: ['image_urls[]'],
  urlOnlyFields: [],
  typicalSeconds: [15, 60],
  resultEndpoint: 'status',
  outputCount: () => 1,
  sandboxCredits: 4,
  choices: ['input fields not shown: prompt required (up to 5000, as its sibling), image_urls optional, other fields passed through'],
};

export const specs = [flashTextToImage, flashEdit];
