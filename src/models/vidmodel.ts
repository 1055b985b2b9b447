import * as z from 'zod';
import { intOneOf, oneOf, promptText, schemaOf } from './common.js';
import type { ModelSpec } from './types.js';

/** vidmodel2.5-text-to-video: text-to-video; fields documented, required fields and defaults not shown. */

const ASPECT_RATIOS = ['832*480', '480*832', '1280*720', '720*1280', '1920*1080', '1080*1920'] as const;

const input = () =>
  z.strictObject({
  prompt: promptText(),
  aspect_ratio: oneOf(ASPECT_RATIOS, 'aspect_ratio').optional().describe('WIDTH*HEIGHT; default not shown (the service chooses)'),
  duration: intOneOf([5, 10]).optional().describe('Seconds: 5 or 10; default not shown'),
  seed: z.number({ error: 'must be a number' }).int({ error: 'must be an integer' }).optional(),
  negative_prompt: z.string({ error: 'must be a string' }).optional(),
  audio: z
    .string({
      error: (iss) =>
        typeof iss.input === 'boolean'
          ? 'must be a string, never a boolean (this model rejects audio: true/false)'
          : 'must be a string',
    })
    .optional()
    .describe('Audio setting as a string (never a boolean)'),
});

export const vidmodelTextToVideo: ModelSpec = {
  id: 'vidmodel2.5-text-to-video',
  family: 'vidmodel2.5',
  kind: 'video',
  summary: 'Text-to-video, 5 or 10 s, six WIDTH*HEIGHT aspect ratios, optional audio string',
  get input() {
    return schemaOf(this, input);
  },
  workflows: ['text-to-video'],
  workflow: () => 'text-to-video',
  priceBasis: 'unknown: the service gives no price; a user-supplied price is per request',
  price: () => ({ credits: null, basis: 'the service gives no price for vidmodel2.5-text-to-video' }),
  imageFields: [],
  urlOnlyFields: [],
  typicalSeconds: [90, 300],
  resultEndpoint: 'status',
  outputCount: () => 1,
  sandboxCredits: 40,
  choices: [
    'required fields not shown: prompt is required (non-empty, no length limit shown); every other field is optional',
    'defaults not shown: no defaults are filled in; omitted fields are left to the service',
    'seed range not shown: any integer',
    'unknown fields are rejected (the fields are documented in a table)',
    'meaning of the audio string not shown: any string is accepted (not treated as a URL)',
  ],
};

export const specs: ModelSpec[] = [vidmodelTextToVideo];
