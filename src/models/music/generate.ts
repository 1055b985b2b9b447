import * as z from 'zod';
import { charCount, schemaOf } from '../common.js';
import { DEFAULT_MV, GENERATE_MUSIC_TITLE_MAX, NON_CUSTOM_PROMPT_MAX, TEXT_LIMITS } from './limits.js';
import {
  emptyWhen,
  instrumentalField,
  maxChars,
  musicInput,
  musicSpec,
  mvField,
  optionalText,
  requiredFlag,
  requiredText,
  requireWhen,
  secondsField,
  sharedOptional,
  versionLimits,
  versionOf,
} from './shared.js';

/** generate-music, extend-music and replace-section: workflows that make tracks from text. */

/** Workflows chosen by custom_mode (generate-music, upload-and-cover-audio). */
export const CUSTOM_MODE_WORKFLOW = { values: ['custom mode', 'non-custom mode'], of: (input: Record<string, unknown>) => (input.custom_mode === true ? 'custom mode' : 'non-custom mode') };

/** Workflows chosen by default_param_flag (extend-music, upload-and-extend-audio). */
export const PARAM_FLAG_WORKFLOW = { values: ['new parameters', 'original parameters'], of: (input: Record<string, unknown>) => (input.default_param_flag === true ? 'new parameters' : 'original parameters') };

/** Variations per generate-music / extend task. Choice: the contract says "several"; 2. */
export const TRACK_VARIATIONS = 2;

const NON_CUSTOM_EMPTY = ['style', 'title', 'persona_id', 'negative_tags', 'vocal_gender', 'style_weight', 'weirdness_constraint', 'audio_weight'] as const;

const generateInput = () =>
  musicInput(
  {
    custom_mode: requiredFlag().describe('true: style and title (and prompt as lyrics unless instrumental); false: prompt only'),
    instrumental: instrumentalField,
    mv: mvField,
    prompt: optionalText.describe(`Lyrics (custom mode) or description (non-custom, at most ${NON_CUSTOM_PROMPT_MAX} characters)`),
    style: optionalText.describe('Style (custom mode only)'),
    title: optionalText.describe(`Title (custom mode only), at most ${GENERATE_MUSIC_TITLE_MAX} characters`),
    persona_id: optionalText.describe('From generate-persona; custom mode only'),
    ...sharedOptional,
  },
  (v, ctx) => {
    if (v.custom_mode === true) {
      requireWhen(ctx, v, 'style', 'when custom_mode is true');
      requireWhen(ctx, v, 'title', 'when custom_mode is true');
      if (v.instrumental === false) requireWhen(ctx, v, 'prompt', 'when custom_mode is true and instrumental is false');
      versionLimits(ctx, v, versionOf(v), { prompt: 'prompt', style: 'style', title: 'title' }, GENERATE_MUSIC_TITLE_MAX);
    } else if (v.custom_mode === false) {
      requireWhen(ctx, v, 'prompt', 'when custom_mode is false');
      maxChars(ctx, v, 'prompt', NON_CUSTOM_PROMPT_MAX, 'when custom_mode is false');
      for (const key of NON_CUSTOM_EMPTY) emptyWhen(ctx, v, key, 'when custom_mode is false (non-custom mode takes only prompt)');
    }
  },
);

export const generateMusic = musicSpec({
  id: 'generate-music',
  kind: 'music',
  summary: `Music from a description (non-custom) or from lyrics, style and title (custom); ${TRACK_VARIATIONS} variations`,
  get input() {
    return schemaOf(this, generateInput);
  },
  workflow: CUSTOM_MODE_WORKFLOW,
  count: TRACK_VARIATIONS,
  typicalSeconds: [30, 120],
  sandboxCredits: 12,
  choices: [
    `variations per task: ${TRACK_VARIATIONS} (the service: several)`,
    `mv defaults to ${DEFAULT_MV}; instrumental defaults to false; custom_mode is required`,
    'non-custom mode: style, title, persona_id, negative_tags, vocal_gender and the weights must be left empty',
  ],
});

