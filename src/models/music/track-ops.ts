import { schemaOf } from '../common.js';
import * as z from 'zod';
import { BOOST_CONTENT_MAX, LYRICS_PROMPT_MAX_WORDS, VIDEO_TEXT_MAX, wordCount } from './limits.js';
import { maxChars, musicInput, musicSpec, requiredText } from './shared.js';

/** Text workflows and the operations on an existing track (task_id + audio_id). */

const boostInput = () =>
  musicInput({ content: requiredText().describe('Short comma-separated style keywords') }, (v, ctx) =>
  maxChars(ctx, v, 'content', BOOST_CONTENT_MAX, '(chosen limit: the largest style limit)'),
);

export const boostMusicStyle = musicSpec({
  id: 'boost-music-style',
  kind: 'lyrics',
  summary: 'Expand short style keywords into a richer style description',
  get input() {
    return schemaOf(this, boostInput);
  },
  count: 1,
  typicalSeconds: [5, 15],
  sandboxCredits: 1,
  choices: [`content limit not shown: at most ${BOOST_CONTENT_MAX} characters (the largest style limit)`],
});

/** Lyric variations per generate-lyrics task. Choice: the contract says "several variations possible"; 2. */
export const LYRICS_VARIATIONS = 2;

const lyricsInput = () =>
  musicInput({ prompt: requiredText().describe(`Theme of the lyrics, at most ${LYRICS_PROMPT_MAX_WORDS} words`) }, (v, ctx) => {
  const p = v.prompt;
  if (typeof p === 'string') {
    const words = wordCount(p);
    if (words > LYRICS_PROMPT_MAX_WORDS) {
      ctx.addIssue({ code: 'too_big', origin: 'string', maximum: LYRICS_PROMPT_MAX_WORDS, inclusive: true, path: ['prompt'], input: p, message: `must be at most ${LYRICS_PROMPT_MAX_WORDS} words (got ${words})` });
    }
  }
});

export const generateLyrics = musicSpec({
  id: 'generate-lyrics',
  kind: 'lyrics',
  summary: `Lyrics from a theme (at most ${LYRICS_PROMPT_MAX_WORDS} words); ${LYRICS_VARIATIONS} variations`,
  get input() {
    return schemaOf(this, lyricsInput);
  },
  count: LYRICS_VARIATIONS,
  typicalSeconds: [5, 20],
  sandboxCredits: 1,
  choices: [`variations per task: ${LYRICS_VARIATIONS} (the service: several possible)`, 'words are counted by splitting on whitespace'],
});

const trackRef = {
  task_id: requiredText().describe('A finished music task'),
  audio_id: requiredText().describe('A track of that task'),
};

const trackRefInput = () =>
  musicInput(trackRef, () => undefined);

export const getTimestampedLyrics = musicSpec({
  id: 'get-timestamped-lyrics',
  kind: 'lyrics',
  summary: 'Word timings of the lyrics of a track with vocals',
  get input() {
    return schemaOf(this, trackRefInput);
  },
  count: 1,
  typicalSeconds: [5, 20],
  sandboxCredits: 1,
});

export const convertToWav = musicSpec({
  id: 'convert-to-wav',
  kind: 'audio',
  summary: 'WAV file of a generated track (once per track)',
  get input() {
    return schemaOf(this, trackRefInput);
  },
  count: 1,
  typicalSeconds: [10, 40],
  sandboxCredits: 1,
});

const videoInput = () =>
  musicInput(
  {
    ...trackRef,
    author: z.string({ error: 'must be a string' }).max(VIDEO_TEXT_MAX, { error: `must be at most ${VIDEO_TEXT_MAX} characters` }).optional(),
    domain_name: z.string({ error: 'must be a string' }).max(VIDEO_TEXT_MAX, { error: `must be at most ${VIDEO_TEXT_MAX} characters` }).optional(),
  },
  () => undefined,
);

export const createMusicVideo = musicSpec({
  id: 'create-music-video',
  kind: 'music',
  summary: 'MP4 video of a track (one per track; a duplicate gives 409)',
  get input() {
    return schemaOf(this, videoInput);
  },
  count: 1,
  typicalSeconds: [30, 120],
  sandboxCredits: 5,
});

/** Cover images per generate-music-cover task. Choice: the contract shows an array; 2. */
export const COVER_IMAGES = 2;

export const generateMusicCover = musicSpec({
  id: 'generate-music-cover',
  kind: 'music',
  summary: 'Cover images for a finished music task (once per task)',
  get input() {
    return schemaOf(this, () => musicInput({ task_id: requiredText().describe('A finished music task') }, () => undefined));
  },
  count: COVER_IMAGES,
  typicalSeconds: [10, 40],
  sandboxCredits: 2,
  choices: [`images per task: ${COVER_IMAGES} (the service: an array)`],
});

export const generatePersona = musicSpec({
  id: 'generate-persona',
  kind: 'music',
  summary: 'A persona from a track, for later generate-music calls (one per track; a duplicate gives 409)',
  get input() {
    return schemaOf(this, () => musicInput({ ...trackRef, name: requiredText(), description: requiredText() }, () => undefined));
  },
  count: 1,
  typicalSeconds: [5, 20],
  sandboxCredits: 2,
  choices: ['name and description length limits not shown: none applied'],
});

export const separateVocals = musicSpec({
  id: 'separate-vocals',
  kind: 'audio',
  summary: 'Split a track into vocals and instrumental (2 stems, once per track)',
  get input() {
    return schemaOf(this, trackRefInput);
  },
  count: 2,
  typicalSeconds: [20, 60],
  sandboxCredits: 10,
});

export const stemSplit = musicSpec({
  id: 'stem-split',
  kind: 'audio',
  summary: 'Split a track into 12 stems (once per track)',
  get input() {
    return schemaOf(this, trackRefInput);
  },
  count: 12,
  typicalSeconds: [30, 120],
  sandboxCredits: 25,
});
