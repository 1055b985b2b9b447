/**
 * Music limits from the contract's "Music and audio workflows" section, as data.
 * The schemas (shared.ts), the sandbox and the docs all read them from here.
 */

export const MUSIC_VERSIONS = ['V4', 'V4_5', 'V4_5PLUS', 'V4_5ALL', 'V5'] as const;
export type MusicVersion = (typeof MUSIC_VERSIONS)[number];

/** Versions that add-instrumental and add-vocals take in their `model` field. */
export const ADD_MODEL_VERSIONS = ['V4_5PLUS', 'V5'] as const;

/**
 * Version used when `mv` is omitted. Choice (contract silent): V4_5PLUS, the one
 * default the contract does state (for `model` of add-instrumental and add-vocals).
 */
export const DEFAULT_MV: MusicVersion = 'V4_5PLUS';

export interface TextLimits {
  prompt: number;
  style: number;
  title: number;
}

/** Character limits of prompt / style / title per version. */
export const TEXT_LIMITS: Readonly<Record<MusicVersion, TextLimits>> = {
  V4: { prompt: 3000, style: 200, title: 80 },
  V4_5: { prompt: 5000, style: 1000, title: 100 },
  V4_5PLUS: { prompt: 5000, style: 1000, title: 100 },
  V4_5ALL: { prompt: 5000, style: 1000, title: 80 },
  V5: { prompt: 5000, style: 1000, title: 100 },
};

/** generate-music titles: 80 characters for every version. */
export const GENERATE_MUSIC_TITLE_MAX = 80;

/** Prompt limit in non-custom mode (generate-music, upload-and-cover-audio). */
export const NON_CUSTOM_PROMPT_MAX = 500;

/** generate-lyrics prompt limit, in words. */
export const LYRICS_PROMPT_MAX_WORDS = 200;

/** create-music-video `author` and `domain_name`. */
export const VIDEO_TEXT_MAX = 50;

/**
 * boost-music-style `content` limit. Choice (contract silent: "short comma-separated
 * style keywords"): the largest style limit, 1000 characters.
 */
export const BOOST_CONTENT_MAX = 1000;

/** Longest uploaded audio accepted by the upload workflows, in seconds: 8 minutes, 1 minute for V4_5ALL. */
export function uploadAudioMaxSeconds(mv: MusicVersion): number {
  return mv === 'V4_5ALL' ? 60 : 8 * 60;
}

/** Number of words in a text, split on whitespace. */
export function wordCount(text: string): number {
  const words = text.trim().split(/\s+/u);
  return words[0] === '' ? 0 : words.length;
}
