import * as z from 'zod';
import { fieldIssue, imageRef, ratioString, promptText, schemaOf } from './common.js';
import type { ModelSpec } from './types.js';

/**
 * motion-1.6/standard and motion-1.6/pro. No mode field: the workflow is inferred.
 *   image_urls (1 to 4)        -> elements (both models)
 *   start_image_url            -> image-to-video (standard: no aspect_ratio, no end frame; pro: optional end_image_url)
 *   no image fields            -> text-to-video
 * Price: 9 (standard) or 15 (pro) credits per second times duration.
 */

type Tier = 'standard' | 'pro';
export type MotionWorkflow = 'text-to-video' | 'image-to-video' | 'elements';

/** Duration bounds, chosen (the contract gives no values): whole seconds 1 to 60, which keeps a typo's cost bounded (60 s pro = 900 credits). */
export const MOTION_MAX_SECONDS = 60;
const RATE: Record<Tier, number> = { standard: 9, pro: 15 };

/** Supported input fields per workflow and tier, from the contract's table. */
const SUPPORTED: Record<MotionWorkflow, Record<Tier, readonly string[]>> = {
  'text-to-video': {
    standard: ['prompt', 'duration', 'aspect_ratio', 'negative_prompt', 'cfg_scale'],
    pro: ['prompt', 'duration', 'aspect_ratio', 'negative_prompt', 'cfg_scale'],
  },
  'image-to-video': {
    standard: ['prompt', 'duration', 'start_image_url', 'negative_prompt', 'cfg_scale'],
    pro: ['prompt', 'duration', 'aspect_ratio', 'start_image_url', 'end_image_url', 'negative_prompt', 'cfg_scale'],
  },
  elements: {
    standard: ['prompt', 'duration', 'aspect_ratio', 'negative_prompt', 'image_urls'],
    pro: ['prompt', 'duration', 'aspect_ratio', 'negative_prompt', 'image_urls'],
  },
};

export function motionWorkflow(input: Record<string, unknown>): MotionWorkflow {
  if (input.image_urls !== undefined) return 'elements';
  if (input.start_image_url !== undefined) return 'image-to-video';
  return 'text-to-video';
}

function motionInput(tier: Tier) {
  return z
    .strictObject({
      prompt: promptText(),
      duration: z
        .number({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a number') })
        .int({ error: 'must be a whole number of seconds' })
        .min(1, { error: 'must be at least 1 second' })
        .max(MOTION_MAX_SECONDS, { error: `must be at most ${MOTION_MAX_SECONDS} seconds (cap chosen by genbatch; the service gives no values)` })
        .describe(`Seconds, required: a whole number 1 to ${MOTION_MAX_SECONDS} (allowed values not shown; cap chosen)`),
      aspect_ratio: ratioString.optional().describe('Such as 16:9 (allowed values not shown); not for standard image-to-video'),
      negative_prompt: z.string({ error: 'must be a string' }).optional(),
      cfg_scale: z.number({ error: 'must be a number' }).finite({ error: 'must be a finite number' }).optional().describe('Range not shown; not with image_urls'),
      start_image_url: imageRef.optional().describe('First frame: image-to-video'),
      end_image_url: imageRef.optional().describe('Last frame: pro image-to-video only, requires start_image_url'),
      image_urls: z
        .array(imageRef, { error: 'must be an array of image URLs' })
        .min(1, { error: 'must hold at least 1 image' })
        .max(4, { error: 'must hold at most 4 images' })
        .optional()
        .describe('Elements: 1 to 4 images; not with start_image_url, end_image_url or cfg_scale'),
    })
    .superRefine((v, ctx) => {
      const reported = new Set<string>();
      const report = (field: string, message: string) => {
        reported.add(field);
        fieldIssue(ctx, field, message);
      };
      if (v.image_urls !== undefined) {
        for (const field of ['start_image_url', 'end_image_url', 'cfg_scale'] as const) {
          if (v[field] !== undefined) report(field, 'cannot be used with image_urls (elements)');
        }
      }
      if (v.end_image_url !== undefined && !reported.has('end_image_url')) {
        if (tier === 'standard') report('end_image_url', 'is supported only by motion-1.6/pro, not motion-1.6/standard');
        else if (v.start_image_url === undefined) report('end_image_url', 'requires start_image_url');
      }
      const workflow = motionWorkflow(v);
      const supported = SUPPORTED[workflow][tier];
      for (const [field, value] of Object.entries(v)) {
        if (value === undefined || reported.has(field) || supported.includes(field)) continue;
        report(field, `is not supported for ${tier} ${workflow} (supported: ${supported.join(', ')})`);
      }
    });
}

function motionSpec(tier: Tier): ModelSpec {
  const id = `motion-1.6/${tier}`;
  const rate = RATE[tier];
  return {
    id,
    family: 'motion-1.6',
    kind: 'video',
    summary: `Text-to-video, image-to-video${tier === 'pro' ? ' (with optional end frame)' : ''} or elements (1 to 4 images); ${rate} credits per second`,
    get input() {
      return schemaOf(this, () => motionInput(tier));
    },
    workflows: ['text-to-video', 'image-to-video', 'elements'] satisfies MotionWorkflow[],
    workflow: motionWorkflow,
    priceBasis: `${rate} credits per second x duration (service price)`,
    price: (i) => {
      const duration = typeof i.duration === 'number' ? i.duration : null;
      if (duration === null) return { credits: null, basis: `${rate} credits per second, but duration is missing` };
      return { credits: rate * duration, basis: `${tier}: ${rate} credits per second x ${duration} s` };
    },
    imageFields: ['start_image_url', 'end_image_url', 'image_urls[]'],
    urlOnlyFields: [],
    typicalSeconds: [90, 300],
    resultEndpoint: 'status',
    outputCount: () => 1,
    choices: [
      `duration values not shown: any whole number of seconds from 1 to ${MOTION_MAX_SECONDS} (the cap bounds a typo's cost; no shown video model goes past 15 s)`,
      'aspect_ratio values not shown: any W:H ratio string accepted',
      'cfg_scale range not shown: any finite number accepted',
      'end_image_url rule beyond "requires start_image_url, pro only" not shown: nothing further enforced',
      'prompt length limit not shown: none enforced',
    ],
  };
}

export const motionStandard = motionSpec('standard');
export const motionPro = motionSpec('pro');

export const specs: ModelSpec[] = [motionStandard, motionPro];
