import { isMusicWorkflow, type MusicWorkflow } from '../../models/music/index.js';
import type { ModelSpec } from '../../models/index.js';
import { isoNoZone } from '../clock.js';
import type { ExtensionHost, SandboxExtension } from '../hooks.js';
import type { TaskRecord, TaskResult } from '../tasks.js';
import { checkMusic, claimOf, isRefusal, resolveSource } from './checks.js';
import { makePlan } from './plan.js';
import { musicResult } from './results.js';
import { musicState, planOf, type MusicPlan } from './state.js';

/**
 * The music workflows of the sandbox (every `model` of the contract's music
 * table). Results are read at GET /api/generate/detail/music; their callbacks
 * omit `progress` (the core does this for every spec with resultEndpoint 'music').
 * add-instrumental sends two staged callbacks before the final one (three in
 * all: text generated at 20% of the run, first track done at 60%, all tracks
 * done); staged bodies are the status body with status `running` and an extra
 * `callback_type` of `text` or `first` (choice: the contract does not show them).
 */

function workflowOf(spec: ModelSpec): MusicWorkflow {
  if (!isMusicWorkflow(spec.id)) throw new Error(`not a music workflow: ${spec.id}`);
  return spec.id;
}

function planned(ctx: ExtensionHost, task: TaskRecord): MusicPlan {
  return planOf(task) ?? makePlan(ctx, task, workflowOf(task.spec), null);
}

/** add-instrumental's stages: text generated at 20% of the run, first track done at 60%. */
function stageAt(task: TaskRecord, share: number): number {
  return task.startAt + (task.runEndAt - task.startAt) * share;
}

/** The first track's entry and its files (audio, cover), as the `first` staged callback hands them out. */
function firstTrack(ctx: ExtensionHost, task: TaskRecord): TaskResult | null {
  const full = musicResult(ctx, task, planned(ctx, task));
  const first = full.files[0];
  if (!first) return null;
  const urls = Object.values(first).filter((v): v is string => typeof v === 'string' && v.includes(`/files/${task.id}/`));
  const names = new Set(urls.map((u) => u.slice(u.lastIndexOf('/') + 1)));
  return { files: [first], blobs: full.blobs.filter((b) => names.has(b.name)) };
}

export const musicExtension: SandboxExtension = {
  name: 'music',
  matches: (spec) => spec.family === 'music' && isMusicWorkflow(spec.id),

  check: (ctx, call) => checkMusic(ctx, call.account, workflowOf(call.spec), call.input),

  failure: (_ctx, task) => {
    // separate-vocals always returns both stems (its schema has no null stem), so it is never partial.
    if (task.spec.id === 'separate-vocals') task.delivered = task.asked;
    return null;
  },

  created: (ctx, task) => {
    const wf = workflowOf(task.spec);
    const source = resolveSource(ctx, task.account, wf, task.input, ctx.now());
    const plan = makePlan(ctx, task, wf, isRefusal(source) ? null : source);
    const state = musicState(ctx);
    for (const track of plan.tracks) state.audio.set(track.audioId, { task, track });
    const claim = claimOf(wf, task.input);
    if (claim) state.claims.set(claim, task);
    if (plan.personaId) state.personas.set(plan.personaId, task);
  },

  result: (ctx, task) => musicResult(ctx, task, planned(ctx, task)),

  stagedCallbacks: (ctx, task) => {
    if (task.spec.id !== 'add-instrumental') return [];
    const body = (stage: 'text' | 'first', withFirst: boolean) => () => ({
      code: 200,
      data: {
        task_id: task.id,
        status: 'running',
        files: withFirst ? (firstTrack(ctx, task)?.files ?? []) : [],
        created_time: isoNoZone(task.createdAt),
        error_message: null,
        callback_type: stage,
      },
    });
    const stages: Array<{ at: number; body: () => unknown }> = [];
    const textAt = stageAt(task, 0.2);
    const firstAt = stageAt(task, 0.6);
    if (textAt < task.endAt) stages.push({ at: textAt, body: body('text', false) });
    if (task.errorMessage === null && firstAt < task.endAt) stages.push({ at: firstAt, body: body('first', true) });
    return stages;
  },

  // The `first` callback's URLs serve from its moment on (the task will not fail: it was sent).
  earlyResult: (ctx, task, now) => {
    if (task.spec.id !== 'add-instrumental' || task.errorMessage !== null || now < stageAt(task, 0.6)) return null;
    return firstTrack(ctx, task);
  },
};
