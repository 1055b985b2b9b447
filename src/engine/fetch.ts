import { join, relative } from 'node:path';
import { findModel } from '../models/index.js';
import type { JobRow, Store } from '../store/index.js';
import type { EngineEvent } from './events.js';
import { writeFileAtomic } from './files.js';
import type { DownloadPort, TaskView } from './ports.js';
import { extractResults, sha256Hex } from './results.js';

/**
 * Put one finished job's results on disk: every recorded file not yet done
 * (downloaded to a temporary file, size-checked, hashed, fsynced, renamed),
 * text results written the same way, then `result.json`. Each finished file is
 * recorded at once, so a resumed job fetches only what is missing. Throws what
 * the downloader throws; the caller decides the job's state.
 * Returns false when stopped by the signal before the end.
 */
export async function fetchJob(
  row: JobRow,
  c: { store: Store; download: DownloadPort; outDir: string; signal: AbortSignal; emit: (e: EngineEvent) => void },
): Promise<boolean> {
  const jobDir = join(c.outDir, c.download.sanitizeName(row.id));
  const task = JSON.parse(row.result ?? '{}') as TaskView;
  let texts: Map<number, string> | null = null;
  for (const f of c.store.filesOf(row.id)) {
    if (f.state === 'done') continue;
    if (c.signal.aborted) return false;
    if (f.url === null) {
      texts ??= new Map(extractResults(task, findModel(row.model)?.resultEndpoint ?? 'status', row.model).texts.map((t) => [t.idx, t.text]));
      const text = texts.get(f.idx) ?? '';
      const name = c.download.sanitizeName(f.name);
      await writeFileAtomic(join(jobDir, name), text);
      c.store.fileDone(row.id, f.idx, { path: relative(c.outDir, join(jobDir, name)), size: Buffer.byteLength(text), sha256: sha256Hex(text), content_type: 'text/plain' });
      continue;
    }
    const got = await c.download.downloadFile({ url: f.url, dir: jobDir, name: f.name, expectedSize: f.expected_size ?? undefined, signal: c.signal });
    const rel = relative(c.outDir, got.path);
    c.store.fileDone(row.id, f.idx, { path: rel, size: got.size, sha256: got.sha256, content_type: got.contentType });
    c.emit({ type: 'file', id: row.id, path: rel, size: got.size, sha256: got.sha256 });
  }
  const result = {
    job_id: row.id,
    task_id: row.task_id,
    model: row.model,
    input: row.submitted_input ? (JSON.parse(row.submitted_input) as unknown) : null,
    finished_at: row.finished_at,
    files: c.store.filesOf(row.id).map((f) => ({ name: f.name, path: f.path, size: f.size, sha256: f.sha256, type: f.type, content_type: f.content_type, url: f.url })),
  };
  await writeFileAtomic(join(jobDir, 'result.json'), JSON.stringify(result, null, 2) + '\n');
  return true;
}
