import type Database from 'better-sqlite3';
import type { JobState } from './states.js';
import type { JobRow, SummaryRow } from './types.js';

/**
 * Plain reads of one run's jobs (the engine's queue, status and reports).
 * Store calls these with its cached statements (`stmt`) and its run id.
 */

export type Prepare = (sql: string) => Database.Statement;

/** The task result JSON last read for a job, or null. */
export function resultOf(stmt: Prepare, runId: number, jobId: string): string | null {
  const r = stmt('SELECT result FROM jobs WHERE run_id = ? AND id = ?').get(runId, jobId) as { result: string | null } | undefined;
  return r?.result ?? null;
}

export function getJob(stmt: Prepare, runId: number, jobId: string): JobRow | undefined {
  return stmt('SELECT * FROM jobs WHERE run_id = ? AND id = ?').get(runId, jobId) as JobRow | undefined;
}

/**
 * Up to `limit` ready pending jobs after sequence number `afterSeq`, in
 * manifest order: a job with graph parents is ready when every parent is done.
 */
export function nextPending(stmt: Prepare, runId: number, afterSeq: number, limit: number): JobRow[] {
  return stmt(
    `SELECT * FROM jobs j WHERE run_id = ? AND state = 'pending' AND seq > ?
         AND NOT EXISTS (SELECT 1 FROM job_links l JOIN jobs p ON p.run_id = l.run_id AND p.id = l.parent_id WHERE l.run_id = j.run_id AND l.job_id = j.id AND l.kind != 'child' AND p.state != 'done')
       ORDER BY seq LIMIT ?`,
  ).all(runId, afterSeq, limit) as JobRow[];
}

/** Jobs in one state, in manifest order (iterated lazily). */
export function jobsIn(db: Database.Database, runId: number, state: JobState): IterableIterator<JobRow> {
  // Pending jobs through the partial index jobs_pending (a bound state could not use it); other states are read once per run.
  if (state === 'pending') return db.prepare(`SELECT * FROM jobs WHERE run_id = ? AND state = 'pending' ORDER BY seq`).iterate(runId) as IterableIterator<JobRow>;
  // `+seq`: the run's rows by primary key, the few that match sorted (not every row looked up through jobs_by_seq).
  return db.prepare(`SELECT * FROM jobs WHERE run_id = ? AND state = ? ORDER BY +seq`).iterate(runId, state) as IterableIterator<JobRow>;
}

/** Every job of the run, in manifest order. */
export function allJobs(db: Database.Database, runId: number): IterableIterator<JobRow> {
  return db.prepare(`SELECT * FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? ORDER BY seq`).iterate(runId) as IterableIterator<JobRow>;
}

/** Every job of the run, in manifest order, without the large spec and input columns (reports, status). */
export function summaryRows(db: Database.Database, runId: number): IterableIterator<SummaryRow> {
  return db
    .prepare(
      `SELECT id, model, kind, "where", state, task_id, attempts, submitted_at, finished_at, last_error, estimated_credits FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? ORDER BY seq`,
    )
    .iterate(runId) as IterableIterator<SummaryRow>;
}

export function counts(stmt: Prepare, runId: number): Record<JobState, number> {
  const out = { pending: 0, submitting: 0, submitted: 0, downloading: 0, done: 0, failed: 0, uncertain: 0, expired: 0, skipped: 0, exists: 0 } as Record<JobState, number>;
  for (const r of stmt('SELECT state, COUNT(*) AS n FROM jobs WHERE run_id = ? GROUP BY state').all(runId) as { state: JobState; n: number }[]) out[r.state] = r.n;
  return out;
}

export function estimate(stmt: Prepare, runId: number): { known: number; unknown: number } {
  const r = stmt(
    `SELECT COALESCE(SUM(estimated_credits), 0) AS known, SUM(CASE WHEN estimated_credits IS NULL THEN 1 ELSE 0 END) AS unknown FROM jobs WHERE run_id = ? AND state != 'skipped' AND NOT (kind = 'fanout' AND state = 'done')`,
  ).get(runId) as { known: number; unknown: number | null };
  return { known: r.known, unknown: r.unknown ?? 0 };
}

/** Pending jobs whose manifest entry names its own callback_url. */
export function pendingWithOwnCallback(stmt: Prepare, runId: number): number {
  const r = stmt(`SELECT COUNT(*) AS n FROM jobs WHERE run_id = ? AND state = 'pending' AND json_extract(spec, '$.callback_url') IS NOT NULL`).get(runId) as { n: number };
  return r.n;
}

/** Estimate of the work this run will submit (pending jobs only). */
export function pendingEstimate(stmt: Prepare, runId: number): { known: number; unknown: number } {
  const r = stmt(
    `SELECT COALESCE(SUM(estimated_credits), 0) AS known, SUM(CASE WHEN estimated_credits IS NULL THEN 1 ELSE 0 END) AS unknown FROM jobs WHERE run_id = ? AND state = 'pending'`,
  ).get(runId) as { known: number; unknown: number | null };
  return { known: r.known, unknown: r.unknown ?? 0 };
}
