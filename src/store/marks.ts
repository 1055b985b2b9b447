import type Database from 'better-sqlite3';
import type { Prepare } from './reads.js';

/**
 * Review marks (`genbatch mark`): a job's result judged approved or rejected, with an optional note. They live
 * in the `marks` table of the state file, never in the manifest, and are a history: every mark, and every
 * clearing, is one more row (n = 1, 2, ... per job); a job's current mark is its latest row, none when that row
 * clears it (mark NULL). A manifest sync never touches them; a new result of the job (it reaches `done` again,
 * e.g. after `run --redo rejected`) clears its current mark (Store.transition), since the mark judged the
 * result it replaced. Rows of jobs no longer in the manifest stay (history).
 */

export const MARK_STATES = ['approved', 'rejected'] as const;
export type MarkState = (typeof MARK_STATES)[number];

/** A job's current mark, as report.json shows it. */
export interface Mark {
  state: MarkState;
  note: string | null;
  at: string;
}

/** One row of a job's mark history (mark null: the mark was cleared, the note saying why). */
export interface MarkEvent {
  mark: MarkState | null;
  note: string | null;
  at: string;
}

export const MARKS_TABLE = `CREATE TABLE IF NOT EXISTS marks (
  run_id INTEGER NOT NULL,
  job_id TEXT NOT NULL,
  n INTEGER NOT NULL,
  mark TEXT,
  note TEXT,
  at TEXT NOT NULL,
  PRIMARY KEY (run_id, job_id, n)
) WITHOUT ROWID;`;

/** The table in a state file written before marks existed (the schema version stays 1: an older genbatch ignores it). */
export function ensureMarksTable(db: Database.Database): void {
  if (!hasMarksTable(db)) db.exec(MARKS_TABLE);
}

export function hasMarksTable(db: Database.Database): boolean {
  return db.prepare(`SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'marks'`).get() !== undefined;
}

const LATEST = 'SELECT mark, note, at FROM marks WHERE run_id = ? AND job_id = ? ORDER BY n DESC LIMIT 1';

/** One more row of a job's history. */
export function addMark(stmt: Prepare, runId: number, jobId: string, mark: MarkState | null, note: string | null, at: string): void {
  stmt('INSERT INTO marks (run_id, job_id, n, mark, note, at) VALUES (?, ?, (SELECT COALESCE(MAX(n), 0) + 1 FROM marks WHERE run_id = ? AND job_id = ?), ?, ?, ?)').run(
    runId,
    jobId,
    runId,
    jobId,
    mark,
    note,
    at,
  );
}

/** The job's current mark (null: none, or cleared). */
export function currentMark(stmt: Prepare, runId: number, jobId: string): Mark | null {
  const row = stmt(LATEST).get(runId, jobId) as MarkEvent | undefined;
  return row && row.mark !== null ? { state: row.mark, note: row.note, at: row.at } : null;
}

/** Every job of the run with a current mark (one pass over the table: the reports, export, --redo rejected). */
export function currentMarks(stmt: Prepare, runId: number): Map<string, Mark> {
  const out = new Map<string, Mark>();
  const rows = stmt('SELECT job_id, mark, note, at FROM marks WHERE run_id = ? ORDER BY job_id, n').all(runId) as Array<MarkEvent & { job_id: string }>;
  for (const r of rows) {
    if (r.mark === null) out.delete(r.job_id);
    else out.set(r.job_id, { state: r.mark, note: r.note, at: r.at });
  }
  return out;
}

/** A job's whole history, oldest first. */
export function markHistory(stmt: Prepare, runId: number, jobId: string): MarkEvent[] {
  return stmt('SELECT mark, note, at FROM marks WHERE run_id = ? AND job_id = ? ORDER BY n').all(runId, jobId) as MarkEvent[];
}
