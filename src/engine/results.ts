import { createHash } from 'node:crypto';
import { sanitizeName } from '../download/names.js'; // not the barrel: it loads the whole downloader, which readers of a state never use
import { UnsafeResultError } from '../errors.js';
import { lrc } from '../graph/index.js';
import { musicResultTexts, musicResultUrls, parseTimestampedLyrics } from '../models/music/results.js';
import type { TaskView } from './ports.js';

/**
 * What to save from a finished task: every entry of `files` (status endpoint),
 * or for music every URL of every item (JSON-string fields parsed) plus the
 * text outputs. Names are unique within a job and plain; the downloader
 * sanitises them again before touching the disk.
 */
export interface Downloadable {
  idx: number;
  name: string;
  url: string;
  type: string;
  content_type: string | null;
  expected_size: number | null;
}

export interface TextResult {
  idx: number;
  name: string;
  text: string;
}

export interface Extracted {
  downloads: Downloadable[];
  texts: TextResult[];
}

const EXT_BY_TYPE: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'video/mp4': 'mp4',
  'audio/mpeg': 'mp3',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'application/json': 'json',
  'text/plain': 'txt',
  'model/gltf-binary': 'glb',
};

function extFromUrl(url: string): string | null {
  try {
    const m = /\.([a-z0-9]{1,5})$/i.exec(new URL(url).pathname);
    return m ? m[1]!.toLowerCase() : null;
  } catch {
    return null;
  }
}

/** A file_type usable as the stem of a file name (image, video, audio, 3d, other); anything else is named `file-<n>`. */
const PLAIN_KIND = /^[A-Za-z0-9]{1,16}$/;

/** An extension as the service's `format` gives it ("png"), lower-cased; null when it is not 1-10 letters or digits. */
function saneExt(v: unknown): string | null {
  return typeof v === 'string' && /^[A-Za-z0-9]{1,10}$/.test(v) ? v.toLowerCase() : null;
}

function extOf(name: string | null): string | null {
  const m = name === null ? null : /\.([A-Za-z0-9]{1,10})$/.exec(name);
  return m ? m[1]!.toLowerCase() : null;
}

/**
 * The name the service gave the file at `idx` (its `file_name`), kept in result.json beside the name on disk;
 * null when it gave none (music items have URLs only).
 */
export function serverFileName(task: TaskView, endpoint: 'status' | 'music', idx: number): string | null {
  return endpoint === 'status' ? str(task.files[idx]?.file_name) : null;
}

const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : null);
const int = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null);

/** The per-job summary file genbatch writes in out/<job id>/. */
export const RESULT_FILE = 'result.json';
/** Folders out/<job id>/previous-<n>/ keep the files of earlier results (src/engine/prepare/previous.ts). */
export const PREVIOUS_DIR = /^previous-\d+$/i;

/**
 * Unique, already-sanitised file names within one job's folder. Our own names
 * (result.json, the previous-<n> folders) are taken before any server name is
 * seen, so a server file called `result.json` becomes `result-2.json` and never
 * overwrites ours. Names are compared case-insensitively (macOS, Windows).
 */
export class Namer {
  private readonly seen = new Set<string>([RESULT_FILE]);
  unique(raw: string, fallback = 'file'): string {
    const name = sanitizeName(raw, fallback);
    let out = name;
    for (let n = 2; this.taken(out); n++) {
      const dot = name.lastIndexOf('.');
      out = dot > 0 ? `${name.slice(0, dot)}-${n}${name.slice(dot)}` : `${name}-${n}`;
    }
    this.seen.add(out.toLowerCase());
    return out;
  }
  private taken(name: string): boolean {
    return this.seen.has(name.toLowerCase()) || PREVIOUS_DIR.test(name);
  }
}

/**
 * Most entries a task's `files` may list (an image task gives a few, a music task a few tracks or stem sets).
 * A longer list is not a result: it would be recorded and downloaded entry by entry, each file up to the
 * downloader's cap, for one job.
 */
export const MAX_RESULT_FILES = 1000;

/**
 * Longest result URL taken (signed CDN URLs are a few hundred to a couple of thousand characters; servers refuse
 * a request line past about 8 KiB). A URL is stored, put in result.json and the reports, and named in errors.
 */
export const MAX_RESULT_URL = 8192;

