/**
 * The data report.html carries: every job as one compact JSON array (a row), written job by job inside
 * `<script type="application/json" id="gb-jobs">`, and the tables the rows point into (states, models)
 * in `<script type="application/json" id="gb-meta">` after them. The page's script builds the cards of
 * the visible page only from these (src/report/html-app.ts).
 *
 * A row: [id, state index, model index, where, prompt, variables, input fields, task id, attempts,
 * finished at, error, files, texts, mark]; files are [href or null, path, kind letter, size, type]
 * (kind: i image, v video, a audio, t text, o other), texts are [name, text], mark is null or
 * [approved|rejected, note or null]. Long texts are cut
 * (the full ones are in report.json). The JSON is escaped so that no `<` appears in it: a value
 * holding `</script>` cannot end the element.
 */
import { headOf } from './format.js';
import { varsText } from './prompt.js';
import type { ReportFile, ReportJob } from './types.js';

/** Longest prompt, error, text result and input value carried in the page. */
export const PAGE_CHARS = { prompt: 2000, error: 2000, text: 4000, input: 300 } as const;

export type MediaKind = 'image' | 'audio' | 'video' | null;

const EXT_KIND: Record<string, MediaKind> = {
  png: 'image', jpg: 'image', jpeg: 'image', webp: 'image', gif: 'image', avif: 'image', bmp: 'image',
  mp3: 'audio', wav: 'audio', ogg: 'audio', m4a: 'audio', aac: 'audio', flac: 'audio', opus: 'audio',
  mp4: 'video', webm: 'video', mov: 'video', m4v: 'video',
};

/** How a file is shown: by the service's file_type, else its content type, else its extension. */
export function mediaKind(file: ReportFile): MediaKind {
  if (file.type === 'image' || file.type === 'audio' || file.type === 'video') return file.type;
  const ct = (file.contentType ?? '').toLowerCase();
  for (const kind of ['image', 'audio', 'video'] as const) if (ct.startsWith(`${kind}/`)) return kind;
  const ext = /\.([a-z0-9]+)$/i.exec(file.path)?.[1]?.toLowerCase() ?? '';
  return EXT_KIND[ext] ?? null;
}

/** A relative URL for a file path under the output folder, or null when the path is not a plain relative path. */
export function fileHref(path: string): string | null {
  if (path === '' || path.startsWith('/') || path.includes('\\') || path.includes('\0')) return null;
  const segments = path.split('/');
  if (segments.some((s) => s === '' || s === '.' || s === '..')) return null;
  return segments.map(encodeURIComponent).join('/');
}

/** JSON fit for a `<script type="application/json">` element: every `<` written as \u003c. */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}

function cut(text: string, max: number): string {
  return text.length > max ? `${headOf(text, max)}…` : text;
}

function fileKind(file: ReportFile): string {
  const kind = mediaKind(file);
  if (kind !== null) return kind[0]!;
  return file.type === 'text' || file.type === 'json' || file.type === 'lyrics' ? 't' : 'o';
}

/** Input fields as shown on a card: the prompt and chat messages left out (the prompt is shown on its own), values as text, cut. */
function inputFields(job: ReportJob): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(job.input ?? {})) {
    if (v === null || v === undefined || (k === 'prompt' && v === job.prompt)) continue;
    out[k] = typeof v === 'number' || typeof v === 'boolean' ? v : cut(typeof v === 'string' ? v : JSON.stringify(v), PAGE_CHARS.input);
  }
  return out;
}

/** Rows and their tables, built job by job. */
export class PageData {
  private readonly states = new Map<string, number>();
  private readonly models = new Map<string, number>();
  constructor(private readonly base: string) {}

  private index(map: Map<string, number>, key: string): number {
    let i = map.get(key);
    if (i === undefined) map.set(key, (i = map.size));
    return i;
  }

  /** One job's row as escaped JSON text. */
  row(job: ReportJob): string {
    const files = job.files.map((f) => {
      const rel = fileHref(f.path);
      return [rel === null ? null : this.base + rel, f.path, fileKind(f), f.size, f.type];
    });
    const texts = Object.entries(job.texts).map(([name, text]) => [name, cut(text, PAGE_CHARS.text)]);
    return scriptJson([
      job.id,
      this.index(this.states, job.state),
      this.index(this.models, job.model),
      job.where,
      job.prompt === null ? null : cut(job.prompt, PAGE_CHARS.prompt),
      varsText(job.vars ?? {}),
      inputFields(job),
      job.task_id,
      job.attempts,
      job.finished_at,
      job.error === null ? null : cut(job.error, PAGE_CHARS.error),
      files,
      texts,
      job.mark ? [job.mark.state, job.mark.note] : null,
    ]);
  }

  /** The tables, as escaped JSON text: `{states, models, more}` (`more`: jobs left out of the page). */
  meta(more: number): string {
    return scriptJson(this.tables(more));
  }

  /** The tables the rows point into, as a value. */
  tables(more = 0): { states: string[]; models: string[]; more: number } {
    return { states: [...this.states.keys()], models: [...this.models.keys()], more };
  }
}
