import type { FileGot, NewFile } from '../port.js';
import type { WithMove } from './leases.js';
import { NOW_ISO } from './schema.js';

/**
 * What a move writes besides the job row, written by the move's own statement (leases.ts WithMove): a job's
 * result files, its files now on disk, its mark cleared by a new result. A refused move writes none of them.
 */

/** File rows of the job's results (again, when the job is fetched again), recording this worker. */
export const addFiles =
  (files: readonly NewFile[], worker: string): WithMove =>
  (p) => `INSERT INTO files (run_id, job_id, idx, name, url, type, content_type, expected_size, expires_at, state, worker)
    SELECT moved.run_id, moved.id, f.idx, f.name, f.url, f.type, f.content_type, f.expected_size, f.expires_at, 'pending', ${p(worker)}::text
      FROM moved, unnest(${p(files.map((f) => f.idx))}::int[], ${p(files.map((f) => f.name))}::text[], ${p(files.map((f) => f.url))}::text[],
        ${p(files.map((f) => f.type))}::text[], ${p(files.map((f) => f.content_type))}::text[], ${p(files.map((f) => f.expected_size))}::bigint[],
        ${p(files.map((f) => f.expires_at))}::bigint[]) AS f(idx, name, url, type, content_type, expected_size, expires_at)
    ON CONFLICT (run_id, job_id, idx) DO UPDATE SET name = EXCLUDED.name, url = EXCLUDED.url, type = EXCLUDED.type, content_type = EXCLUDED.content_type,
      expected_size = EXCLUDED.expected_size, expires_at = EXCLUDED.expires_at, state = 'pending', path = NULL, size = NULL, sha256 = NULL, worker = EXCLUDED.worker`;

/** Files of the job now on disk (or in the bucket), written by this worker. */
export const filesDone =
  (got: readonly FileGot[], worker: string): WithMove =>
  (p) => `UPDATE files fl SET path = g.path, size = g.size, sha256 = g.sha256, content_type = COALESCE(g.content_type, fl.content_type), state = 'done', worker = ${p(worker)}::text
      FROM moved, unnest(${p(got.map((f) => f.idx))}::int[], ${p(got.map((f) => f.path))}::text[], ${p(got.map((f) => f.size))}::bigint[],
        ${p(got.map((f) => f.sha256))}::text[], ${p(got.map((f) => f.content_type))}::text[]) AS g(idx, path, size, sha256, content_type)
     WHERE fl.run_id = moved.run_id AND fl.job_id = moved.id AND fl.idx = g.idx`;

/** A new result arrived: the job's current mark judged the one it replaced, so it is cleared (kept in its history). */
export const clearMark: WithMove = () => `INSERT INTO marks (run_id, job_id, n, mark, note, at)
    SELECT moved.run_id, moved.id, m.n + 1, NULL, 'cleared: a new result replaced the one marked ' || m.mark, ${NOW_ISO}
      FROM moved, LATERAL (SELECT n, mark FROM marks WHERE run_id = moved.run_id AND job_id = moved.id ORDER BY n DESC LIMIT 1) m
     WHERE m.mark IS NOT NULL AND m.mark <> ''`;
