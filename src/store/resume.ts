import type Database from 'better-sqlite3';
import type { Prepare } from './reads.js';
import type { JobState } from './states.js';
import type { JobPatch } from './types.js';

/**
 * Resuming a run whose jobs an earlier process left in flight. Store calls
 * these with its cached statements, its run id and its transition().
 */

/** Store.transition: every state change goes through it. */
export type Transition = (jobId: string, from: JobState, to: JobState, patch: JobPatch, also?: () => void) => void;

/** After a crash between intent and response: every `submitting` job becomes `uncertain` (a chat job: `pending`). Returns the uncertain ones. */
export function recoverSubmitting(stmt: Prepare, runId: number, transition: Transition): string[] {
  const rows = stmt(`SELECT id, kind FROM jobs WHERE run_id = ? AND state = 'submitting'`).all(runId) as { id: string; kind: string }[];
  const ids: string[] = [];
  for (const r of rows) {
    // A chat call has no task id: nothing may exist to find later, so the call is simply made again.
    if (r.kind === 'chat') transition(r.id, 'submitting', 'pending', { last_error: 'the run stopped during the chat call; the call is made again' });
    else {
      transition(r.id, 'submitting', 'uncertain', { last_error: 'the run stopped after the submit was sent and before its answer arrived; the task may exist' });
      ids.push(r.id);
    }
  }
  return ids;
}

/**
 * The service that held this run's tasks is gone (an earlier in-process
 * sandbox): submitted, downloading and uncertain jobs go back to pending,
 * their task ids, results and file rows cleared. Returns the jobs moved.
 */
export function returnInFlight(db: Database.Database, stmt: Prepare, runId: number, reason: string, transition: Transition): Array<{ id: string; from: JobState }> {
  const rows = stmt(`SELECT id, state FROM jobs WHERE run_id = ? AND state IN ('submitted', 'downloading', 'uncertain') ORDER BY seq`).all(runId) as { id: string; state: JobState }[];
  const clear: JobPatch = { task_id: null, result: null, submitted_input: null, submitted_at: null, finished_at: null, expires_at: null, last_error: reason };
  db.transaction(() => {
    for (const r of rows) transition(r.id, r.state, 'pending', clear, () => stmt('DELETE FROM files WHERE run_id = ? AND job_id = ?').run(runId, r.id));
  })();
  return rows.map((r) => ({ id: r.id, from: r.state }));
}
