import * as z from 'zod';
import { UnsafeResultError } from '../../errors.js';

/**
 * Result items (`files` entries of the music detail endpoint) per workflow, as the
 * contract documents them: field lists as data (the sandbox builds results from
 * them), zod schemas of one item (the runner parses with them), and the list of
 * downloadable URLs / text outputs of one item, with the JSON-string fields parsed.
 *
 * Choices (contract silent): items are loose objects (extra fields such as
 * file_url, file_type, metadata are kept); the id/URL/text field that carries the
 * result is required, descriptive fields (image_url, title, tags, duration, prompt)
 * may be missing or null; JSON-string fields are also accepted already parsed;
 * separated stems may be null (a silent stem); timestampe_lyrics is any string,
 * normally the JSON of the timestamped-lyrics content below.
 */

export const MUSIC_WORKFLOWS = [
  'generate-music',
  'extend-music',
  'upload-and-cover-audio',
  'upload-and-extend-audio',
  'add-instrumental',
  'add-vocals',
  'replace-section',
  'boost-music-style',
  'generate-lyrics',
  'get-timestamped-lyrics',
  'convert-to-wav',
  'create-music-video',
  'generate-music-cover',
  'generate-persona',
  'separate-vocals',
  'stem-split',
  'upload-and-separate-vocals',
] as const;
export type MusicWorkflow = (typeof MUSIC_WORKFLOWS)[number];

export function isMusicWorkflow(id: string): id is MusicWorkflow {
  return (MUSIC_WORKFLOWS as readonly string[]).includes(id);
}

export interface ResultField {
  name: string;
  /** `url`: a download URL; `json`: a JSON value serialized into a string. */
  type: 'string' | 'number' | 'url' | 'json';
  meaning: string;
  required: boolean;
}

export const SEPARATE_VOCALS_KEYS = ['vocal_url', 'instrumental_url'] as const;
export const VOCAL_REMOVAL_KEYS = ['bass', 'drums', 'piano', 'guitar', 'vocals', 'other'] as const;
export const STEM_SPLIT_KEYS = [
  'backing_vocals_url',
  'bass_url',
  'brass_url',
  'drums_url',
  'fx_url',
  'guitar_url',
  'keyboard_url',
  'percussion_url',
  'strings_url',
  'synth_url',
  'vocal_url',
  'woodwinds_url',
] as const;

const TRACK_FIELDS: readonly ResultField[] = [
  { name: 'audio_id', type: 'string', meaning: 'audio identifier', required: true },
  { name: 'audio_url', type: 'url', meaning: 'download URL', required: true },
  { name: 'image_url', type: 'url', meaning: 'cover image URL', required: false },
  { name: 'title', type: 'string', meaning: 'track title', required: false },
  { name: 'tags', type: 'string', meaning: 'style tags', required: false },
  { name: 'duration', type: 'number', meaning: 'seconds', required: false },
  { name: 'prompt', type: 'string', meaning: 'prompt used', required: false },
];

/** Result fields of one item, per workflow. */
export const MUSIC_RESULT_FIELDS: Readonly<Record<MusicWorkflow, readonly ResultField[]>> = {
  'generate-music': TRACK_FIELDS,
  'extend-music': TRACK_FIELDS,
  'upload-and-cover-audio': TRACK_FIELDS,
  'upload-and-extend-audio': TRACK_FIELDS,
  'add-instrumental': TRACK_FIELDS,
  'add-vocals': TRACK_FIELDS,
  'replace-section': TRACK_FIELDS,
  'boost-music-style': [{ name: 'style', type: 'string', meaning: 'enhanced style', required: true }],
  'generate-lyrics': [
    { name: 'title', type: 'string', meaning: 'lyrics title', required: false },
    { name: 'text', type: 'string', meaning: 'complete lyrics', required: true },
  ],
  'get-timestamped-lyrics': [{ name: 'timestampe_lyrics', type: 'string', meaning: 'lyrics with timestamps (the field name is spelled this way)', required: true }],
  'convert-to-wav': [{ name: 'wav_url', type: 'url', meaning: 'WAV file URL', required: true }],
  'create-music-video': [{ name: 'video_url', type: 'url', meaning: 'MP4 URL', required: true }],
  'generate-music-cover': [{ name: 'generate_cover', type: 'json', meaning: 'array of {file_url, file_type}', required: true }],
  'generate-persona': [{ name: 'persona_id', type: 'string', meaning: 'persona identifier', required: true }],
  'separate-vocals': [{ name: 'separate_vocals', type: 'json', meaning: `object with ${SEPARATE_VOCALS_KEYS.join(', ')}`, required: true }],
  'stem-split': [{ name: 'stem_split', type: 'json', meaning: `object with ${STEM_SPLIT_KEYS.join(', ')}`, required: true }],
  'upload-and-separate-vocals': [{ name: 'vocal_removal', type: 'json', meaning: `object with ${VOCAL_REMOVAL_KEYS.join(', ')} (URLs)`, required: true }],
};

