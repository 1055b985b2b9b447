import type { ModelKind } from '../models/index.js';
import { blob, type Blob, type FileEntry, type FileStore } from './files.js';
import { Rng, mixSeed } from './rng.js';
import type { TaskRecord, TaskResult } from './tasks.js';

/**
 * Generic result builders: what a finished task returns in `files` when no
 * extension (see extensions.ts) builds it. Images: PNG or JPEG per
 * output_format, aspect from size, served small (longest edge = imageEdge),
 * nominal dimensions in metadata. Video: MP4 of input.duration (default 5 s; spec.videoSeconds where the model says otherwise: its default or only lengths).
 * Music and audio: MP3 (music) or WAV (audio) of a drawn 30 to 60 s. Lyrics: text.
 */

const EDGE: Readonly<Record<string, number>> = { '1K': 1024, '1.5K': 1536, '2K': 2048, '3K': 3072, '4K': 3840 };

function ratio(s: unknown): [number, number] | null {
  if (typeof s !== 'string') return null;
  const m = /^(\d+(?:\.\d+)?)\s*[:]\s*(\d+(?:\.\d+)?)$/.exec(s);
  if (!m) return null;
  const a = Number(m[1]);
  const b = Number(m[2]);
  return a > 0 && b > 0 ? [a, b] : null;
}

function exact(s: unknown): [number, number] | null {
  if (s && typeof s === 'object' && !Array.isArray(s)) {
    const o = s as Record<string, unknown>;
    if (typeof o.width === 'number' && typeof o.height === 'number' && o.width > 0 && o.height > 0) return [o.width, o.height];
    return null;
  }
  if (typeof s !== 'string') return null;
  const m = /^(\d+)\s*[x*]\s*(\d+)$/i.exec(s);
  return m ? [Number(m[1]), Number(m[2])] : null;
}

const round16 = (n: number) => Math.max(16, Math.round(n / 16) * 16);

/**
 * Nominal image size from `size` (ratio, WxH, {width,height}, 2K-style preset, auto) and the resolution
 * (`resolution`, or what the model processes instead: spec.imageResolution).
 */
export function imageSize(input: Record<string, unknown>, resolution: unknown = input.resolution): { width: number; height: number } {
  const fixed = exact(input.size);
  if (fixed) return { width: fixed[0], height: fixed[1] };
  const preset = typeof input.size === 'string' ? EDGE[input.size] : undefined;
  const edge = preset ?? (typeof resolution === 'string' ? EDGE[resolution.toUpperCase()] : undefined) ?? 1024;
  const [a, b] = ratio(input.size) ?? ratio(input.aspect_ratio) ?? [1, 1];
  return a >= b ? { width: edge, height: round16((edge * b) / a) } : { width: round16((edge * a) / b), height: edge };
}

/** Nominal video size from `aspect_ratio` (`1280*720` or `16:9`) and `resolution` (`720p`, `1080P`; else `fallback`, else 720p). */
export function videoSize(input: Record<string, unknown>, fallback?: string): { width: number; height: number } {
  const fixed = exact(input.aspect_ratio) ?? exact(input.size);
  if (fixed) return { width: fixed[0], height: fixed[1] };
  const resolution = input.resolution ?? fallback;
  const m = typeof resolution === 'string' ? /^(\d+)p$/i.exec(resolution) : null;
  const short = m ? Number(m[1]) : 720;
  const [a, b] = ratio(input.aspect_ratio) ?? ratio(input.size) ?? [16, 9];
  return a >= b ? { width: round16((short * a) / b), height: short } : { width: short, height: round16((short * b) / a) };
}

/** Scale a nominal size down so its longest edge is at most `edge`. */
export function servedSize(w: number, h: number, edge: number): { width: number; height: number } {
  const k = Math.min(1, edge / Math.max(w, h));
  return { width: Math.max(1, Math.round(w * k)), height: Math.max(1, Math.round(h * k)) };
}

function imageFormat(input: Record<string, unknown>, rng: Rng): 'png' | 'jpeg' {
  const f = input.output_format;
  if (f === 'png') return 'png';
  if (f === 'jpeg' || f === 'jpg') return 'jpeg';
  return rng.next() < 0.5 ? 'png' : 'jpeg';
}

function seconds(v: unknown, dflt: number): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : dflt;
}

/** Build the generic result of a finished task of `kind`. */
export function genericResult(task: TaskRecord, files: FileStore, imageEdge: number): TaskResult {
  const rng = new Rng(mixSeed(task.seed, 0x7e5));
  const n = task.delivered;
  const blobs: Blob[] = [];
  const entries: FileEntry[] = [];
  const kind: ModelKind = task.spec.kind;
  // Without output_format the image format is drawn once per task: every file of a task shares it.
  const format = kind === 'image' ? imageFormat(task.input, rng) : 'png';
  for (let i = 0; i < n; i++) {
    const seed = mixSeed(task.seed, i + 1);
    const base = `${task.id}-${i + 1}`;
    if (kind === 'image') {
      const nominal = imageSize(task.input, task.spec.imageResolution ? task.spec.imageResolution(task.input) : task.input.resolution);
      const served = servedSize(nominal.width, nominal.height, imageEdge);
      const b = blob(`${base}.${format === 'png' ? 'png' : 'jpg'}`, format, { type: format, ...served, seed });
      blobs.push(b);
      entries.push(files.entry(task, b, 'image', { metadata: { width: nominal.width, height: nominal.height, served_width: served.width, served_height: served.height } }));
    } else if (kind === 'video') {
      const nominal = videoSize(task.input, task.spec.videoResolution?.(task.input));
      const served = servedSize(nominal.width, nominal.height, imageEdge);
      const dur = seconds(task.spec.videoSeconds ? task.spec.videoSeconds(task.input) : task.input.duration, 5);
      const b = blob(`${base}.mp4`, 'mp4', { type: 'mp4', seconds: dur, ...served });
      blobs.push(b);
      entries.push(files.entry(task, b, 'video', { metadata: { width: nominal.width, height: nominal.height, duration: dur, served_width: served.width, served_height: served.height } }));
    } else if (kind === 'music' || kind === 'audio') {
      const dur = rng.int(30, 60);
      const b = kind === 'music' ? blob(`${base}.mp3`, 'mp3', { type: 'mp3', seconds: dur }) : blob(`${base}.wav`, 'wav', { type: 'wav', seconds: dur, seed });
      blobs.push(b);
      entries.push(files.entry(task, b, 'audio', { metadata: { duration: dur } }));
    } else {
      const text = `[Verse]\nsandbox lyrics ${i + 1} for task ${task.id}\n`;
      const b = blob(`${base}.txt`, 'txt', { type: 'text', text });
      blobs.push(b);
      entries.push(files.entry(task, b, kind === 'lyrics' ? 'lyrics' : 'other'));
    }
  }
  return { files: entries, blobs };
}
