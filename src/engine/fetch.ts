import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { findModel } from '../models/index.js';
import type { FileGot, FileRow, JobRow, WorkStore } from '../store/index.js';
import type { EngineEvent } from './events.js';
import { realJobDir, writeFileAtomic, writeTextNoReplace } from './files.js';
import { moveAsideOne } from './previous.js';
import type { DownloadPort, TaskView } from './ports.js';
import { RESULT_FILE, extractResults, serverFileName, sha256Hex } from './results.js';

type Got = { path: string; size: number; sha256: string; content_type: string | null };

/** True when `path` is missing or is a result.json genbatch wrote for this job (so it may be replaced). */
function isOwnResultFile(path: string, jobId: string): boolean {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    return typeof parsed === 'object' && parsed !== null && (parsed as { job_id?: unknown }).job_id === jobId;
  } catch {
    return false;
  }
}

/**
 * Put one finished job's results on disk: every recorded file not yet done
 * (downloaded to a temporary file, size-checked, hashed, fsynced, moved into
 * place), text results written the same way, then `result.json`; then ONE
 * fsync of the job's folder for all of them. The files are recorded as done
 * only after that fsync, all in one transaction: the function returned here,
 * which the caller runs inside the job's `downloading -> done` transition.
 * When a file fails or the signal stops the job midway, the files already on
 * disk are fsynced and recorded before returning or throwing, so a resumed job
 * fetches only what is missing (only a hard crash midway loses those records;
 * the resumed job then finds identical files in place and reuses them).
 * Throws what the downloader throws; the caller decides the job's state.
 * Returns null when stopped by the signal before the end.
 */
export async function fetchJob(
  row: JobRow,
  c: { store: WorkStore; download: DownloadPort; outDir: string; signal: AbortSignal; emit: (e: EngineEvent) => void },
): Promise<FileGot[] | null> {
  const jobDir = join(c.outDir, c.download.sanitizeName(row.id));
  const files = await c.store.filesOf(row.id);
  const done: Array<{ idx: number; got: Got }> = [];
  /** fsync the folder, then the rows of what is on disk (recorded by the caller's transition, or by recordNow). */
  const settle = async (): Promise<FileGot[]> => {
    if (done.length > 0) await c.download.syncDir(jobDir);
    for (const d of done) c.emit({ type: 'file', id: row.id, path: d.got.path, size: d.got.size, sha256: d.got.sha256 });
    return done.map((d) => ({ idx: d.idx, ...d.got }));
  };
  const recordNow = async (): Promise<void> => {
    if (done.length === 0) return;
    await c.store.recordFiles(row.id, await settle());
  };

  realJobDir(c.outDir, c.download.sanitizeName(row.id));
  let texts: Map<number, string> | null = null;
  try {
    for (const f of files) {
      if (f.state === 'done') continue;
      if (c.signal.aborted) {
        await recordNow();
        return null;
      }
      let got: Got;
      if (f.url === null) {
        texts ??= new Map(extractResults(JSON.parse(row.result ?? '{}') as TaskView, findModel(row.model)?.resultEndpoint ?? 'status', row.model).texts.map((t) => [t.idx, t.text]));
        const text = texts.get(f.idx) ?? '';
        // Placed like a download: an unrelated file under that name is never replaced (a numbered name is taken).
        const placed = await writeTextNoReplace(jobDir, c.download.sanitizeName(f.name), text);
        got = { path: relative(c.outDir, placed), size: Buffer.byteLength(text), sha256: sha256Hex(text), content_type: 'text/plain' };
        done.push({ idx: f.idx, got });
      } else {
        const d = await c.download.downloadFile({ url: f.url, dir: jobDir, name: f.name, expectedSize: f.expected_size ?? undefined, signal: c.signal, dirExists: true, deferDirSync: true });
        got = { path: relative(c.outDir, d.path), size: d.size, sha256: d.sha256, content_type: d.contentType };
        done.push({ idx: f.idx, got });
      }
      Object.assign(f, got, { content_type: got.content_type ?? f.content_type, state: 'done' } satisfies Partial<FileRow>);
    }
  } catch (err) {
    await recordNow().catch(() => undefined); // the download error is the one that matters
    throw err;
  }
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
  // A result.json that is not this job's (a file that was in the folder before) is kept in previous-<n>/.
  if (!isOwnResultFile(join(jobDir, RESULT_FILE), row.id)) await moveAsideOne(jobDir, RESULT_FILE);
  await writeFileAtomic(join(jobDir, RESULT_FILE), JSON.stringify(result, null, 2) + '\n', { dirExists: true });
  // One folder fsync covers every file above and result.json.
  if (done.length === 0) await c.download.syncDir(jobDir);
  return settle();
}