const extendOwnFields = ['prompt', 'style', 'title', 'continue_at'] as const;

const extendInput = () =>
  musicInput(
  {
    default_param_flag: requiredFlag().describe('true: new prompt, style, title, continue_at; false: the original track parameters'),
    audio_id: requiredText().describe('Track to extend'),
    mv: mvField,
    prompt: optionalText,
    style: optionalText,
    title: optionalText,
    continue_at: secondsField.optional().describe('Seconds into the track where the extension starts'),
    persona_id: optionalText,
    ...sharedOptional,
  },
  (v, ctx) => {
    if (v.default_param_flag === true) {
      for (const key of extendOwnFields) requireWhen(ctx, v, key, 'when default_param_flag is true');
      versionLimits(ctx, v, versionOf(v), { prompt: 'prompt', style: 'style', title: 'title' });
    } else if (v.default_param_flag === false) {
      for (const key of extendOwnFields) emptyWhen(ctx, v, key, 'when default_param_flag is false (the original parameters are used)');
    }
  },
);

export const extendMusic = musicSpec({
  id: 'extend-music',
  kind: 'music',
  summary: 'Extend a generated track from continue_at, with new or the original parameters',
  get input() {
    return schemaOf(this, extendInput);
  },
  workflow: PARAM_FLAG_WORKFLOW,
  count: TRACK_VARIATIONS,
  typicalSeconds: [30, 120],
  sandboxCredits: 12,
  choices: [
    `mv defaults to ${DEFAULT_MV}, so "mv required when default_param_flag is false" always holds once defaults apply`,
    'default_param_flag false: prompt, style, title and continue_at must be left empty',
    `variations per task: ${TRACK_VARIATIONS}`,
  ],
});

const replaceLimits = TEXT_LIMITS[DEFAULT_MV];

const replaceInput = () =>
  musicInput(
  {
    task_id: requiredText().describe('Music task holding the track'),
    audio_id: requiredText().describe('Track to edit'),
    prompt: requiredText().describe('Lyrics or description of the new section'),
    tags: requiredText().describe('Style tags'),
    title: requiredText(),
    infill_start_s: secondsField.describe('Section start, seconds (at least 0, up to 2 decimals)'),
    infill_end_s: secondsField.describe('Section end, seconds (greater than start, inside the track)'),
    negative_tags: optionalText,
    full_lyrics: optionalText.describe('Lyrics of the whole track after the edit'),
    callback_url: z
      .string({ error: 'must be a string URL' })
      .refine((s) => /^https:\/\//i.test(s) && charCount(s) <= 2048, { error: 'must be an https URL of at most 2048 characters' })
      .optional(),
  },
  (v, ctx) => {
    maxChars(ctx, v, 'prompt', replaceLimits.prompt, `(the ${DEFAULT_MV} limit; replace-section takes no mv)`);
    maxChars(ctx, v, 'tags', replaceLimits.style, `(the ${DEFAULT_MV} style limit)`);
    maxChars(ctx, v, 'title', replaceLimits.title, `(the ${DEFAULT_MV} limit)`);
    const start = v.infill_start_s;
    const end = v.infill_end_s;
    if (typeof start === 'number' && typeof end === 'number' && !(end > start)) {
      ctx.addIssue({ code: 'custom', path: ['infill_end_s'], message: `must be greater than infill_start_s (${start})`, input: end });
    }
  },
);

export const replaceSection = musicSpec({
  id: 'replace-section',
  kind: 'music',
  summary: 'Regenerate the part of a track between infill_start_s and infill_end_s',
  get input() {
    return schemaOf(this, replaceInput);
  },
  count: 1,
  typicalSeconds: [20, 90],
  sandboxCredits: 6,
  choices: [
    `no mv field: prompt / tags / title use the ${DEFAULT_MV} limits (tags as style)`,
    '"inside the track" is checked by the service (checkAgainstTrack), which knows the duration',
    'one result track per task',
  ],
});
