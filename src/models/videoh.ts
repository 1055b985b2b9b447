import * as z from 'zod';
import { fieldIssue, imageRef, intRange, oneOf, remoteUrl, promptText, schemaOf } from './common.js';
import type { ModelSpec } from './types.js';

/**
 * videoh: text-to-video, image-to-video, reference-to-video and video-edit,
 * chosen from the fields present (no mode field):
 *   video_url                          -> video-edit (reference_image_urls are edit references, up to 5)
 *   reference_image_urls (no video)    -> reference-to-video (1 to 9)
 *   image_urls                         -> image-to-video (one first frame)
 *   none of these                      -> text-to-video
 */

export type VideohWorkflow = 'text-to-video' | 'image-to-video' | 'reference-to-video' | 'video-edit';

/** Seconds for text-, image- and reference-to-video. */
const DURATION = [3, 15] as const;

const ASPECT_RATIOS = ['16:9', '9:16', '1:1', '4:3', '3:4'] as const;

export function videohWorkflow(input: Record<string, unknown>): VideohWorkflow {
  if (input.video_url !== undefined) return 'video-edit';
  if (input.reference_image_urls !== undefined) return 'reference-to-video';
  if (input.image_urls !== undefined) return 'image-to-video';
  return 'text-to-video';
}

const input = () =>
  z
  .strictObject({
    prompt: promptText().optional().describe('Required except for image-to-video'),
    image_urls: z
      .array(imageRef, { error: 'must be an array with one image URL' })
      .length(1, { error: 'must hold exactly one image URL (the first frame)' })
      .optional()
      .describe('Image-to-video only: one first-frame image'),
    reference_image_urls: z
      .array(imageRef, { error: 'must be an array of image URLs' })
      .min(1, { error: 'must hold at least 1 image (omit the field instead)' })
      .max(9, { error: 'must hold at most 9 images' })
      .optional()
      .describe('Reference-to-video: 1 to 9 images (character1, character2, ...); video-edit: up to 5 (@Image1, @Image2, ...)'),
    video_url: remoteUrl.optional().describe('Video-edit source video, 3 to 60 seconds; a remote URL only'),
    aspect_ratio: oneOf(ASPECT_RATIOS, 'aspect_ratio').optional().describe('Text- and reference-to-video only; default 16:9'),
    resolution: oneOf(['720p', '1080p'] as const, 'resolution').default('1080p').describe('720p or 1080p; default 1080p'),
    duration: z
      .number({ error: 'must be a number' })
      .int({ error: 'must be an integer' })
      .optional()
      .describe('Seconds 3 to 15 for text, image and reference workflows; ignored for video-edit (its length is the source video\'s)'),
    audio_setting: oneOf(['auto', 'origin'] as const, 'audio_setting').optional().describe('Video-edit only; default auto'),
    seed: intRange(0, 2147483647).optional(),
    enable_safety_checker: z.boolean({ error: 'must be a boolean' }).optional(),
  })
  .superRefine((v, ctx) => {
    const workflow = videohWorkflow(v);
    if (v.prompt === undefined && workflow !== 'image-to-video') {
      fieldIssue(ctx, 'prompt', `is required for ${workflow} (only image-to-video may omit it)`);
    }
    if (v.image_urls !== undefined && v.reference_image_urls !== undefined) {
      fieldIssue(ctx, 'image_urls', 'cannot be combined with reference_image_urls (use one or the other)');
    } else if (v.image_urls !== undefined && v.video_url !== undefined) {
      fieldIssue(ctx, 'image_urls', 'is for image-to-video only; it cannot be used with video_url (video-edit)');
    }
    if (workflow === 'video-edit' && v.reference_image_urls !== undefined && v.reference_image_urls.length > 5) {
      fieldIssue(ctx, 'reference_image_urls', `must hold at most 5 images for video-edit (got ${v.reference_image_urls.length})`);
    }
    // The service ignores duration for video-edit (it bills and renders the probed source length): no range there.
    if (v.duration !== undefined && workflow !== 'video-edit') {
      if (v.duration < DURATION[0]) fieldIssue(ctx, 'duration', `must be at least ${DURATION[0]}`);
      else if (v.duration > DURATION[1]) fieldIssue(ctx, 'duration', `must be at most ${DURATION[1]} (the range of ${workflow}; video-edit ignores duration)`);
    }
    if (v.aspect_ratio !== undefined && (workflow === 'image-to-video' || workflow === 'video-edit')) {
      fieldIssue(ctx, 'aspect_ratio', `is for text-to-video and reference-to-video only, not ${workflow}`);
    }
    if (v.audio_setting !== undefined && workflow !== 'video-edit') {
      fieldIssue(ctx, 'audio_setting', `is for video-edit only (with video_url), not ${workflow}`);
    }
  });

export const videoh: ModelSpec = {
  id: 'videoh',
  family: 'videoh',
  kind: 'video',
  summary: 'Text-, image-, reference-to-video and video-edit, chosen from the fields present; 720p or 1080p, 3 to 15 s',
  get input() {
    return schemaOf(this, input);
  },
  workflows: ['text-to-video', 'image-to-video', 'reference-to-video', 'video-edit'] satisfies VideohWorkflow[],
  workflow: videohWorkflow,
  priceBasis: 'unknown: the service gives no price (billing depends on workflow, resolution and billable duration); a user-supplied price is per request',
  price: (i) => ({
    credits: null,
    basis: `the service gives no price for videoh (billing depends on workflow, resolution and billable duration; ${videohWorkflow(i)})`,
  }),
  imageFields: ['image_urls[]', 'reference_image_urls[]'],
  urlOnlyFields: ['video_url'],
  typicalSeconds: [90, 300],
  resultEndpoint: 'status',
  outputCount: () => 1,
  sandboxCredits: 60,
  videoSeconds: (i) => (videohWorkflow(i) === 'video-edit' ? undefined : typeof i.duration === 'number' ? i.duration : undefined),
  choices: [
    'duration default not shown: none filled in; for video-edit the service ignores duration (it uses the source video\'s length): any whole number is accepted and sent as given, and the sandbox makes a video of its default length',
    'aspect_ratio (16:9) and audio_setting (auto) defaults depend on the workflow: not filled in, left to the service',
    'the source video length (3 to 60 s) is probed by the service: not checked locally',
    'prompt length limit not shown: none enforced',
    'an empty reference_image_urls array is rejected (omit the field instead)',
  ],
};

export const specs: ModelSpec[] = [videoh];
