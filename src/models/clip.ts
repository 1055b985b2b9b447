import * as z from 'zod';
import { fieldIssue, imageRef, intOneOf, oneOf, ratioString, promptText, schemaOf, unsupported } from './common.js';
import type { ModelSpec } from './types.js';

/**
 * The clip video family: clip-2.3 (fields documented), clip-02 and clip-02-pro
 * (capabilities documented, parameter names not shown) and clipgen-2 (the
 * contract's generic video request example).
 */

const VIDEO = {
  kind: 'video',
  urlOnlyFields: [],
  typicalSeconds: [90, 300],
  resultEndpoint: 'status',
  outputCount: () => 1,
  priceBasis: 'unknown: the service gives no price; a user-supplied price is per request',
} satisfies Partial<ModelSpec>;

const FIRST_FRAME_WORKFLOWS: readonly string[] = ['text-to-video', 'image-to-video'];

const noPrice = (id: string) => () => ({ credits: null, basis: `the service gives no price for ${id}` });

const firstFrameWorkflow = (input: Record<string, unknown>) =>
  input.start_image_url !== undefined ? 'image-to-video' : 'text-to-video';

// ---- clip-2.3 ---------------------------------------------------------------

const clip23Input = () =>
  z
  .strictObject({
    prompt: promptText(),
    duration: intOneOf([6, 10]).default(6).describe('Seconds: 6 or 10; default 6; 1080p supports only 6'),
    resolution: oneOf(['768p', '1080p'] as const, 'resolution').default('768p').describe('768p or 1080p; default 768p'),
    start_image_url: imageRef.optional().describe('Optional first frame'),
    prompt_optimizer: z.boolean({ error: 'must be a boolean' }).optional(),
    end_image_url: unsupported('is not supported by clip-2.3 (it takes a first frame only, as start_image_url); remove it'),
  })
  .superRefine((v, ctx) => {
    if (v.resolution === '1080p' && v.duration !== 6) {
      fieldIssue(ctx, 'duration', `1080p supports only duration 6 (got ${v.duration}); use 768p for 10 seconds`);
    }
  });

export const clip23: ModelSpec = {
  ...VIDEO,
  id: 'clip-2.3',
  family: 'clip',
  summary: 'Text- or first-frame image-to-video, 6 or 10 s, 768p or 1080p (1080p: 6 s only)',
  get input() {
    return schemaOf(this, clip23Input);
  },
  workflows: FIRST_FRAME_WORKFLOWS,
  workflow: firstFrameWorkflow,
  price: noPrice('clip-2.3'),
  imageFields: ['start_image_url'],
  sandboxCredits: 40,
  choices: ['prompt length limit not shown: none enforced (non-empty, not only whitespace)'],
};

// ---- clip-02 and clip-02-pro --------------------------------------------------

/**
 * Parameter names are not shown: the schema is open (other fields pass through)
 * and checks only the chosen names, borrowed from clip-2.3: prompt, duration,
 * resolution, start_image_url, end_image_url, prompt_optimizer.
 */
function clip02Input(durations: readonly number[], resolutions: readonly [string, ...string[]]) {
  return z
    .looseObject({
      prompt: promptText(),
      duration: intOneOf(durations).optional().describe(`Seconds: ${durations.join(' or ')} (parameter name chosen; not shown)`),
      resolution: oneOf(resolutions, 'resolution').optional().describe(`${resolutions.join(' or ')} (parameter name chosen; not shown)`),
      start_image_url: imageRef.optional().describe('First frame for image-to-video (parameter name chosen; not shown)'),
      end_image_url: imageRef.optional().describe('Optional end frame for image-to-video (parameter name chosen; not shown)'),
      prompt_optimizer: z.boolean({ error: 'must be a boolean' }).optional(),
    })
    .superRefine((v, ctx) => {
      if (v.end_image_url !== undefined && v.start_image_url === undefined) {
        fieldIssue(ctx, 'end_image_url', 'an end frame is for image-to-video only: it requires start_image_url');
      }
    });
}

const CLIP02_CHOICES = [
  'parameter names not shown: prompt (required), duration, resolution, start_image_url, end_image_url, prompt_optimizer, as clip-2.3 names them',
  'the schema is open: other fields pass through unchecked; the named fields are checked when present',
  'resolution values are spelled as the API writes them (uppercase P)',
  'end_image_url requires start_image_url (the end frame is documented for image-to-video only)',
];

export const clip02: ModelSpec = {
  ...VIDEO,
  id: 'clip-02',
  family: 'clip',
  summary: 'Text- or image-to-video, 768P or 512P, 6 or 10 s, optional end frame and prompt optimizer',
  get input() {
    return schemaOf(this, () => clip02Input([6, 10], ['768P', '512P']));
  },
  workflows: FIRST_FRAME_WORKFLOWS,
  workflow: firstFrameWorkflow,
  price: noPrice('clip-02'),
  imageFields: ['start_image_url', 'end_image_url'],
  sandboxCredits: 30,
  // Sandbox: 6 or 10 s only, so an omitted duration gets the shorter (not the generic 5 s).
  videoSeconds: (i) => (typeof i.duration === 'number' ? i.duration : 6),
  choices: [...CLIP02_CHOICES, 'resolution default not shown: none filled in'],
};

export const clip02Pro: ModelSpec = {
  ...VIDEO,
  id: 'clip-02-pro',
  family: 'clip',
  summary: 'Text- or image-to-video at 1080P, 6 s, optional end frame and prompt optimizer',
  get input() {
    return schemaOf(this, () => clip02Input([6], ['1080P']));
  },
  workflows: FIRST_FRAME_WORKFLOWS,
  workflow: firstFrameWorkflow,
  price: noPrice('clip-02-pro'),
  imageFields: ['start_image_url', 'end_image_url'],
  sandboxCredits: 50,
  // Sandbox: the service makes 6 s videos at 1080P only.
  videoSeconds: () => 6,
  videoResolution: () => '1080P',
  choices: [...CLIP02_CHOICES, 'duration and resolution are checked only when present: 6 and 1080P are the only values'],
};

// ---- clipgen-2 ----------------------------------------------------------------

export const clipgen2: ModelSpec = {
  ...VIDEO,
  id: 'clipgen-2',
  family: 'clip',
  summary: 'Generic video request: prompt, duration, aspect_ratio',
  get input() {
    return schemaOf(this, () =>
      z.looseObject({
        prompt: promptText(),
        duration: z.number({ error: 'must be a number' }).int({ error: 'must be an integer' }).min(1, { error: 'must be at least 1' }).optional().describe('Seconds, a positive integer (allowed values not shown)'),
        aspect_ratio: ratioString.optional().describe('Such as 16:9 (allowed values not shown)'),
      }),
    );
  },
  workflows: ['text-to-video'],
  workflow: () => 'text-to-video',
  price: noPrice('clipgen-2'),
  imageFields: [],
  sandboxCredits: 30,
  choices: [
    'only an example request is shown: open schema with prompt required, duration a positive integer, aspect_ratio a W:H string; other fields pass through',
    'allowed duration and aspect_ratio values not shown: not restricted beyond their form',
  ],
};

export const specs: ModelSpec[] = [clip23, clip02, clip02Pro, clipgen2];
