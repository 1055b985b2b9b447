import { findModel } from '../models/index.js';
import { MUSIC_RESULT_FIELDS, STEM_SPLIT_KEYS, VOCAL_REMOVAL_KEYS, isMusicWorkflow, parseMusicResult, parseTimestampedLyrics, type MusicWorkflow } from '../models/music/index.js';
import { lrc } from './lrc.js';
import { isObject, type Step } from './refs.js';

/**
 * What a job exposes to references (`${{ jobs.<id>.<field> }}`), per model
 * kind: the ONE place these shapes live (documented in manifests/README.md).
 *
 *   status-endpoint models (images, video):  task_id, files[] {file_url, file_type,
 *                                            label, format, content_type, file_name, file_size, metadata}
 *   music track workflows (generate-music, extend-music, upload-and-*, add-*,
 *   replace-section):                        task_id, audio[] {audio_id, audio_url, image_url, title, tags, duration, prompt}
 *   generate-lyrics:                         task_id, text, title (first variation), lyrics[] {title, text}
 *   boost-music-style:                       task_id, style
 *   get-timestamped-lyrics:                  task_id, timestamped_lyrics {aligned_words[], waveform_data[], hoot_cer, is_streamed}, lrc
 *   convert-to-wav:                          task_id, wav_url
 *   create-music-video:                      task_id, video_url
 *   generate-music-cover:                    task_id, covers[] {file_url, file_type}
 *   generate-persona:                        task_id, persona_id
 *   separate-vocals:                         task_id, vocal_url, instrumental_url
 *   stem-split:                              task_id, stems {backing_vocals_url, bass_url, ... woodwinds_url}
 *   upload-and-separate-vocals:              task_id, stems {bass, drums, piano, guitar, vocals, other}
 *   every music workflow also:               items[] (the raw result items)
 *   chat models:                             text, lines[] (non-empty lines, trimmed), items[] (the text
 *                                            read as a JSON list), usage
 *
 * Single-valued music fields (wav_url, persona_id, ...) are those of the first
 * result item.
 */

export type Shape =
  | { type: 'string' | 'number' | 'boolean' | 'any' }
  | { type: 'list'; item: Shape }
  | { type: 'object'; fields: Record<string, Shape> | null };

const S: Shape = { type: 'string' };
const N: Shape = { type: 'number' };
const ANY: Shape = { type: 'any' };
const list = (item: Shape): Shape => ({ type: 'list', item });
const obj = (fields: Record<string, Shape> | null): Shape => ({ type: 'object', fields });

const FILE = obj({ file_url: S, file_type: S, label: S, format: S, content_type: S, file_name: S, file_size: N, metadata: ANY });
const TRACK_WORKFLOWS = new Set<string>(Object.entries(MUSIC_RESULT_FIELDS).filter(([, f]) => f.some((x) => x.name === 'audio_id')).map(([k]) => k));
const TRACK = obj(Object.fromEntries((MUSIC_RESULT_FIELDS['generate-music'] ?? []).map((f) => [f.name, f.type === 'number' ? N : S])));
const TIMESTAMPED = obj({ aligned_words: list(obj({ word: S, start_s: N, end_s: N, success: { type: 'boolean' }, palign: N })), waveform_data: list(N), hoot_cer: N, is_streamed: { type: 'boolean' } });

function musicShape(wf: MusicWorkflow): Record<string, Shape> {
  const base: Record<string, Shape> = { task_id: S, items: list(ANY) };
  if (TRACK_WORKFLOWS.has(wf)) return { ...base, audio: list(TRACK) };
  switch (wf) {
    case 'generate-lyrics':
      return { ...base, text: S, title: S, lyrics: list(obj({ title: S, text: S })) };
    case 'boost-music-style':
      return { ...base, style: S };
    case 'get-timestamped-lyrics':
      return { ...base, timestamped_lyrics: TIMESTAMPED, lrc: S };
    case 'convert-to-wav':
      return { ...base, wav_url: S };
    case 'create-music-video':
      return { ...base, video_url: S };
    case 'generate-music-cover':
      return { ...base, covers: list(obj({ file_url: S, file_type: S })) };
    case 'generate-persona':
      return { ...base, persona_id: S };
    case 'separate-vocals':
      return { ...base, vocal_url: S, instrumental_url: S };
    case 'stem-split':
      return { ...base, stems: obj(Object.fromEntries(STEM_SPLIT_KEYS.map((k) => [k, S]))) };
    case 'upload-and-separate-vocals':
      return { ...base, stems: obj(Object.fromEntries(VOCAL_REMOVAL_KEYS.map((k) => [k, S]))) };
    default:
      return base;
  }
}

export const CHAT_OUTPUTS: Record<string, Shape> = { text: S, lines: list(S), items: list(ANY), usage: obj(null) };

/** The fields a job of this model exposes, or null for an unknown model. */
export function outputShape(model: string, kind: string): Shape | null {
  if (kind === 'chat') return obj(CHAT_OUTPUTS);
  const spec = findModel(model);
  if (!spec) return null;
  if (spec.resultEndpoint === 'music' && isMusicWorkflow(model)) return obj(musicShape(model));
  return obj({ task_id: S, files: list(FILE) });
}

