import type { FieldIssue } from '../types.js';
import { DEFAULT_MV, MUSIC_VERSIONS, uploadAudioMaxSeconds, type MusicVersion } from './limits.js';
import type { MusicWorkflow } from './results.js';

/**
 * Rules only the service can check, because they need facts about stored tasks
 * and tracks (durations, vocals, earlier requests). The sandbox calls these.
 */

export interface MusicWorkflowRule {
  /** What the input refers to: a track (task_id + audio_id), a whole task (task_id), or nothing. */
  source: 'track' | 'task' | null;
  /** The referred track must have vocals. */
  vocalsOnly: boolean;
  /** The operation runs once per track or per task; a repeat is a conflict. */
  oncePer: 'track' | 'task' | null;
  /** Status of a repeat: 409 where the contract shows it; 409 chosen for the other once-only workflows. */
  duplicateStatus: 409 | null;
  /** Input field that carries uploaded audio, subject to the 8-minute (V4_5ALL: 1-minute) limit. */
  uploadField: 'upload_url' | 'audio_url' | null;
}

const none: MusicWorkflowRule = { source: null, vocalsOnly: false, oncePer: null, duplicateStatus: null, uploadField: null };
const upload: MusicWorkflowRule = { ...none, uploadField: 'upload_url' };
const once = (source: 'track' | 'task'): MusicWorkflowRule => ({ ...none, source, oncePer: source, duplicateStatus: 409 });

export const MUSIC_RULES: Readonly<Record<MusicWorkflow, MusicWorkflowRule>> = {
  'generate-music': none,
  'extend-music': { ...none, source: 'track' },
  'upload-and-cover-audio': upload,
  'upload-and-extend-audio': upload,
  'add-instrumental': upload,
  'add-vocals': upload,
  'replace-section': { ...none, source: 'track' },
  'boost-music-style': none,
  'generate-lyrics': none,
  'get-timestamped-lyrics': { ...none, source: 'track', vocalsOnly: true },
  'convert-to-wav': once('track'),
  'create-music-video': once('track'),
  'generate-music-cover': once('task'),
  'generate-persona': once('track'),
  'separate-vocals': once('track'),
  'stem-split': once('track'),
  'upload-and-separate-vocals': { ...none, uploadField: 'audio_url' },
};

export interface TrackFacts {
  /** Duration of the referred track (task_id + audio_id), seconds. */
  trackSeconds?: number;
  /** Whether the referred track has vocals. */
  trackHasVocals?: boolean;
  /** Duration of the uploaded audio behind upload_url / audio_url, seconds. */
  uploadSeconds?: number;
}

function num(x: unknown): number | null {
  return typeof x === 'number' && Number.isFinite(x) ? x : null;
}

/**
 * Check a valid input against facts the service knows: replace-section's section
 * and extend-music's (upload-and-extend-audio's) continue_at inside the track (upload), vocals for timestamped lyrics,
 * and the uploaded-audio duration limit. Missing facts are not checked.
 */
export function checkAgainstTrack(workflow: MusicWorkflow, input: Record<string, unknown>, facts: TrackFacts): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const bad = (path: string, message: string) => issues.push({ path, message, type: 'validation_error' });
  const track = facts.trackSeconds;
  if (track !== undefined) {
    if (workflow === 'replace-section') {
      const start = num(input.infill_start_s);
      const end = num(input.infill_end_s);
      if (start !== null && start >= track) bad('input.infill_start_s', `must be inside the track (before ${track} seconds)`);
      if (end !== null && end > track) bad('input.infill_end_s', `must be inside the track (at most ${track} seconds)`);
    }
    if (workflow === 'extend-music') {
      const at = num(input.continue_at);
      if (at !== null && at > track) bad('input.continue_at', `must be inside the track (at most ${track} seconds)`);
    }
  }
  if (workflow === 'upload-and-extend-audio' && facts.uploadSeconds !== undefined) {
    const at = num(input.continue_at);
    if (at !== null && at > facts.uploadSeconds) bad('input.continue_at', `must be inside the uploaded audio (at most ${facts.uploadSeconds} seconds)`);
  }
  const rule = MUSIC_RULES[workflow];
  if (rule.vocalsOnly && facts.trackHasVocals === false) bad('input.audio_id', 'the track has no vocals (only tracks with vocals are supported)');
  if (rule.uploadField && facts.uploadSeconds !== undefined) {
    const mv = typeof input.mv === 'string' && (MUSIC_VERSIONS as readonly string[]).includes(input.mv) ? (input.mv as MusicVersion) : DEFAULT_MV;
    const max = uploadAudioMaxSeconds(mv);
    if (facts.uploadSeconds > max) {
      bad(`input.${rule.uploadField}`, `uploaded audio must be at most ${max / 60} minute${max === 60 ? '' : 's'}${mv === 'V4_5ALL' ? ' for V4_5ALL' : ''} (got ${facts.uploadSeconds} seconds)`);
    }
  }
  return issues;
}
