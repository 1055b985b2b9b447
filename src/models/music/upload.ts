import * as z from 'zod';
import { oneOf, schemaOf, weight01 } from '../common.js';
import { DEFAULT_MV, NON_CUSTOM_PROMPT_MAX } from './limits.js';
import { CUSTOM_MODE_WORKFLOW, PARAM_FLAG_WORKFLOW, TRACK_VARIATIONS } from './generate.js';
import {
  addModelField,
  audioUrlField,
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
  vocalGenderField,
} from './shared.js';

/** Workflows that start from uploaded audio (a remote URL only; the service fetches it). */

const UPLOAD_CHOICE = 'upload_url must be a remote http(s) URL; the 8-minute (V4_5ALL: 1-minute) audio limit is checked by the service';

const coverInput = () =>
  musicInput(
  {
    upload_url: audioUrlField.describe('Audio to cover (remote URL)'),
    custom_mode: requiredFlag(),
    instrumental: instrumentalField,
    mv: mvField,
    prompt: optionalText,
    style: optionalText,
    title: optionalText,
    persona_id: optionalText,
    ...sharedOptional,
  },
  (v, ctx) => {
    if (v.custom_mode === true) {
      requireWhen(ctx, v, 'style', 'when custom_mode is true');
      requireWhen(ctx, v, 'title', 'when custom_mode is true');
      if (v.instrumental === false) requireWhen(ctx, v, 'prompt', 'when custom_mode is true and instrumental is false');
      versionLimits(ctx, v, versionOf(v), { prompt: 'prompt', style: 'style', title: 'title' });
    } else if (v.custom_mode === false) {
      requireWhen(ctx, v, 'prompt', 'when custom_mode is false');
      maxChars(ctx, v, 'prompt', NON_CUSTOM_PROMPT_MAX, 'when custom_mode is false');
      emptyWhen(ctx, v, 'style', 'when custom_mode is false');
      emptyWhen(ctx, v, 'title', 'when custom_mode is false');
    }
  },
);

export const uploadAndCoverAudio = musicSpec({
  id: 'upload-and-cover-audio',
  kind: 'music',
  summary: 'Cover an uploaded track (at most 8 minutes; 1 minute for V4_5ALL) in a new style',
  get input() {
    return schemaOf(this, coverInput);
  },
  workflow: CUSTOM_MODE_WORKFLOW,
  urlOnlyFields: ['upload_url'],
  count: TRACK_VARIATIONS,
  typicalSeconds: [30, 120],
  sandboxCredits: 12,
  choices: [UPLOAD_CHOICE, `mv defaults to ${DEFAULT_MV}; instrumental defaults to false`, `variations per task: ${TRACK_VARIATIONS}`],
});

/**
 * default_param_flag false: the contract says "only upload_url". Choice: instrumental (it decides whether
 * lyrics are generated) and mv (the version, defaulted) stay allowed; every other parameter must be left empty.
 */
const uploadExtendOnlyUrl = ['prompt', 'style', 'title', 'continue_at', 'persona_id', 'negative_tags', 'vocal_gender', 'style_weight', 'weirdness_constraint', 'audio_weight'] as const;

const uploadExtendInput = () =>
  musicInput(
  {
    upload_url: audioUrlField.describe('Audio to extend (remote URL)'),
    default_param_flag: requiredFlag(),
    instrumental: instrumentalField,
    mv: mvField,
    prompt: optionalText.describe('Used as exact lyrics'),
    style: optionalText,
    title: optionalText,
    continue_at: secondsField.optional(),
    persona_id: optionalText,
    ...sharedOptional,
  },
  (v, ctx) => {
    if (v.default_param_flag === true) {
      requireWhen(ctx, v, 'style', 'when default_param_flag is true');
      requireWhen(ctx, v, 'title', 'when default_param_flag is true');
      requireWhen(ctx, v, 'continue_at', 'when default_param_flag is true');
      if (v.instrumental === false) requireWhen(ctx, v, 'prompt', 'when default_param_flag is true and instrumental is false');
      versionLimits(ctx, v, versionOf(v), { prompt: 'prompt', style: 'style', title: 'title' });
    } else if (v.default_param_flag === false) {
      for (const key of uploadExtendOnlyUrl) emptyWhen(ctx, v, key, 'when default_param_flag is false (only upload_url is used, with instrumental and mv)');
    }
  },
);

