/** A finished job's result.json and its text results, for the disk (fetch.ts) and the bucket (fetch-bucket.ts). */
import { findModel } from '../../models/index.js';
import type { FileRow, JobRow } from '../../store/index.js';
import type { TaskView } from '../ports.js';
import { extractResults, serverFileName } from '../results.js';

/** The text of a job's result.json: task id, model, input as sent, and its files (names, paths, sizes, sha256, URLs). */
export function resultDocument(row: JobRow, files: readonly FileRow[]): string {
  const endpoint = findModel(row.model)?.resultEndpoint ?? 'status';
  let task: TaskView | null = null;
  try {
    task = JSON.parse(row.result ?? 'null') as TaskView | null;
  } catch {
    task = null; // a result that no longer parses: the server's names are left out, the files are kept
  }
  const serverName = (f: FileRow): string | null => (f.url !== null && task && Array.isArray(task.files) ? serverFileName(task, endpoint, f.idx) : null);
  const result = {
    job_id: row.id,
    task_id: row.task_id,
    model: row.model,
    input: row.submitted_input ? (JSON.parse(row.submitted_input) as unknown) : null,
    finished_at: row.finished_at,
    files: files.map((f) => ({ name: f.name, server_name: serverName(f), path: f.path, size: f.size, sha256: f.sha256, type: f.type, content_type: f.content_type, url: f.url })),
  };
  return JSON.stringify(result, null, 2) + '\n';
}

/** The text results of a job (lyrics, ...) by file index, from its stored task. */
export function textResults(row: JobRow): Map<number, string> {
  return new Map(extractResults(JSON.parse(row.result ?? '{}') as TaskView, findModel(row.model)?.resultEndpoint ?? 'status', row.model).texts.map((t) => [t.idx, t.text]));
}
