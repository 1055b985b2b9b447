import { relative } from 'node:path';
import type { Root } from '../../lib/root.js';
import type { FileGot, FileRow, JobRow, WorkStore } from '../../store/index.js';
import type { EngineEvent } from '../events.js';
import { outputRoot, readSmallFile, writeFileAtomic, writeTextNoReplace } from '../files.js';
import { moveAsideOne } from '../prepare/previous.js';
import type { DownloadPort } from '../ports.js';
import { RESULT_FILE, sha256Hex } from '../results.js';
import { resultDocument, textResults } from './result-doc.js';
import { fetchToBucket } from './fetch-bucket.js';

type Got = { path: string; size: number; sha256: string; content_type: string | null };

/** True when `name` is missing or is a result.json genbatch wrote for this job (so it may be replaced); read through the Root, never through a link. */
function isOwnResultFile(root: Root, name: string, jobId: string): boolean {
  const text = readSmallFile(root, name);
  if (text === null) return true;
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
  c: { store: WorkStore; download: DownloadPort; outDir: string; signal: AbortSignal; emit: (e: EngineEvent) => void; root?: Root; files?: readonly FileRow[] },
): Promise<FileGot[] | null> {
  if (c.download.bucket) return fetchToBucket(row, { ...c, bucket: c.download.bucket });
  const folder = c.download.sanitizeName(row.id);
  // The output folder's Root (the run's, or opened now): the job folder made and checked now (no link at any
  // level), every write below through it.
  const root = c.root ?? outputRoot(c.outDir);
  const { path: jobDir, made } = root.mkdirsMade(folder);
  // True until the first wait for a download or a write: the check just made still stands for the first file.
  let checkedNow = true;
  const files = c.files ?? (await c.store.filesOf(row.id));
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
        texts ??= textResults(row);
        const text = texts.get(f.idx) ?? '';
        // Placed like a download: an unrelated file under that name is never replaced (a numbered name is taken).
        checkedNow = false;
        const placed = await writeTextNoReplace(root, folder, c.download.sanitizeName(f.name), text);
        got = { path: relative(c.outDir, placed), size: Buffer.byteLength(text), sha256: sha256Hex(text), content_type: 'text/plain' };
        done.push({ idx: f.idx, got });
      } else {
        // The job folder checked again for this file after a wait (a link put there since is refused), then downloaded into.
        const dir = checkedNow ? jobDir : root.mkdirs(folder);
        checkedNow = false;
        const d = await c.download.downloadFile({ url: f.url, dir, name: f.name, expectedSize: f.expected_size ?? undefined, signal: c.signal, dirExists: true, deferDirSync: true });
        got = { path: relative(c.outDir, d.path), size: d.size, sha256: d.sha256, content_type: d.contentType };
        done.push({ idx: f.idx, got });
      }
      Object.assign(f, got, { content_type: got.content_type ?? f.content_type, state: 'done' } satisfies Partial<FileRow>);
    }
  } catch (err) {
    await recordNow().catch(() => undefined); // the download error is the one that matters
    throw err;
  }
  const result = resultDocument(row, files);
  // A result.json that is not this job's (a file that was in the folder before) is kept in previous-<n>/;
  // a folder this call made held none.
  if (!made && !isOwnResultFile(root, `${folder}/${RESULT_FILE}`, row.id)) await moveAsideOne(root, folder, RESULT_FILE);
  await writeFileAtomic(root, `${folder}/${RESULT_FILE}`, result);
  // One folder fsync covers every file above and result.json.
  if (done.length === 0) await c.download.syncDir(jobDir);
  return settle();
}
