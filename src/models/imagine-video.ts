import * as z from 'zod';
import { fieldIssue, imageRef, intOneOf, oneOf, promptText, schemaOf } from './common.js';
import type { ModelSpec } from './types.js';

/**
 * imagine-video: text-to-video and image-to-video; styles fun, normal, spicy;
 * aspect ratios 1:1, 2:3, 3:2; 6 or 10 seconds. Parameter names beyond these
 * are not shown, so the schema is open and checks the chosen names when present.
 */

const input = () =>
  z
  .looseObject({
    prompt: promptText().optional().describe('Required for text-to-video; optional with an image'),
    image_urls: z
      .array(imageRef, { error: 'must be an array with one image URL' })
      .length(1, { error: 'must hold exactly one image URL' })
      .optional()
      .describe('Image-to-video: one image (field name chosen, as imagine-image names it)'),
    aspect_ratio: oneOf(['1:1', '2:3', '3:2'] as const, 'aspect_ratio').optional(),
    duration: intOneOf([6, 10]).optional().describe('Seconds: 6 or 10'),
    mode: oneOf(['fun', 'normal', 'spicy'] as const, 'mode').optional().describe('Generation style (parameter name chosen; not shown)'),
  })
  .superRefine((v, ctx) => {
    if (v.prompt === undefined && v.image_urls === undefined) {
      fieldIssue(ctx, 'prompt', 'is required for text-to-video (give a prompt, or image_urls for image-to-video)');
    }
  });

export const imagineVideo: ModelSpec = {
  id: 'imagine-video',
  family: 'imagine-video',
  kind: 'video',
  summary: 'Text- or image-to-video, styles fun/normal/spicy, 1:1, 2:3 or 3:2, 6 or 10 s',
  get input() {
    return schemaOf(this, input);
  },
  workflows: ['text-to-video', 'image-to-video'],
  workflow: (i) => (i.image_urls !== undefined ? 'image-to-video' : 'text-to-video'),
  priceBasis: 'unknown: the service gives no price; a user-supplied price is per request',
  price: () => ({ credits: null, basis: 'the service gives no price for imagine-video' }),
  imageFields: ['image_urls[]'],
  urlOnlyFields: [],
  typicalSeconds: [90, 300],
  resultEndpoint: 'status',
  outputCount: () => 1,
  sandboxCredits: 40,
  // Sandbox: 6 or 10 s only, so an omitted duration gets the shorter (not the generic 5 s).
  videoSeconds: (i) => (typeof i.duration === 'number' ? i.duration : 6),
  choices: [
    'style parameter name not shown: called mode (fun, normal, spicy)',
    'image parameter name not shown: image_urls with exactly one URL, as imagine-image',
    'the other field names (prompt, aspect_ratio, duration) follow the generic video request; the schema is open and other fields pass through',
    'prompt required for text-to-video, optional for image-to-video; no defaults filled in (not shown)',
  ],
};

export const specs: ModelSpec[] = [imagineVideo];
