import type { MusicWorkflow } from '../../models/music/index.js';
import type { ExtensionHost } from '../hooks.js';
import { Rng, mixSeed } from '../rng.js';
import type { TaskRecord } from '../tasks.js';
import { asSung, lyricsTitle, songLyrics } from './lyrics.js';
import { planOf, setPlan, type MusicPlan, type MusicTrack, type TrackRef } from './state.js';

/**
 * The plan of a music task, drawn at creation from its seed: the tracks a
 * track workflow makes (audio ids, durations, vocals, lyrics), what the task
 * acts on. Durations (choice): new tracks 60-180 s; an extension adds 30-90 s
 * after continue_at (or after the end of the source); replace-section keeps the
 * source's length; tracks from uploaded audio keep its length when the sandbox
 * knows it (a sandbox file URL, or `?sandbox_duration_s=N` on the URL), else 60-180 s.
 */

export const TRACK_WORKFLOWS: ReadonlySet<MusicWorkflow> = new Set([
  'generate-music',
  'extend-music',
  'upload-and-cover-audio',
  'upload-and-extend-audio',
  'add-instrumental',
  'add-vocals',
  'replace-section',
]);

const STYLES = ['indie pop, acoustic guitar', 'lo-fi hip hop, mellow', 'synthwave, retro', 'folk, warm vocals', 'electronic, upbeat', 'jazz, smooth piano'];

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const r2 = (x: number) => Math.round(x * 100) / 100;

function uuid(rng: Rng): string {
  const h = rng.hex(32);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** Audio file name of a track within its task: `<task_id>-<n>.mp3`. */
export function trackFileName(task: TaskRecord, track: MusicTrack): string {
  return `${task.id}-${track.index}.mp3`;
}

/**
 * Duration of audio behind a URL when the sandbox knows it: a track it serves
 * (`<base>/files/<task>/<task>-<n>.mp3`) or, sandbox-only, `sandbox_duration_s=N` in the query.
 */
export function knownAudioSeconds(ctx: ExtensionHost, url: string): number | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const hint = Number(u.searchParams.get('sandbox_duration_s'));
  if (u.searchParams.has('sandbox_duration_s') && Number.isFinite(hint) && hint > 0) return hint;
  if (!ctx.baseUrl || !url.startsWith(`${ctx.baseUrl}/files/`)) return undefined;
  const m = /^\/files\/([^/]+)\/[^/]+-(\d+)\.mp3$/.exec(u.pathname);
  if (!m) return undefined;
  const task = ctx.tasks.get(decodeURIComponent(m[1] ?? ''));
  const tracks = task ? planOf(task)?.tracks : undefined;
  return tracks?.find((t) => t.index === Number(m[2]))?.seconds;
}

interface TrackDraft {
  seconds: number;
  hasVocals: boolean;
  title: string;
  tags: string;
  prompt: string;
  lyrics: string | null;
}

function draft(ctx: ExtensionHost, workflow: MusicWorkflow, input: Record<string, unknown>, source: TrackRef | null, rng: Rng, n: number): TrackDraft {
  const fresh = () => r2(rng.range(60, 180));
  const uploaded = () => knownAudioSeconds(ctx, str(input.upload_url)) ?? fresh();
  const prompt = str(input.prompt);
  const instrumental = input.instrumental === true;
  const custom = input.custom_mode === true;
  const vocalsFrom = (lyricsGiven: boolean) => (instrumental ? null : lyricsGiven ? asSung(prompt) : songLyrics(prompt || str(input.title), rng.int(0, 2 ** 31)));
  switch (workflow) {
    case 'generate-music':
    case 'upload-and-cover-audio': {
      const lyrics = vocalsFrom(custom);
      return {
        seconds: workflow === 'generate-music' ? fresh() : uploaded(),
        hasVocals: lyrics !== null,
        title: custom ? str(input.title) : lyricsTitle(prompt, n),
        tags: custom ? str(input.style) : (STYLES[rng.int(0, STYLES.length - 1)] ?? 'pop'),
        prompt,
        lyrics,
      };
    }
    case 'extend-music': {
      const src = source?.track;
      const own = input.default_param_flag === true;
      const at = own ? (num(input.continue_at) ?? src?.seconds ?? 0) : (src?.seconds ?? 0);
      const hasVocals = src?.hasVocals ?? true;
      return {
        seconds: r2(at + rng.range(30, 90)),
        hasVocals,
        title: own ? str(input.title) : `${src?.title ?? 'Track'} (extended)`,
        tags: own ? str(input.style) : (src?.tags ?? ''),
        prompt: own ? prompt : (src?.prompt ?? ''),
        lyrics: !hasVocals ? null : own ? asSung(prompt) : (src?.lyrics ?? songLyrics(src?.prompt ?? '', rng.int(0, 2 ** 31))),
      };
    }
    case 'upload-and-extend-audio': {
      const own = input.default_param_flag === true;
      const lyrics = vocalsFrom(own);
      const base = knownAudioSeconds(ctx, str(input.upload_url)) ?? r2(rng.range(30, 120));
      return {
        seconds: r2((own ? (num(input.continue_at) ?? base) : base) + rng.range(30, 90)),
        hasVocals: lyrics !== null,
        title: own ? str(input.title) : 'Extended upload',
        tags: own ? str(input.style) : (STYLES[rng.int(0, STYLES.length - 1)] ?? 'pop'),
        prompt,
        lyrics,
      };
    }
    case 'add-instrumental':
      return { seconds: uploaded(), hasVocals: true, title: str(input.title), tags: str(input.tags), prompt: '', lyrics: songLyrics(str(input.title), rng.int(0, 2 ** 31)) };
    case 'add-vocals':
      return { seconds: uploaded(), hasVocals: true, title: str(input.title), tags: str(input.style), prompt, lyrics: asSung(prompt) };
    default: {
      // replace-section: same length as the source; new lyrics when full_lyrics is given.
      const src = source?.track;
      const full = str(input.full_lyrics);
      const hasVocals = src?.hasVocals ?? true;
      return {
        seconds: src?.seconds ?? fresh(),
        hasVocals,
        title: str(input.title),
        tags: str(input.tags),
        prompt,
        lyrics: !hasVocals ? null : full ? asSung(full) : (src?.lyrics ?? asSung(prompt)),
      };
    }
  }
}

/** Draw the plan of a new music task; `source` is what check() resolved. */
export function makePlan(ctx: ExtensionHost, task: TaskRecord, workflow: MusicWorkflow, source: MusicPlan['source']): MusicPlan {
  const rng = new Rng(mixSeed(task.seed, 0x3051c));
  const tracks: MusicTrack[] = [];
  if (TRACK_WORKFLOWS.has(workflow)) {
    const ref = source?.track ? { task: source.task, track: source.track } : null;
    for (let i = 1; i <= task.delivered; i++) {
      const d = draft(ctx, workflow, task.input, ref, rng, i);
      tracks.push({ audioId: uuid(rng), index: i, ...d, cover: rng.next() < 0.5 ? 'png' : 'jpeg' });
    }
  }
  const plan: MusicPlan = { workflow, tracks, source, personaId: workflow === 'generate-persona' ? `persona-${uuid(rng)}` : null };
  setPlan(task, plan);
  return plan;
}
