import { schemaOf } from './common.js';
import * as z from 'zod';
import { IMAGE_SECONDS, SANDBOX_IMAGE_CREDITS, TEXT_OR_IMAGE, UNPRICED_IMAGE_BASIS, imageCount, imageList, refused, requiredPrompt, textOrImage, unpriced } from './image-common.js';
import type { ModelSpec } from './types.js';

/**
 * The "other image models" catalogue. Their input fields are not shown, so each
 * input is an open object that requires a prompt; reference limits stated by
 * the catalogue are enforced on `image_urls`, and edit models require it.
 */

type Mode = 'text' | 'both' | 'edit';

interface Entry {
  id: string;
  mode: Mode;
  /** Most reference images, where the catalogue states it. */
  maxRefs?: number;
  summary: string;
}

const CATALOGUE: Entry[] = [
  { id: 'frame-2-pro', mode: 'text', summary: 'Text-to-image' },
  { id: 'frame-2-flex', mode: 'text', summary: 'Text-to-image' },
  { id: 'frame-2-pro-edit', mode: 'edit', maxRefs: 8, summary: 'Edit with up to 8 reference images' },
  { id: 'frame-2-flex-edit', mode: 'edit', maxRefs: 8, summary: 'Edit with up to 8 reference images' },
  { id: 'alpha-image-4o', mode: 'both', summary: 'Text-to-image and image-to-image' },
  { id: 'alpha-image-4o-edit', mode: 'edit', summary: 'Edit with mask support' },
  { id: 'alpha-image-1.5', mode: 'both', summary: 'Text-to-image and image-to-image' },
  { id: 'alpha-image-1.5-edit', mode: 'edit', summary: 'Edit with mask support' },
  { id: 'fast-image', mode: 'both', summary: 'Text-to-image and image-to-image' },
  { id: 'fast-image-2', mode: 'both', summary: 'Text-to-image and image-to-image' },
  { id: 'fast-image-2-new', mode: 'both', maxRefs: 14, summary: 'Text-to-image and image-to-image, up to 14 reference images, 2K and 4K' },
  { id: 'fast-image-edit', mode: 'edit', summary: 'Edit' },
  { id: 'fast-image-2-edit', mode: 'edit', summary: 'Edit' },
  { id: 'fast-image-2-new-edit', mode: 'edit', maxRefs: 14, summary: 'Edit, up to 14 reference images' },
  { id: 'dream-4.5', mode: 'both', summary: 'Text-to-image and image-to-image' },
  { id: 'dream-4.5-edit', mode: 'edit', maxRefs: 10, summary: 'Edit with up to 10 reference images' },
  { id: 'zed-image', mode: 'text', summary: 'Text-to-image with flexible aspect ratios' },
];

/** Reference image limits by id (the catalogue's "up to 8, 14, 10"). */
export const REFERENCE_LIMITS: Readonly<Record<string, number>> = Object.fromEntries(
  CATALOGUE.flatMap((e) => (e.maxRefs === undefined ? [] : [[e.id, e.maxRefs] as const])),
);

const count = z
  .number({ error: 'must be a number' })
  .int({ error: 'must be an integer' })
  .min(1, { error: 'must be at least 1' })
  .describe('Images to generate (shown in the alpha-image-4o quick start)');

function inputSchema(entry: Entry) {
  const refs = imageList({ min: 1, ...(entry.maxRefs === undefined ? {} : { max: entry.maxRefs }) });
  const image_urls =
    entry.mode === 'edit'
      ? refs
      : entry.mode === 'both'
        ? refs.optional()
        : refused(`is not accepted by ${entry.id}, a text-to-image model`);
  return z.looseObject({ prompt: requiredPrompt(), image_urls, n: count.optional() });
}

const CHOICES = [
  'input fields not shown: open object, prompt required (no length limit), other fields passed through unchecked',
  'reference images go in image_urls (the name used by the documented image models); each listed URL is uploaded when local',
  'n, when given, must be a positive integer and sets the image count; n omitted counts as 1',
  'text-to-image-only models refuse image_urls; edit models require at least one',
  'fast-image-2-new-edit takes the 14-reference limit of fast-image-2-new; other limits only where the catalogue states them',
  'mask field name of the -edit models with mask support is not shown: passed through unchecked and not uploaded',
  'fast-image-2-new supports 2K and 4K, but the field carrying it is not shown: not checked',
];

function spec(entry: Entry): ModelSpec {
  return {
    id: entry.id,
    family: 'other-image',
    kind: 'image',
    summary: entry.summary,
    get input() {
      return schemaOf(this, () => inputSchema(entry));
    },
    workflows: entry.mode === 'edit' ? ['edit'] : entry.mode === 'text' ? ['text-to-image'] : TEXT_OR_IMAGE,
    workflow: entry.mode === 'edit' ? () => 'edit' : entry.mode === 'text' ? () => 'text-to-image' : textOrImage,
    priceBasis: UNPRICED_IMAGE_BASIS,
    price: (input) => unpriced(entry.id, imageCount(input)),
    imageFields: entry.mode === 'text' ? [] : ['image_urls[]'],
    urlOnlyFields: [],
    typicalSeconds: IMAGE_SECONDS,
    resultEndpoint: 'status',
    outputCount: imageCount,
    sandboxCredits: SANDBOX_IMAGE_CREDITS,
    choices: CHOICES,
  };
}

export const specs = CATALOGUE.map(spec);