export function extractResults(task: TaskView, endpoint: 'status' | 'music', workflow: string): Extracted {
  if (task.files.length > MAX_RESULT_FILES) throw new UnsafeResultError(`the task lists ${task.files.length} files, over the limit of ${MAX_RESULT_FILES} per task`);
  const got = extract(task, endpoint, workflow);
  for (const d of got.downloads) {
    if (d.url.length > MAX_RESULT_URL) throw new UnsafeResultError(`${endpoint === 'status' ? `files[${d.idx}].file_url` : `the ${d.type} URL`} has ${d.url.length} characters, over the limit of ${MAX_RESULT_URL}`);
  }
  return got;
}

function extract(task: TaskView, endpoint: 'status' | 'music', workflow: string): Extracted {
  const namer = new Namer();
  const downloads: Downloadable[] = [];
  const texts: TextResult[] = [];
  let idx = 0;
  if (endpoint === 'status') {
    // Named by kind and index within the job (image-1.png, image-2.png, video-1.mp4), as music files are;
    // the server's file_name and URL stay in result.json (serverFileName).
    const perKind = new Map<string, number>();
    task.files.forEach((f, i) => {
      const url = str(f.file_url);
      if (!url) throw new UnsafeResultError(`files[${i}] has no file_url`);
      const type = str(f.file_type) ?? 'other';
      const kind = PLAIN_KIND.test(type) ? type.toLowerCase() : 'file';
      const n = (perKind.get(kind) ?? 0) + 1;
      perKind.set(kind, n);
      const ct = str(f.content_type);
      const ext = saneExt(f.format) ?? (ct ? EXT_BY_TYPE[ct.split(';')[0]!.trim().toLowerCase()] : undefined) ?? extOf(str(f.file_name)) ?? extFromUrl(url) ?? 'bin';
      downloads.push({ idx: idx++, name: namer.unique(`${kind}-${n}.${ext}`), url, type, content_type: ct, expected_size: int(f.file_size) });
    });
    return { downloads, texts };
  }
  task.files.forEach((item, i) => {
    const n = task.files.length > 1 ? `-${i + 1}` : '';
    for (const u of musicResultUrls(workflow, item)) {
      const ext = extFromUrl(u.url) ?? 'bin';
      downloads.push({ idx: idx++, name: namer.unique(`${u.name}${n}.${ext}`), url: u.url, type: u.name, content_type: null, expected_size: null });
    }
    for (const t of musicResultTexts(workflow, item)) {
      const ext = t.name === 'timestamped-lyrics' && t.text.trimStart().startsWith('{') ? 'json' : 'txt';
      texts.push({ idx: idx++, name: namer.unique(`${t.name}${n}.${ext}`), text: t.text });
      // Timestamped lyrics also as an LRC file, the format music players read.
      const timed = t.name === 'timestamped-lyrics' ? parseTimestampedLyrics(t.text) : null;
      if (timed) texts.push({ idx: idx++, name: namer.unique(`lyrics${n}.lrc`), text: lrc(timed.aligned_words) });
    }
    // Descriptive fields of tracks (title, tags, prompt, audio_id) are kept as one JSON text per item.
    const meta: Record<string, unknown> = {};
    for (const k of ['audio_id', 'title', 'tags', 'duration', 'prompt'] as const) if (item[k] !== undefined && item[k] !== null) meta[k] = item[k];
    if (Object.keys(meta).length > 0) texts.push({ idx: idx++, name: namer.unique(`track${n}.json`), text: JSON.stringify(meta, null, 2) + '\n' });
  });
  return { downloads, texts };
}

export function sha256Hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** JSON with object keys sorted, so equal specs hash equally. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const o = v as Record<string, unknown>;
      return Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
    }
    return v;
  });
}

function pathParts(path: string): Array<string | number> {
  const parts: Array<string | number> = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) parts.push(m[2] !== undefined ? Number(m[2]) : m[1]!);
  if (parts[0] === 'input') parts.shift();
  return parts;
}

/** The value at a path like `input.image_urls[0]` inside `root`, or undefined. */
export function getAtPath(root: Record<string, unknown>, path: string): unknown {
  let cur: unknown = root;
  for (const part of pathParts(path)) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, unknown>)[part];
  }
  return cur;
}

/** Set a value at a path like `input.image_urls[0]` or `start_image_url` inside `root`. */
export function setAtPath(root: Record<string, unknown>, path: string, value: unknown): void {
  const parts = pathParts(path);
  let cur: unknown = root;
  for (let i = 0; i < parts.length - 1; i++) {
    cur = (cur as Record<string | number, unknown>)[parts[i]!];
    if (cur === null || typeof cur !== 'object') throw new Error(`no value at ${path}`);
  }
  (cur as Record<string | number, unknown>)[parts[parts.length - 1]!] = value;
}