// ---- schemas ----

const httpUrl = z.string({ error: 'must be a URL string' }).regex(/^https?:\/\/\S+$/i, { error: 'must be an http(s) URL' });
const text = z.string({ error: 'must be a string' });
const stemUrl = httpUrl.nullable();

/** A field that holds JSON serialized into a string (or, leniently, the parsed value itself). */
function jsonString<T extends z.ZodType>(shape: T) {
  return z.unknown().superRefine((value, ctx) => {
    let parsed: unknown = value;
    if (typeof value === 'string') {
      try {
        parsed = JSON.parse(value);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON string' });
        return;
      }
    }
    const r = shape.safeParse(parsed);
    if (!r.success) for (const iss of r.error.issues) ctx.addIssue({ code: 'custom', path: iss.path, message: iss.message });
  });
}

export const separateVocalsContent = z.looseObject({ vocal_url: httpUrl, instrumental_url: httpUrl });
export const vocalRemovalContent = z.looseObject(Object.fromEntries(VOCAL_REMOVAL_KEYS.map((k) => [k, stemUrl])) as Record<(typeof VOCAL_REMOVAL_KEYS)[number], typeof stemUrl>);
export const stemSplitContent = z.looseObject(Object.fromEntries(STEM_SPLIT_KEYS.map((k) => [k, stemUrl])) as Record<(typeof STEM_SPLIT_KEYS)[number], typeof stemUrl>);
export const coverContent = z.array(z.looseObject({ file_url: httpUrl, file_type: text }), { error: 'must be an array of {file_url, file_type}' }).min(1, { error: 'must hold at least one image' });

export const alignedWord = z.looseObject({ word: text, start_s: z.number(), end_s: z.number(), success: z.boolean(), palign: z.number() });
/** Content of timestamped lyrics (normally JSON inside `timestampe_lyrics`). */
export const timestampedLyricsContent = z.looseObject({
  aligned_words: z.array(alignedWord),
  waveform_data: z.array(z.number()),
  hoot_cer: z.number(),
  is_streamed: z.boolean(),
});
export type TimestampedLyrics = z.infer<typeof timestampedLyricsContent>;

export const trackResult = z.looseObject({
  audio_id: text,
  audio_url: httpUrl,
  image_url: httpUrl.nullish(),
  title: text.nullish(),
  tags: text.nullish(),
  duration: z.number().nullish(),
  prompt: text.nullish(),
});

/** zod schema of one result item, per workflow. */
export const MUSIC_RESULT_SCHEMAS: Readonly<Record<MusicWorkflow, z.ZodType<Record<string, unknown>>>> = {
  'generate-music': trackResult,
  'extend-music': trackResult,
  'upload-and-cover-audio': trackResult,
  'upload-and-extend-audio': trackResult,
  'add-instrumental': trackResult,
  'add-vocals': trackResult,
  'replace-section': trackResult,
  'boost-music-style': z.looseObject({ style: text }),
  'generate-lyrics': z.looseObject({ title: text.nullish(), text }),
  'get-timestamped-lyrics': z.looseObject({ timestampe_lyrics: z.union([text, timestampedLyricsContent]) }),
  'convert-to-wav': z.looseObject({ wav_url: httpUrl }),
  'create-music-video': z.looseObject({ video_url: httpUrl }),
  'generate-music-cover': z.looseObject({ generate_cover: jsonString(coverContent) }),
  'generate-persona': z.looseObject({ persona_id: text }),
  'separate-vocals': z.looseObject({ separate_vocals: jsonString(separateVocalsContent) }),
  'stem-split': z.looseObject({ stem_split: jsonString(stemSplitContent) }),
  'upload-and-separate-vocals': z.looseObject({ vocal_removal: jsonString(vocalRemovalContent) }),
};

