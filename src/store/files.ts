import type { Prepare } from './reads.js';
import type { FileRow } from './types.js';

/**
 * The `files` rows of a run's jobs (one per result file) and the `uploads`
 * table (shared by every run in the state file). Store calls these with its
 * cached statements (`stmt`) and its run id.
 */

export function addFiles(stmt: Prepare, runId: number, jobId: string, files: Omit<FileRow, 'job_id' | 'path' | 'size' | 'sha256' | 'state'>[]): void {
  const ins = stmt(
    'INSERT OR REPLACE INTO files (run_id, job_id, idx, name, url, type, content_type, expected_size, expires_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  for (const f of files) ins.run(runId, jobId, f.idx, f.name, f.url, f.type, f.content_type, f.expected_size, f.expires_at, 'pending');
}

export function fileDone(stmt: Prepare, runId: number, jobId: string, idx: number, got: { path: string; size: number; sha256: string; content_type: string | null }): void {
  stmt(`UPDATE files SET path = ?, size = ?, sha256 = ?, content_type = COALESCE(?, content_type), state = 'done' WHERE run_id = ? AND job_id = ? AND idx = ?`).run(
    got.path,
    got.size,
    got.sha256,
    got.content_type,
    runId,
    jobId,
    idx,
  );
}

type FileTuple = [string, number, string, string | null, string, string | null, number | null, string | null, number | null, string | null, number | null, 'pending' | 'done'];

/** The files of a job, read in raw mode (`raw`: a raw statement) and made objects here (see reads.ts). */
export function filesOf(raw: Prepare, runId: number, jobId: string): FileRow[] {
  const rows = raw('SELECT job_id, idx, name, url, type, content_type, expected_size, path, size, sha256, expires_at, state FROM files WHERE run_id = ? AND job_id = ? ORDER BY idx').all(
    runId,
    jobId,
  ) as FileTuple[];
  return rows.map((r) => ({
    job_id: r[0],
    idx: r[1],
    name: r[2],
    url: r[3],
    type: r[4],
    content_type: r[5],
    expected_size: r[6],
    path: r[7],
    size: r[8],
    sha256: r[9],
    expires_at: r[10],
    state: r[11],
  }));
}

// ---- uploads (shared by every run in this file) ----

/** A previous upload of this content to this service (base URL) still younger than maxAgeMs. */
export function findUpload(stmt: Prepare, baseUrl: string, sha256: string, maxAgeMs: number): string | null {
  const r = stmt('SELECT file_url, uploaded_at FROM uploads WHERE base_url = ? AND sha256 = ?').get(baseUrl, sha256) as { file_url: string; uploaded_at: number } | undefined;
  if (!r || Date.now() - r.uploaded_at > maxAgeMs) return null;
  return r.file_url;
}

export function recordUpload(stmt: Prepare, baseUrl: string, sha256: string, fileUrl: string): void {
  stmt('INSERT INTO uploads (base_url, sha256, file_url, uploaded_at) VALUES (?, ?, ?, ?) ON CONFLICT(base_url, sha256) DO UPDATE SET file_url = excluded.file_url, uploaded_at = excluded.uploaded_at').run(
    baseUrl,
    sha256,
    fileUrl,
    Date.now(),
  );
}
