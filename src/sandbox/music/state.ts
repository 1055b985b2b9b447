import type { MusicWorkflow } from '../../models/music/index.js';
import type { ExtensionHost } from '../hooks.js';
import type { TaskRecord } from '../tasks.js';

/**
 * What the music extension remembers, per sandbox: the planned tracks of each
 * task (drawn at creation, shown once it finishes), an index from audio_id to
 * its track, the once-per-track / once-per-task claims, and the personas.
 */

/** One generated track (an item of a track workflow's `files`). */
export interface MusicTrack {
  audioId: string;
  /** 1-based position in its task. */
  index: number;
  seconds: number;
  hasVocals: boolean;
  title: string;
  tags: string;
  prompt: string;
  /** Lyrics sung on the track (with section markers), or null for an instrumental. */
  lyrics: string | null;
  cover: 'png' | 'jpeg';
}

/** The plan of a music task, made when it is created. */
export interface MusicPlan {
  workflow: MusicWorkflow;
  /** Tracks made by a track workflow (only the delivered ones). */
  tracks: MusicTrack[];
  /** The track (or, for a cover, the task) the workflow acts on. */
  source: { task: TaskRecord; track: MusicTrack | null } | null;
  /** generate-persona: the persona it makes. */
  personaId: string | null;
}

export interface TrackRef {
  task: TaskRecord;
  track: MusicTrack;
}

export interface MusicState {
  audio: Map<string, TrackRef>;
  /** `${workflow}:${audio_id or task_id}` -> the task that did it. */
  claims: Map<string, TaskRecord>;
  personas: Map<string, TaskRecord>;
}

const states = new WeakMap<ExtensionHost, MusicState>();
const plans = new WeakMap<TaskRecord, MusicPlan>();

export function musicState(ctx: ExtensionHost): MusicState {
  let s = states.get(ctx);
  if (!s) {
    s = { audio: new Map(), claims: new Map(), personas: new Map() };
    states.set(ctx, s);
  }
  return s;
}

export function planOf(task: TaskRecord): MusicPlan | undefined {
  return plans.get(task);
}

export function setPlan(task: TaskRecord, plan: MusicPlan): void {
  plans.set(task, plan);
}

export function claimKey(workflow: MusicWorkflow, id: string): string {
  return `${workflow}:${id}`;
}
