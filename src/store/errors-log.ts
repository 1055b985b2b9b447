import type Database from 'better-sqlite3';
import type { Prepare } from './reads.js';

/**
 * Each job's errors over its attempts: one row each time an error is recorded on it (a state change that
 * names one, or a note such as a failed status read), with the attempt it belongs to and the state the job
 * went to. `last_error` on the job keeps only the latest; this keeps them all (`genbatch view` shows them).
 * Added beside schema version 1 by CREATE TABLE IF NOT EXISTS: an older state file gains it when a run
 * writes to it; readers of an older file see no history.
 */

export const ERRORS_TABLE = `CREATE TABLE IF NOT EXISTS job_errors (
  run_id INTEGER NOT NULL,
  job_id TEXT NOT NULL,
  n INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  state TEXT NOT NULL,
  error TEXT NOT NULL,
  at TEXT NOT NULL,
  PRIMARY KEY (run_id, job_id, n)
) WITHOUT ROWID;`;

export interface JobError {
  attempt: number;
  /** The state the job was in once the error was recorded. */
  state: string;
  error: string;
  at: string;
}

/** At most this many errors are kept per job (the oldest go first): a job retried for days stays small. */
export const ERRORS_KEPT = 50;

export function hasErrorsTable(db: Database.Database): boolean {
  return db.prepare(`SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'job_errors'`).get() !== undefined;
}

/** Record an error of a job in its current attempt and state (read from the job's row), keeping the latest ERRORS_KEPT. */
export function addJobError(stmt: Prepare, runId: number, jobId: string, error: string, at: string): void {
  stmt(
    `INSERT INTO job_errors (run_id, job_id, n, attempt, state, error, at)
     SELECT ?, ?, (SELECT COALESCE(MAX(n), 0) + 1 FROM job_errors WHERE run_id = ? AND job_id = ?), attempts, state, ?, ? FROM jobs WHERE run_id = ? AND id = ?`,
  ).run(runId, jobId, runId, jobId, error, at, runId, jobId);
  stmt('DELETE FROM job_errors WHERE run_id = ? AND job_id = ? AND n <= (SELECT MAX(n) FROM job_errors WHERE run_id = ? AND job_id = ?) - ?').run(runId, jobId, runId, jobId, ERRORS_KEPT);
}

/** A job's errors, oldest first. */
export function jobErrors(stmt: Prepare, runId: number, jobId: string): JobError[] {
  return stmt('SELECT attempt, state, error, at FROM job_errors WHERE run_id = ? AND job_id = ? ORDER BY n').all(runId, jobId) as JobError[];
}
