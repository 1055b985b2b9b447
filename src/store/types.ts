import type { JobState } from './states.js';

/** Rows and inputs of the state file. */

export interface JobRow {
  id: string;
  seq: number;
  model: string;
  kind: string;
  where: string;
  spec_hash: string;
  /** JSON: {model, input, callback_url?} as in the manifest (local paths). */
  spec: string;
  /** JSON: the input actually sent (uploaded URLs in place of local paths). */
  submitted_input: string | null;
  state: JobState;
  task_id: string | null;
  attempts: number;
  created_at: string;
  updated_at: string;
  submitted_at: string | null;
  finished_at: string | null;
  /** ms since epoch: when the results stop being downloadable. */
  expires_at: number | null;
  last_error: string | null;
  /** JSON: the service's Task as last read. */
  result: string | null;
  estimated_credits: number | null;
  /** 1: failed because the service refused the input (read only while state is `failed`). */
  permanent: number;
  /** When the job last became uncertain (ISO-8601). */
  uncertain_at: string | null;
  /** The invocation that last sent it (null: not sent since the column exists; PostgreSQL runs: not numbered). */
  sent_by?: number | null;
  /** Its expected price when sent. */
  expected_credits?: number | null;
}

/** What resuming a job already at the service needs (WorkStore.takeOver): not its large spec, input and result. */
export type TakenJob = Pick<JobRow, 'id' | 'state' | 'task_id' | 'model' | 'submitted_at' | 'expires_at'>;

/** The columns of a job that reports and status need (not the large spec, input and result). */
export type SummaryRow = Pick<JobRow, 'id' | 'model' | 'kind' | 'where' | 'state' | 'task_id' | 'attempts' | 'submitted_at' | 'finished_at' | 'last_error' | 'estimated_credits' | 'permanent'>;

export interface FileRow {
  job_id: string;
  idx: number;
  name: string;
  /** Null for text results written locally. */
  url: string | null;
  type: string;
  content_type: string | null;
  expected_size: number | null;
  /** Path relative to the output folder once on disk. */
  path: string | null;
  size: number | null;
  sha256: string | null;
  expires_at: number | null;
  state: 'pending' | 'done';
}

export interface RunRow {
  id: number;
  manifest: string;
  out_dir: string;
  base_url: string | null;
  sandbox: number;
  started_at: string | null;
  finished_at: string | null;
  balance_before: number | null;
  balance_after: number | null;
  user_prices: number;
  generation: number;
}

/**
 * One `genbatch run` of a run that had work that can move the balance (src/store/invocations.ts):
 * the balance read before its work and after it, with the times the readings were taken.
 */
export interface InvocationRow {
  run_id: number;
  /** 1, 2, ... within the run. */
  n: number;
  started_at: string;
  /** Null while it runs, or when it was stopped before its end (killed). */
  finished_at: string | null;
  balance_before: number | null;
  balance_before_at: string | null;
  balance_after: number | null;
  balance_after_at: string | null;
  /** Submit requests it started (Pipeline.submitsSent); null for readings kept from a state file written before this table. */
  submits: number | null;
}

/** Columns a transition may set besides the state. */
export interface JobPatch {
  task_id?: string | null;
  /** Add this many to attempts. */
  attemptsInc?: number;
  submitted_input?: string | null;
  submitted_at?: string | null;
  finished_at?: string | null;
  expires_at?: number | null;
  last_error?: string | null;
  result?: string | null;
  spec_hash?: string;
  spec?: string;
  model?: string;
  kind?: string;
  where?: string;
  estimated_credits?: number | null;
  /** The sync generation that last (re)wrote the job. */
  generation?: number;
  /** Its expected price when sent (the submit intent): the price observed for its class in this run, else its estimate. */
  expected_credits?: number | null;
  /** 1: the service refused the input (a move into `failed`; 0 when not given, see impliedPatch). */
  permanent?: number;
  /** When the job became uncertain (a move into `uncertain`: now when not given, see impliedPatch). */
  uncertain_at?: string | null;
}

/**
 * What every move into `to` writes besides its patch, on both stores: into `failed`, `permanent` (0 unless the
 * patch says 1), and into `pending` (the way out of `failed`) 0, so the mark of an earlier failure never stays;
 * into `uncertain`, `uncertain_at` (now).
 */
export function impliedPatch(to: string, patch: JobPatch, now: () => string): JobPatch {
  if ((to === 'failed' || to === 'pending') && !('permanent' in patch)) return { ...patch, permanent: 0 };
  if (to === 'uncertain' && !('uncertain_at' in patch)) return { ...patch, uncertain_at: now() };
  return patch;
}

/** Columns a transition may set besides the state and attempts. */
export const PATCH_COLUMNS = ['task_id', 'submitted_input', 'submitted_at', 'finished_at', 'expires_at', 'last_error', 'result', 'spec_hash', 'spec', 'model', 'kind', 'where', 'estimated_credits', 'generation', 'permanent', 'uncertain_at', 'expected_credits'] as const;

/** What a sync needs to know about a job already in the store. */
export interface KnownJob {
  state: JobState;
  kind: string;
  spec_hash: string;
  w: string;
  c: number | null;
}

export interface JobInput {
  id: string;
  model: string;
  kind: string;
  where: string;
  specHash: string;
  spec: string;
  estimatedCredits: number | null;
}

/** What syncJob did with one manifest job. */
/**
 * What a sync did with one manifest job. `deferred`: in flight (submitting, submitted, downloading,
 * uncertain) with another spec than the one it was sent with; it finishes that one and a later sync
 * applies the new spec (so this sync must not be remembered as final: src/engine/sync-key.ts).
 */
export type SyncResult = 'new' | 'unchanged' | 'changed' | 'updated' | 'deferred';

