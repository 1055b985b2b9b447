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

/**
 * The service that held this run's tasks is gone (an earlier in-process sandbox), and with it the results that
 * job-graph references point at (task ids, audio ids, file URLs of its tasks): every finished job that a pending
 * job waits for (or whose for_each made it), and their own ancestors, is made again (done -> pending, results
 * cleared), and so is what was made from them (rerunDescendants). Without it such a job would be sent with
 * references the new sandbox does not know (404: task not found). Returns the jobs moved to pending here.
 */
export function remakeAncestors(stmt: Prepare, runId: number, reason: string, transition: Transition, rerunDescendants: (id: string) => void): string[] {
  const parents = stmt(`SELECT l.parent_id AS id, p.state AS state FROM job_links l JOIN jobs p ON p.run_id = l.run_id AND p.id = l.parent_id WHERE l.run_id = ? AND l.job_id = ?`);
  const pending = stmt(`SELECT id FROM jobs WHERE run_id = ? AND state = 'pending' ORDER BY seq`).all(runId) as { id: string }[];
  const roots: string[] = [];
  const seen = new Set<string>();
  const queue = pending.map((r) => r.id);
  while (queue.length > 0) {
    const id = queue.shift()!;
    // Every link: needs and inherited (the parents it takes results from), child (the for_each job that made it from its list).
    for (const p of parents.all(runId, id) as { id: string; state: JobState }[]) {
      if (seen.has(p.id)) continue;
      seen.add(p.id);
      if (p.state === 'done') roots.push(p.id);
      queue.push(p.id);
    }
  }
  const moved: string[] = [];
  const state = stmt('SELECT state FROM jobs WHERE run_id = ? AND id = ?');
  const clear: JobPatch = { task_id: null, result: null, submitted_input: null, submitted_at: null, finished_at: null, expires_at: null, last_error: reason };
  for (const id of roots) {
    // Made again already as a descendant of an earlier one.
    if ((state.get(runId, id) as { state: JobState } | undefined)?.state !== 'done') continue;
    transition(id, 'done', 'pending', clear, () => {
      stmt('DELETE FROM files WHERE run_id = ? AND job_id = ?').run(runId, id);
      rerunDescendants(id);
    });
    moved.push(id);
  }
  return moved;
}
