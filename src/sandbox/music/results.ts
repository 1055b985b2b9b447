import { MUSIC_RESULT_FIELDS, STEM_SPLIT_KEYS, VOCAL_REMOVAL_KEYS, type MusicWorkflow } from '../../models/music/index.js';
import type { ExtensionHost } from '../hooks.js';
import { blob, type Blob, type FileEntry } from '../files.js';
import { servedSize } from '../results.js';
import { Rng, mixSeed } from '../rng.js';
import type { TaskRecord, TaskResult } from '../tasks.js';
import { boostedStyle, lyricsTitle, songLyrics, timestamped } from './lyrics.js';
import { knownAudioSeconds, trackFileName } from './plan.js';
import type { MusicPlan, MusicTrack } from './state.js';

/**
 * Results of music tasks: one `files` item per output, holding the fields
 * MUSIC_RESULT_FIELDS lists for the workflow (JSON fields serialised into a
 * string), plus the contract's File fields (file_url, file_type, format,
 * content_type, file_name, file_size) of the item's main file, which is one of
 * its documented URLs (or, for text results, a served .txt / .json copy).
 * Every URL is served by the sandbox with real bytes: MP3 tracks and stems of
 * the track's length, WAV, MP4, PNG/JPEG covers.
 * upload-and-separate-vocals (choice): the 6 documented vocal_removal keys plus
 * `instrumental`, 7 stems; output_type and model_name are echoed in metadata.
 */

const COVER_EDGE = 1024;

/** One item: the workflow's documented fields in order, then the File fields of its main file. */
export function musicItem(workflow: MusicWorkflow, values: Record<string, unknown>, file: FileEntry): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of MUSIC_RESULT_FIELDS[workflow]) {
    const v = values[f.name];
    if (v === undefined || v === null) {
      if (f.required) throw new Error(`music result: ${workflow} item lacks its required field ${f.name}`);
      continue;
    }
    out[f.name] = f.type === 'json' ? JSON.stringify(v) : v;
  }
  return { ...out, ...file };
}

interface Builder {
  blobs: Blob[];
  files: Array<Record<string, unknown>>;
  add(b: Blob): string;
}

function builder(ctx: ExtensionHost, task: TaskRecord): Builder {
  const blobs: Blob[] = [];
  return {
    blobs,
    files: [],
    add(b) {
      blobs.push(b);
      return ctx.files.url(task, b);
    },
  };
}

function image(ctx: ExtensionHost, name: string, format: 'png' | 'jpeg', seed: number, nominal = COVER_EDGE): Blob {
  const s = servedSize(nominal, nominal, ctx.options.imageEdge);
  return blob(`${name}.${format === 'png' ? 'png' : 'jpg'}`, format, { type: format, width: s.width, height: s.height, seed });
}

function trackItems(ctx: ExtensionHost, task: TaskRecord, plan: MusicPlan, b: Builder): void {
  for (const t of plan.tracks) {
    const audio = blob(trackFileName(task, t), 'mp3', { type: 'mp3', seconds: t.seconds });
    const cover = image(ctx, `${task.id}-${t.index}-cover`, t.cover, mixSeed(task.seed, t.index));
    const audioUrl = b.add(audio);
    const imageUrl = b.add(cover);
    const file = ctx.files.entry(task, audio, 'audio', { metadata: { duration: t.seconds, instrumental: !t.hasVocals } });
    b.files.push(
      musicItem(plan.workflow, { audio_id: t.audioId, audio_url: audioUrl, image_url: imageUrl, title: t.title, tags: t.tags, duration: t.seconds, prompt: t.prompt }, file),
    );
  }
}

function sourceTrack(plan: MusicPlan): MusicTrack {
  const t = plan.source?.track;
  if (!t) throw new Error(`music result: ${plan.workflow} has no source track`);
  return t;
}

/** Stems as an object of URLs; the last `missing` keys are null (a partial result). */
function stems(ctx: ExtensionHost, task: TaskRecord, keys: readonly string[], seconds: number, missing: number, b: Builder): { urls: Record<string, string | null>; first: Blob } {
  const urls: Record<string, string | null> = {};
  let first: Blob | null = null;
  keys.forEach((key, i) => {
    if (i >= keys.length - missing) {
      urls[key] = null;
      return;
    }
    const stem = blob(`${task.id}-${key.replace(/_url$/, '')}.mp3`, 'mp3', { type: 'mp3', seconds });
    first ??= stem;
    urls[key] = b.add(stem);
  });
  if (!first) throw new Error('music result: no stem');
  return { urls, first };
}

