import { TransitionError } from '../errors.js';
import { nowIso } from './clock.js';
import type { Prepare } from './reads.js';
import { FINAL_STATES, JOB_STATES, TRANSITIONS, type JobState } from './states.js';
import { PATCH_COLUMNS, type JobInput, type JobPatch, type KnownJob, type SyncResult } from './types.js';

/**
 * One manifest job recorded in the state file (Store.syncJob), and the jobs
 * the manifest no longer names (Store.skipRemoved); the Store holds the sync
 * transaction and the set of ids seen.
 */

export interface SyncHost {
  stmt: Prepare;
  runId(): number;
  generation(): number;
  nextSeq(): number;
  /** A state change through transition(), recorded for the engine's events. */
  move(jobId: string, from: JobState, to: JobState, patch: JobPatch): void;
  /** Job graph: what was made from a job's old results is made again. */
  rerunDescendants(jobId: string): void;
  /** Job graph: a for_each child of this job is in flight (the job cannot make its children again yet). */
  childrenInFlight(jobId: string): boolean;
  /** --uncertain=resubmit: an uncertain job whose spec changed is sent again with the new spec. */
  resubmitUncertain(): boolean;
}

/**
 * Record one manifest job. New: pending. Same spec: untouched. Changed spec:
 * a finished job goes back to pending with the new spec; a pending one takes
 * the new spec; one in flight keeps running the spec it was sent with.
 */
export function syncJob(h: SyncHost, job: JobInput): SyncResult {
  const runId = h.runId();
  const row = h.stmt('SELECT state, kind, spec_hash, "where" AS w, estimated_credits AS c FROM jobs WHERE run_id = ? AND id = ?').get(runId, job.id) as KnownJob | undefined;
  if (row && row.spec_hash === job.specHash && row.state !== 'skipped' && row.w === job.where && row.c === job.estimatedCredits) return 'unchanged';
  const now = nowIso();
  if (!row) {
    h.stmt(
      'INSERT INTO jobs (run_id, id, seq, model, kind, "where", spec_hash, spec, state, created_at, updated_at, estimated_credits, generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(runId, job.id, h.nextSeq(), job.model, job.kind, job.where, job.specHash, job.spec, 'pending', now, now, job.estimatedCredits, h.generation());
    return 'new';
  }
  if (row.spec_hash === job.specHash) {
    if (row.state === 'skipped') {
      h.move(job.id, 'skipped', 'pending', { where: job.where, estimated_credits: job.estimatedCredits, generation: h.generation() });
      return 'changed';
    }
    if (row.w !== job.where || row.c !== job.estimatedCredits) {
      h.stmt('UPDATE jobs SET "where" = ?, estimated_credits = ? WHERE run_id = ? AND id = ?').run(job.where, job.estimatedCredits, runId, job.id);
    }
    return 'unchanged';
  }
  const finished = FINAL_STATES.includes(row.state);
  // A for_each job whose children are in flight: they finish what they were sent with (the new children would take
  // their ids); a later sync makes it again once they are finished.
  if (finished && row.kind === 'fanout' && h.childrenInFlight(job.id)) return 'deferred';
  // Uncertain, to be resubmitted anyway: it is sent with the manifest's spec, not the one it had.
  const resubmit = row.state === 'uncertain' && h.resubmitUncertain();
  if (finished || resubmit || row.state === 'pending') {
    const patch: JobPatch = {
      spec_hash: job.specHash,
      spec: job.spec,
      model: job.model,
      kind: job.kind,
      where: job.where,
      estimated_credits: job.estimatedCredits,
      generation: h.generation(),
      task_id: null,
      submitted_input: null,
      submitted_at: null,
      finished_at: null,
      expires_at: null,
      result: null,
      last_error: null,
    };
    if (resubmit) {
      h.move(job.id, 'uncertain', 'pending', { ...patch, last_error: 'resubmitted (--uncertain=resubmit) with its changed spec' });
    } else if (finished) {
      h.move(job.id, row.state, 'pending', patch);
    } else {
      // Still pending: it takes the new spec (no state change), guarded by the state it is in.
      const sets = PATCH_COLUMNS.filter((c) => c in patch).map((c) => `"${c}" = ?`);
      const res = h.stmt(`UPDATE jobs SET ${sets.join(', ')}, updated_at = ? WHERE run_id = ? AND id = ? AND state = 'pending'`).run(
        ...PATCH_COLUMNS.filter((c) => c in patch).map((c) => patch[c] ?? null),
        now,
        runId,
        job.id,
      );
      if (res.changes !== 1) throw new TransitionError(`job ${job.id}: expected state pending for a spec update`);
    }
    h.stmt('DELETE FROM files WHERE run_id = ? AND job_id = ?').run(runId, job.id);
    // Job graph: what was made from its old results is made again.
    if (finished) h.rerunDescendants(job.id);
    return finished || resubmit ? 'changed' : 'updated';
  }
  // In flight (submitting, submitted, downloading, uncertain): it finishes the spec it was sent with.
  return 'deferred';
}

/**
 * Jobs no longer in the manifest that may become skipped (skipRemoved): not
 * named by it (`seen`) and not a for_each child (`children`), in a state that
 * may become skipped, except done (a removed job's results stay).
 */
export function removedJobs(raw: Prepare, runId: number, seen: Set<string>, children: Set<string>): { id: string; state: JobState }[] {
  // Every state that may become skipped (TRANSITIONS), except done: a removed job's results stay.
  const from = JOB_STATES.filter((st) => st !== 'done' && TRANSITIONS[st].includes('skipped'));
  // In the order the earlier index (run_id, state, expires_at, seq) gave them; streamed (a first sync of 100,000 jobs
  // finds them all pending, and keeps none).
  const out: { id: string; state: JobState }[] = [];
  const rows = raw(`SELECT id, state FROM jobs WHERE run_id = ? AND state IN (${from.map(() => '?').join(', ')}) ORDER BY state, expires_at, seq`).iterate(runId, ...from) as IterableIterator<[string, JobState]>;
  for (const [id, state] of rows) if (!seen.has(id) && !children.has(id)) out.push({ id, state });
  return out;
}
