import type { Prepare } from './reads.js';

/**
 * The result files of earlier generations, so that `genbatch prune` removes only files genbatch made
 * (src/engine/prune.ts):
 *   retired_files   a result file whose record left `files` (the job was reset to be sent again): kept by a
 *                   trigger with its path, size and sha256 until the engine moves it aside
 *   previous_files  a file moved into out/<job>/previous-<n>/ (`dir`), at its new path, with the size and
 *                   sha256 it had when downloaded; removed by prune together with the file
 * A file moved aside that neither table records (put there by someone else, or moved by a genbatch before
 * these tables) is never touched by prune, only reported.
 */
export const PREVIOUS_TABLES = `
CREATE TABLE IF NOT EXISTS retired_files (
  run_id INTEGER NOT NULL,
  job_id TEXT NOT NULL,
  path TEXT NOT NULL,
  size INTEGER,
  sha256 TEXT,
  PRIMARY KEY (run_id, job_id, path)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS previous_files (
  run_id INTEGER NOT NULL,
  job_id TEXT NOT NULL,
  dir TEXT NOT NULL,
  path TEXT NOT NULL,
  size INTEGER,
  sha256 TEXT,
  PRIMARY KEY (run_id, job_id, path)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS files_retired BEFORE DELETE ON files
  WHEN OLD.state = 'done' AND OLD.path IS NOT NULL
  BEGIN
    INSERT OR REPLACE INTO retired_files (run_id, job_id, path, size, sha256) VALUES (OLD.run_id, OLD.job_id, OLD.path, OLD.size, OLD.sha256);
  END;`;

export interface PreviousFile {
  job_id: string;
  dir: string;
  path: string;
  size: number | null;
  sha256: string | null;
}

/** A file moved aside that genbatch made but `files` does not list (the job's result.json), with its new path. */
export interface KeptFile {
  path: string;
  size: number;
  sha256: string;
}

/**
 * The entries `names` of `folder` went to `target` (moveAsidePrevious): the retired files among them (or under
 * them) become previous_files at their new paths, and so does `also`. Inside the caller's transaction.
 */
export function keepPrevious(stmt: Prepare, runId: number, jobId: string, folder: string, target: string, names: readonly string[], also: KeptFile | null): number {
  let kept = 0;
  if (also !== null) {
    stmt('INSERT OR REPLACE INTO previous_files (run_id, job_id, dir, path, size, sha256) VALUES (?, ?, ?, ?, ?, ?)').run(runId, jobId, target, also.path, also.size, also.sha256);
    kept++;
  }
  const rows = stmt('SELECT path, size, sha256 FROM retired_files WHERE run_id = ? AND job_id = ?').all(runId, jobId) as Array<{ path: string; size: number | null; sha256: string | null }>;
  for (const r of rows) {
    const name = names.find((n) => r.path === `${folder}/${n}` || r.path.startsWith(`${folder}/${n}/`));
    if (name === undefined) continue;
    const path = `${target}/${r.path.slice(folder.length + 1)}`;
    stmt('INSERT OR REPLACE INTO previous_files (run_id, job_id, dir, path, size, sha256) VALUES (?, ?, ?, ?, ?, ?)').run(runId, jobId, target, path, r.size, r.sha256);
    stmt('DELETE FROM retired_files WHERE run_id = ? AND job_id = ? AND path = ?').run(runId, jobId, r.path);
    kept++;
  }
  return kept;
}

/** Every recorded earlier-generation file of the run, by job and folder. */
export function previousFiles(stmt: Prepare, runId: number): PreviousFile[] {
  return stmt('SELECT job_id, dir, path, size, sha256 FROM previous_files WHERE run_id = ? ORDER BY job_id, dir, path').all(runId) as PreviousFile[];
}

export function dropPrevious(stmt: Prepare, runId: number, jobId: string, path: string): void {
  stmt('DELETE FROM previous_files WHERE run_id = ? AND job_id = ? AND path = ?').run(runId, jobId, path);
}
