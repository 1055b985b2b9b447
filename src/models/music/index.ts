import type { ModelSpec } from '../types.js';
import { extendMusic, generateMusic, replaceSection } from './generate.js';
import { boostMusicStyle, convertToWav, createMusicVideo, generateLyrics, generateMusicCover, generatePersona, getTimestampedLyrics, separateVocals, stemSplit } from './track-ops.js';
import { addInstrumental, addVocals, uploadAndCoverAudio, uploadAndExtendAudio, uploadAndSeparateVocals } from './upload.js';

/**
 * The 17 music and audio workflows (value of `model`), read from the music detail endpoint.
 * Prices: none in the contract (credits null); sandboxCredits are sandbox-only.
 * typicalSeconds (choice): tracks 30-120 s, section replace 20-90, lyrics and text 5-20,
 * conversions and covers 10-40, vocal separation 20-60, stem splits 30-120.
 * Inputs are strict (unknown fields rejected): the contract lists each workflow's fields.
 * persona_id (shared optional) is accepted by generate-music (custom mode only),
 * extend-music, upload-and-cover-audio and upload-and-extend-audio.
 */
export const specs: ModelSpec[] = [
  generateMusic,
  extendMusic,
  uploadAndCoverAudio,
  uploadAndExtendAudio,
  addInstrumental,
  addVocals,
  replaceSection,
  boostMusicStyle,
  generateLyrics,
  getTimestampedLyrics,
  convertToWav,
  createMusicVideo,
  generateMusicCover,
  generatePersona,
  separateVocals,
  stemSplit,
  uploadAndSeparateVocals,
];

export { ADD_MODEL_VERSIONS, DEFAULT_MV, MUSIC_VERSIONS, TEXT_LIMITS, uploadAudioMaxSeconds, type MusicVersion } from './limits.js';
export { SEPARATION_MODELS, SEPARATION_OUTPUTS } from './upload.js';
export {
  MUSIC_RESULT_FIELDS,
  MUSIC_RESULT_SCHEMAS,
  MUSIC_WORKFLOWS,
  SEPARATE_VOCALS_KEYS,
  STEM_SPLIT_KEYS,
  VOCAL_REMOVAL_KEYS,
  isMusicWorkflow,
  musicResultTexts,
  musicResultUrls,
  parseMusicResult,
  parseTimestampedLyrics,
  timestampedLyricsContent,
  type MusicWorkflow,
  type NamedText,
  type NamedUrl,
  type ResultField,
  type TimestampedLyrics,
} from './results.js';
export { MUSIC_RULES, checkAgainstTrack, type MusicWorkflowRule, type TrackFacts } from './service.js';