/** The shape at `path` inside `shape`, or a message saying which step does not exist. */
export function shapeAt(shape: Shape, path: readonly Step[]): { shape: Shape } | { error: string } {
  let cur = shape;
  let walked = '';
  for (const step of path) {
    if (cur.type === 'any') return { shape: ANY };
    if (typeof step === 'number') {
      if (cur.type !== 'list') return { error: `${walked || 'the value'} is ${describe(cur)}, not a list ([${step}] does not apply)` };
      cur = cur.item;
      walked += `[${step}]`;
    } else {
      if (cur.type !== 'object') return { error: `${walked || 'the value'} is ${describe(cur)}${cur.type === 'list' ? ` (pick an item first: ${walked}[0].${step})` : ''}, it has no field "${step}"` };
      if (cur.fields === null) return { shape: ANY };
      const next = cur.fields[step];
      if (!next) return { error: `no field "${step}"${walked ? ` in ${walked}` : ''}; available: ${Object.keys(cur.fields).join(', ')}` };
      cur = next;
      walked += walked ? `.${step}` : step;
    }
  }
  return { shape: cur };
}

export function describe(shape: Shape): string {
  return shape.type === 'list' ? 'a list' : shape.type === 'object' ? 'a mapping' : shape.type === 'any' ? 'any value' : `a ${shape.type}`;
}

/**
 * The documented item count of a list output, known before the job runs
 * (ModelSpec.outputCount: n images, music variations, cover images), or null.
 */
export function documentedCount(model: string, kind: string, input: Record<string, unknown>, field: string): number | null {
  if (kind === 'chat') return null;
  const spec = findModel(model);
  if (!spec || !['audio', 'lyrics', 'covers', 'files', 'items'].includes(field)) return null;
  try {
    return spec.outputCount?.(input) ?? null;
  } catch {
    return null;
  }
}

/**
 * The values a finished job exposes, from its stored result: the service's Task
 * for submit jobs, `{text, usage}` for chat jobs. Throws on a result that does
 * not match the contract.
 */
export function outputsOf(model: string, kind: string, resultJson: string | null): Record<string, unknown> {
  const result: unknown = resultJson ? JSON.parse(resultJson) : {};
  if (!isObject(result)) return {};
  if (kind === 'chat') {
    const text = typeof result.text === 'string' ? result.text : '';
    return { text, lines: linesOf(text), get items() { return jsonItems(text); }, usage: result.usage ?? null };
  }
  const files = Array.isArray(result.files) ? result.files : [];
  const taskId = result.task_id;
  const spec = findModel(model);
  if (!spec || spec.resultEndpoint !== 'music' || !isMusicWorkflow(model)) return { task_id: taskId, files };
  const items = files.map((f) => parseMusicResult(model, f));
  const first = items[0] ?? {};
  const out: Record<string, unknown> = { task_id: taskId, items };
  if (TRACK_WORKFLOWS.has(model)) {
    out.audio = items.map((it) => Object.fromEntries(Object.keys((TRACK as { fields: Record<string, Shape> }).fields).map((k) => [k, it[k] ?? null])));
    return out;
  }
  const json = (v: unknown): unknown => (typeof v === 'string' ? (JSON.parse(v) as unknown) : v);
  switch (model) {
    case 'generate-lyrics':
      out.text = first.text;
      out.title = first.title ?? null;
      out.lyrics = items.map((it) => ({ title: it.title ?? null, text: it.text }));
      break;
    case 'boost-music-style':
      out.style = first.style;
      break;
    case 'get-timestamped-lyrics': {
      const t = parseTimestampedLyrics(first.timestampe_lyrics);
      out.timestamped_lyrics = t ?? first.timestampe_lyrics;
      out.lrc = t ? lrc(t.aligned_words) : '';
      break;
    }
    case 'convert-to-wav':
      out.wav_url = first.wav_url;
      break;
    case 'create-music-video':
      out.video_url = first.video_url;
      break;
    case 'generate-music-cover':
      out.covers = json(first.generate_cover);
      break;
    case 'generate-persona':
      out.persona_id = first.persona_id;
      break;
    case 'separate-vocals': {
      const c = json(first.separate_vocals);
      if (isObject(c)) Object.assign(out, { vocal_url: c.vocal_url, instrumental_url: c.instrumental_url });
      break;
    }
    case 'stem-split':
      out.stems = json(first.stem_split);
      break;
    case 'upload-and-separate-vocals':
      out.stems = json(first.vocal_removal);
      break;
  }
  return out;
}

/** Non-empty lines of a text, trimmed, with list markers ("1.", "-", "*") removed. */
export function linesOf(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim().replace(/^(?:[-*•]\s+|\d{1,3}[.)]\s+)/, '').trim())
    .filter((l) => l.length > 0);
}

/** The text read as a JSON list (a fenced ```json block is unwrapped); throws when it is not one. */
export function jsonItems(text: string): unknown[] {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/.exec(text);
  const body = (fenced ? fenced[1]! : text).trim();
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    throw new Error('the chat answer is not JSON (items needs a JSON list)');
  }
  if (!Array.isArray(v)) throw new Error('the chat answer is JSON but not a list (items needs a JSON list)');
  return v;
}