export const uploadAndExtendAudio = musicSpec({
  id: 'upload-and-extend-audio',
  kind: 'music',
  summary: 'Extend an uploaded track (at most 8 minutes; 1 minute for V4_5ALL)',
  get input() {
    return schemaOf(this, uploadExtendInput);
  },
  workflow: PARAM_FLAG_WORKFLOW,
  urlOnlyFields: ['upload_url'],
  count: TRACK_VARIATIONS,
  typicalSeconds: [30, 120],
  sandboxCredits: 12,
  choices: [
    UPLOAD_CHOICE,
    'default_param_flag false (the service: only upload_url): instrumental and mv allowed; prompt, style, title, continue_at, persona_id, negative_tags, vocal_gender and the weights must be left empty',
    `variations per task: ${TRACK_VARIATIONS}`,
  ],
});

const weights = {
  style_weight: weight01.optional(),
  weirdness_constraint: weight01.optional(),
  audio_weight: weight01.optional(),
};

const addInstrumentalInput = () =>
  musicInput(
  {
    upload_url: audioUrlField.describe('Vocal track to accompany (remote URL)'),
    title: requiredText(),
    tags: requiredText().describe('Style of the accompaniment'),
    negative_tags: requiredText().describe('Styles to exclude'),
    model: addModelField,
    ...weights,
  },
  (v, ctx) => versionLimits(ctx, v, versionOf(v, 'model'), { style: 'tags', title: 'title' }),
);

export const addInstrumental = musicSpec({
  id: 'add-instrumental',
  kind: 'music',
  summary: 'Add an instrumental accompaniment to an uploaded vocal track',
  get input() {
    return schemaOf(this, addInstrumentalInput);
  },
  urlOnlyFields: ['upload_url'],
  count: TRACK_VARIATIONS,
  typicalSeconds: [30, 120],
  sandboxCredits: 12,
  choices: [UPLOAD_CHOICE, 'tags use the style limit of the model version', `variations per task: ${TRACK_VARIATIONS}`],
});

const addVocalsInput = () =>
  musicInput(
  {
    upload_url: audioUrlField.describe('Instrumental track to sing over (remote URL)'),
    prompt: requiredText().describe('Lyrics or a description'),
    title: requiredText(),
    style: requiredText(),
    negative_tags: requiredText().describe('Styles to exclude'),
    model: addModelField,
    vocal_gender: vocalGenderField,
    ...weights,
  },
  (v, ctx) => versionLimits(ctx, v, versionOf(v, 'model'), { prompt: 'prompt', style: 'style', title: 'title' }),
);

export const addVocals = musicSpec({
  id: 'add-vocals',
  kind: 'music',
  summary: 'Add vocals to an uploaded instrumental track',
  get input() {
    return schemaOf(this, addVocalsInput);
  },
  urlOnlyFields: ['upload_url'],
  count: TRACK_VARIATIONS,
  typicalSeconds: [30, 120],
  sandboxCredits: 12,
  choices: [UPLOAD_CHOICE, `variations per task: ${TRACK_VARIATIONS}`],
});

export const SEPARATION_MODELS = ['base', 'enhanced', 'instrumental'] as const;
export const SEPARATION_OUTPUTS = ['general', 'bass', 'drums', 'other', 'piano', 'guitar', 'vocals'] as const;

const uploadSeparateInput = () =>
  musicInput(
  {
    audio_url: audioUrlField.describe('Audio to split (remote URL)'),
    title: z.string({ error: 'must be a string' }).optional(),
    model_name: oneOf(SEPARATION_MODELS, 'model_name').default('base').describe('base (default), enhanced, instrumental'),
    output_type: oneOf(SEPARATION_OUTPUTS, 'output_type').default('general').describe('general (default), bass, drums, other, piano, guitar, vocals'),
  },
  () => undefined,
);

export const uploadAndSeparateVocals = musicSpec({
  id: 'upload-and-separate-vocals',
  kind: 'audio',
  summary: 'Split uploaded audio into 7 stems',
  get input() {
    return schemaOf(this, uploadSeparateInput);
  },
  urlOnlyFields: ['audio_url'],
  count: 7,
  typicalSeconds: [30, 120],
  sandboxCredits: 20,
  choices: ['audio_url must be a remote http(s) URL', '7 stems per the API; its vocal_removal object lists 6 keys, so other *url keys are accepted too'],
});
