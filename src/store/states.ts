/**
 * Job states and the only changes allowed between them. A state changes only
 * through Store.transition(job, from, to, patch): one SQLite transaction,
 * `UPDATE ... WHERE state = from`, refused when no row matched or when the
 * change is not listed here.
 *
 *   pending     known, not yet sent (or sent and definitely not created)
 *   submitting  intent committed: the POST may be on the wire, no task id yet
 *   submitted   task id committed; waiting for the service to finish the task
 *   downloading task finished, result recorded; files being fetched
 *   done        every file on disk with size and sha256, result.json written
 *   failed      the service refused the job (400) or the task failed
 *   uncertain   a submit whose outcome is unknown; never resubmitted blindly
 *   expired     the results were gone (past their 24 h validity) before we got them
 *   skipped     no longer in the manifest (removed since an earlier run; was pending, failed or expired),
 *               or a job-graph parent ended without results (last_error: "skipped because job <id> ...")
 *   exists      the service answered 409: what this job asks for already exists (a music video or
 *               persona for that track, a once-per-track conversion); nothing was created
 */
export const JOB_STATES = [
  'pending',
  'submitting',
  'submitted',
  'downloading',
  'done',
  'failed',
  'uncertain',
  'expired',
  'skipped',
  'exists',
] as const;

export type JobState = (typeof JOB_STATES)[number];

/** from -> allowed targets. */
export const TRANSITIONS: Readonly<Record<JobState, readonly JobState[]>> = {
  // done: a for_each job (kind fanout) made its children; skipped: removed, or a graph parent ended without results.
  pending: ['submitting', 'skipped', 'failed', 'done'],
  // failed: 400; uncertain: ambiguous outcome or a crash after the intent; pending: definitely not created.
  // done: a chat call answered (no task to wait on).
  // exists: 409, what the job asks for already exists.
  submitting: ['submitted', 'failed', 'uncertain', 'pending', 'done', 'exists'],
  // downloading: finished; failed: task failed or unknown to the service; expired: results gone.
  // pending: the in-process sandbox that held the task is gone (a rerun with --sandbox starts a new one).
  // uncertain: the task a callback made it adopt is unknown to the service or another account's (a forged callback).
  submitted: ['downloading', 'failed', 'expired', 'pending', 'uncertain'],
  downloading: ['done', 'expired', 'failed', 'pending'],
  // Finished states go back to pending only when the job's spec changed (or it came back into the manifest);
  // done also when a new in-process sandbox runs pending jobs that use its results (Store.remakeAncestors).
  done: ['pending', 'skipped'],
  failed: ['pending', 'skipped'],
  expired: ['pending', 'skipped'],
  skipped: ['pending'],
  exists: ['pending', 'skipped'],
  // pending: --uncertain=resubmit; submitted: a late callback adopted the orphaned task.
  uncertain: ['pending', 'submitted'],
};

/** States a run does not work on any more. */
export const FINAL_STATES: readonly JobState[] = ['done', 'failed', 'expired', 'skipped', 'exists'];

/** States of a job-graph parent that end its pending descendants (they become skipped, naming why). */
export const PARENT_FAILED_STATES: readonly JobState[] = ['failed', 'expired', 'uncertain', 'skipped', 'exists'];

/** States in which a task exists (or may exist) at the service and work remains. */
export const ACTIVE_STATES: readonly JobState[] = ['submitting', 'submitted', 'downloading'];

export function isJobState(s: string): s is JobState {
  return (JOB_STATES as readonly string[]).includes(s);
}