/** Build the result of a finished music task from its plan. */
export function musicResult(ctx: ExtensionHost, task: TaskRecord, plan: MusicPlan): TaskResult {
  const b = builder(ctx, task);
  const wf = plan.workflow;
  const rng = new Rng(mixSeed(task.seed, 0x2e5));
  const input = task.input;
  const text = (v: unknown) => (typeof v === 'string' ? v : '');
  const textFile = (name: string, body: string, fileType: string) => {
    const t = blob(name, 'txt', { type: 'text', text: body });
    b.add(t);
    return ctx.files.entry(task, t, fileType);
  };
  const jsonFile = (name: string, value: unknown, fileType: string) => {
    const j = blob(name, 'json', { type: 'json', value });
    b.add(j);
    return ctx.files.entry(task, j, fileType);
  };
  switch (wf) {
    case 'boost-music-style': {
      const style = boostedStyle(text(input.content));
      b.files.push(musicItem(wf, { style }, textFile(`${task.id}-style.txt`, style, 'other')));
      break;
    }
    case 'generate-lyrics':
      for (let i = 1; i <= task.delivered; i++) {
        const title = lyricsTitle(text(input.prompt), i);
        const lyrics = songLyrics(text(input.prompt), mixSeed(task.seed, i));
        b.files.push(musicItem(wf, { title, text: lyrics }, textFile(`${task.id}-${i}.txt`, `${title}\n\n${lyrics}\n`, 'lyrics')));
      }
      break;
    case 'get-timestamped-lyrics': {
      const t = sourceTrack(plan);
      const content = timestamped(t.lyrics ?? '', t.seconds, mixSeed(task.seed, 7));
      b.files.push(musicItem(wf, { timestampe_lyrics: JSON.stringify(content) }, jsonFile(`${task.id}-timestamps.json`, content, 'lyrics')));
      break;
    }
    case 'convert-to-wav': {
      const t = sourceTrack(plan);
      const wav = blob(`${task.id}-${t.index}.wav`, 'wav', { type: 'wav', seconds: t.seconds, seed: task.seed });
      const url = b.add(wav);
      b.files.push(musicItem(wf, { wav_url: url }, ctx.files.entry(task, wav, 'audio', { metadata: { duration: t.seconds, audio_id: t.audioId } })));
      break;
    }
    case 'create-music-video': {
      const t = sourceTrack(plan);
      const s = servedSize(1280, 720, ctx.options.imageEdge);
      const mp4 = blob(`${task.id}.mp4`, 'mp4', { type: 'mp4', seconds: t.seconds, width: s.width, height: s.height });
      const url = b.add(mp4);
      const meta = { duration: t.seconds, width: 1280, height: 720, served_width: s.width, served_height: s.height, audio_id: t.audioId };
      b.files.push(musicItem(wf, { video_url: url }, ctx.files.entry(task, mp4, 'video', { metadata: meta })));
      break;
    }
    case 'generate-music-cover': {
      const covers: Array<{ file_url: string; file_type: string }> = [];
      let first: Blob | null = null;
      for (let i = 1; i <= task.delivered; i++) {
        const img = image(ctx, `${task.id}-cover-${i}`, rng.next() < 0.5 ? 'png' : 'jpeg', mixSeed(task.seed, i));
        first ??= img;
        covers.push({ file_url: b.add(img), file_type: 'image' });
      }
      if (!first) throw new Error('music result: no cover');
      b.files.push(musicItem(wf, { generate_cover: covers }, ctx.files.entry(task, first, 'image', { metadata: { width: COVER_EDGE, height: COVER_EDGE } })));
      break;
    }
    case 'generate-persona': {
      const persona = { persona_id: plan.personaId, name: text(input.name), description: text(input.description), audio_id: sourceTrack(plan).audioId };
      b.files.push(musicItem(wf, { persona_id: plan.personaId }, jsonFile(`${task.id}-persona.json`, persona, 'other')));
      break;
    }
    case 'separate-vocals': {
      const t = sourceTrack(plan);
      const { urls, first } = stems(ctx, task, ['vocal_url', 'instrumental_url'], t.seconds, 0, b);
      b.files.push(musicItem(wf, { separate_vocals: urls }, ctx.files.entry(task, first, 'audio', { metadata: { duration: t.seconds } })));
      break;
    }
    case 'stem-split': {
      const t = sourceTrack(plan);
      const { urls, first } = stems(ctx, task, STEM_SPLIT_KEYS, t.seconds, task.asked - task.delivered, b);
      b.files.push(musicItem(wf, { stem_split: urls }, ctx.files.entry(task, first, 'audio', { metadata: { duration: t.seconds } })));
      break;
    }
    case 'upload-and-separate-vocals': {
      const seconds = knownAudioSeconds(ctx, text(input.audio_url)) ?? Math.round(rng.range(60, 180) * 100) / 100;
      const keys = [...VOCAL_REMOVAL_KEYS, 'instrumental'];
      const { urls, first } = stems(ctx, task, keys, seconds, task.asked - task.delivered, b);
      const meta = { duration: seconds, model_name: input.model_name, output_type: input.output_type };
      b.files.push(musicItem(wf, { vocal_removal: urls }, ctx.files.entry(task, first, 'audio', { metadata: meta })));
      break;
    }
    default:
      trackItems(ctx, task, plan, b);
  }
  return { files: b.files, blobs: b.blobs };
}
