import { MUSIC_RULES, checkAgainstTrack, type MusicWorkflow, type TrackFacts } from '../../models/music/index.js';
import type { Account } from '../accounts.js';
import type { ExtensionHost, Refusal } from '../hooks.js';
import { stateAt, type TaskRecord } from '../tasks.js';
import { knownAudioSeconds, TRACK_WORKFLOWS } from './plan.js';
import { claimKey, musicState, planOf, type MusicPlan } from './state.js';

/**
 * Service-side checks of a music submit, before it is charged:
 *  - the task_id / audio_id it acts on exist (404), belong to the key (403),
 *    come from a finished track workflow (400 validation_error otherwise);
 *  - extend-music names its track by audio_id alone (looked up across the key's tasks);
 *  - checkAgainstTrack: replace-section's section and extend-music's continue_at
 *    inside the track, the uploaded-audio length limit, and vocals for
 *    get-timestamped-lyrics (choice: an instrumental track is refused at submit
 *    with 400 validation_error on input.audio_id, nothing charged, rather than a failed task);
 *  - once-per-track / once-per-task workflows (MUSIC_RULES): a repeat while an
 *    earlier one is pending or finished answers 409 (a failed one may be redone);
 *  - persona_id must be a finished persona of the same key (404 / 403).
 */

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

const notFound = (message: string): Refusal => ({ status: 404, type: 'resource_not_found_error', message });
const forbidden = (message: string): Refusal => ({ status: 403, type: 'permission_denied_error', message });
const invalid = (message: string): Refusal => ({ status: 400, type: 'validation_error', message });

const DONE_WORD: Partial<Record<MusicWorkflow, string>> = {
  'convert-to-wav': 'a WAV file was already made',
  'create-music-video': 'a music video already exists',
  'generate-music-cover': 'covers were already generated',
  'generate-persona': 'a persona already exists',
  'separate-vocals': 'vocals were already separated',
  'stem-split': 'stems were already split',
};

/** The source a submit acts on, or the refusal. */
export function resolveSource(ctx: ExtensionHost, account: Account, workflow: MusicWorkflow, input: Record<string, unknown>, now: number): MusicPlan['source'] | Refusal {
  const rule = MUSIC_RULES[workflow];
  if (!rule.source) return null;
  if (workflow === 'extend-music') {
    const audioId = str(input.audio_id);
    const ref = musicState(ctx).audio.get(audioId);
    if (!ref) return notFound(`input.audio_id: no track "${audioId}"`);
    if (ref.task.account !== account) return forbidden(`input.audio_id: track "${audioId}" belongs to another user`);
    return ready(ref.task, now) ?? { task: ref.task, track: ref.track };
  }
  const taskId = str(input.task_id);
  const task = ctx.tasks.get(taskId);
  if (!task) return notFound(`input.task_id: task ${taskId} not found`);
  if (task.account !== account) return forbidden(`input.task_id: task ${taskId} belongs to another user`);
  const plan = planOf(task);
  if (!plan || !TRACK_WORKFLOWS.has(plan.workflow)) return invalid(`input.task_id: task ${taskId} is a ${task.spec.id} task, not a music task with tracks`);
  const notReady = ready(task, now);
  if (notReady) return notReady;
  if (rule.source === 'task') return { task, track: null };
  const audioId = str(input.audio_id);
  const track = plan.tracks.find((t) => t.audioId === audioId);
  if (!track) return notFound(`input.audio_id: no track "${audioId}" in task ${taskId}`);
  return { task, track };
}

function ready(task: TaskRecord, now: number): Refusal | null {
  const state = stateAt(task, now);
  if (state === 'finished') return null;
  if (state === 'failed') return invalid(`input.task_id: task ${task.id} failed; it has no tracks`);
  return invalid(`input.task_id: task ${task.id} is not finished yet (status ${state}); submit this once it is finished`);
}

export function isRefusal(x: unknown): x is Refusal {
  return typeof x === 'object' && x !== null && 'status' in x && 'message' in x;
}

/** The key of the once-per claim a submit makes, or null. */
export function claimOf(workflow: MusicWorkflow, input: Record<string, unknown>): string | null {
  const rule = MUSIC_RULES[workflow];
  if (rule.oncePer === 'track') return claimKey(workflow, str(input.audio_id));
  if (rule.oncePer === 'task') return claimKey(workflow, str(input.task_id));
  return null;
}

export function checkMusic(ctx: ExtensionHost, account: Account, workflow: MusicWorkflow, input: Record<string, unknown>): Refusal | null {
  const now = ctx.now();
  const state = musicState(ctx);
  const persona = str(input.persona_id);
  if (persona) {
    const owner = state.personas.get(persona);
    if (!owner || stateAt(owner, now) !== 'finished') return notFound(`input.persona_id: no persona "${persona}" (make one with generate-persona and wait until it is finished)`);
    if (owner.account !== account) return forbidden(`input.persona_id: persona "${persona}" belongs to another user`);
  }
  const source = resolveSource(ctx, account, workflow, input, now);
  if (isRefusal(source)) return source;

  const facts: TrackFacts = {};
  if (source?.track) {
    facts.trackSeconds = source.track.seconds;
    facts.trackHasVocals = source.track.hasVocals;
  }
  const rule = MUSIC_RULES[workflow];
  if (rule.uploadField) {
    const seconds = knownAudioSeconds(ctx, str(input[rule.uploadField]));
    if (seconds !== undefined) facts.uploadSeconds = seconds;
  }
  const issues = checkAgainstTrack(workflow, input, facts);
  if (issues.length > 0) return invalid(issues.map((i) => `${i.path}: ${i.message}`).join('; '));

  const claim = claimOf(workflow, input);
  const earlier = claim ? state.claims.get(claim) : undefined;
  if (earlier && stateAt(earlier, now) !== 'failed') {
    const what = rule.oncePer === 'task' ? `task ${str(input.task_id)}` : `track ${str(input.audio_id)}`;
    return { status: 409, type: 'conflict_error', message: `${DONE_WORD[workflow] ?? 'already done'} for ${what} (task ${earlier.id}); ${workflow} runs once per ${rule.oncePer}` };
  }
  return null;
}