/** Parse `timestampe_lyrics` (a JSON string or the object) into its content, or null when it is plain text. */
export function parseTimestampedLyrics(value: unknown): TimestampedLyrics | null {
  let parsed = value;
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value);
    } catch {
      return null;
    }
  }
  const r = timestampedLyricsContent.safeParse(parsed);
  return r.success ? r.data : null;
}

// ---- extraction ----

export interface NamedUrl {
  /** Short plain name of the output, e.g. "audio", "image", "vocal", "drums", "cover-2". */
  name: string;
  url: string;
}

export interface NamedText {
  name: string;
  text: string;
}

/** Parse one result item; throws UnsafeResultError naming the first bad fields. */
export function parseMusicResult(workflow: string, item: unknown): Record<string, unknown> {
  if (!isMusicWorkflow(workflow)) throw new UnsafeResultError(`unknown music workflow "${workflow}"`);
  const r = MUSIC_RESULT_SCHEMAS[workflow].safeParse(item);
  if (!r.success) {
    const where = r.error.issues
      .slice(0, 3)
      .map((i) => `${i.path.map(String).join('.') || 'item'}: ${i.message}`)
      .join('; ');
    throw new UnsafeResultError(`${workflow} result item does not match the API's shape (${where})`);
  }
  return r.data;
}

function json(value: unknown): unknown {
  return typeof value === 'string' ? (JSON.parse(value) as unknown) : value;
}

function stripUrl(key: string): string {
  return key.endsWith('_url') ? key.slice(0, -4) : key;
}

/**
 * Every downloadable URL of one result item, JSON-string fields parsed. A
 * generic `file_url` on the item is listed too ("file") unless it repeats another.
 */
export function musicResultUrls(workflow: string, item: unknown): NamedUrl[] {
  const v = parseMusicResult(workflow, item);
  const out: NamedUrl[] = [];
  const add = (name: string, url: unknown) => {
    if (typeof url === 'string' && url.length > 0 && !out.some((o) => o.url === url)) out.push({ name, url });
  };
  switch (workflow as MusicWorkflow) {
    case 'convert-to-wav':
      add('wav', v.wav_url);
      break;
    case 'create-music-video':
      add('video', v.video_url);
      break;
    case 'separate-vocals': {
      const c = separateVocalsContent.parse(json(v.separate_vocals));
      add('vocal', c.vocal_url);
      add('instrumental', c.instrumental_url);
      break;
    }
    case 'stem-split':
    case 'upload-and-separate-vocals': {
      const raw = workflow === 'stem-split' ? v.stem_split : v.vocal_removal;
      const c = z.record(z.string(), z.unknown()).parse(json(raw));
      for (const [key, url] of Object.entries(c)) if (typeof url === 'string' && /^https?:\/\//i.test(url)) add(stripUrl(key), url);
      break;
    }
    case 'generate-music-cover':
      coverContent.parse(json(v.generate_cover)).forEach((c, i) => add(`cover-${i + 1}`, c.file_url));
      break;
    case 'boost-music-style':
    case 'generate-lyrics':
    case 'get-timestamped-lyrics':
    case 'generate-persona':
      break;
    default:
      add('audio', v.audio_url);
      add('image', v.image_url);
  }
  if (typeof v.file_url === 'string' && /^https?:\/\//i.test(v.file_url)) add('file', v.file_url);
  return out;
}

/** The text outputs of one result item (lyrics, style, persona id, timestamped lyrics). */
export function musicResultTexts(workflow: string, item: unknown): NamedText[] {
  const v = parseMusicResult(workflow, item);
  const str = (x: unknown) => (typeof x === 'string' ? x : JSON.stringify(x));
  switch (workflow as MusicWorkflow) {
    case 'generate-lyrics':
      return [...(typeof v.title === 'string' ? [{ name: 'title', text: v.title }] : []), { name: 'lyrics', text: str(v.text) }];
    case 'boost-music-style':
      return [{ name: 'style', text: str(v.style) }];
    case 'generate-persona':
      return [{ name: 'persona_id', text: str(v.persona_id) }];
    case 'get-timestamped-lyrics':
      return [{ name: 'timestamped-lyrics', text: str(v.timestampe_lyrics) }];
    default:
      return [];
  }
}
