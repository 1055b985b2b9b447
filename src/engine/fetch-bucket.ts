/**
 * fetchJob for `--out s3://...`: a finished job's results streamed into the bucket (BucketPort) instead of
 * the disk, with the same records: each file is recorded done with its path (under the prefix), size and
 * sha256 in the caller's `downloading -> done` transaction, or right away when the job stops midway.
 *
 * A file put in the bucket is also noted in the state file at once (meta `s3_done:<job>:<idx>`), before
 * the job is recorded: a run killed between the two finds the note, checks that the bucket holds the
 * object with that size and sha256 (HEAD), and records it without downloading it again. The multipart
 * uploads in flight are kept in meta `s3_uploads` (bucketJournal) for the next run to clear.
 */
import type { FileRow, JobRow, Store } from '../store/index.js';
import type { EngineEvent } from './events.js';
import type { BucketPort, DownloadPort, UploadJournal, UploadRecord } from './ports.js';
import { resultDocument, textResults } from './result-doc.js';

type Got = { path: string; size: number; sha256: string; content_type: string | null };

/** Meta key of the multipart uploads in flight (a JSON object: temporary key -> UploadId). */
const UPLOADS_KEY = 's3_uploads';
const doneKey = (jobId: string, idx: number): string => `s3_done:${jobId}:${idx}`;

/** The uploads in flight, kept in the state file's meta table (one small JSON value). */
export function bucketJournal(store: Store): UploadJournal & { pending(): UploadRecord[] } {
  const read = (): Record<string, string> => JSON.parse(store.getMeta(UPLOADS_KEY) ?? '{}') as Record<string, string>;
  return {
    started(u) {
      const all = read();
      all[u.key] = u.uploadId;
      store.setMeta(UPLOADS_KEY, JSON.stringify(all));
    },
    ended(key) {
      const all = read();
      if (!(key in all)) return;
      delete all[key];
      store.setMeta(UPLOADS_KEY, Object.keys(all).length > 0 ? JSON.stringify(all) : null);
    },
    pending: () => Object.entries(read()).map(([key, uploadId]) => ({ key, uploadId })),
  };
}

/** A file put in the bucket by a run that stopped before recording it, when the bucket still holds it unchanged. */
async function putEarlier(store: Store, bucket: BucketPort, jobId: string, f: FileRow): Promise<Got | null> {
  const raw = store.getMeta(doneKey(jobId, f.idx));
  if (raw === null) return null;
  const got = JSON.parse(raw) as Got;
  return (await bucket.holds(got.path, got.size, got.sha256)) ? got : null;
}

export async function fetchToBucket(
  row: JobRow,
  c: { store: Store; download: DownloadPort; bucket: BucketPort; signal: AbortSignal; emit: (e: EngineEvent) => void },
): Promise<(() => void) | null> {
  const folder = c.download.sanitizeName(row.id);
  const files = c.store.filesOf(row.id);
  const journal = bucketJournal(c.store);
  const done: Array<{ idx: number; got: Got }> = [];
  const record = (): (() => void) => {
    for (const d of done) c.emit({ type: 'file', id: row.id, path: d.got.path, size: d.got.size, sha256: d.got.sha256 });
    return () => {
      for (const d of done) {
        c.store.fileDone(row.id, d.idx, d.got);
        c.store.setMeta(doneKey(row.id, d.idx), null);
      }
    };
  };
  const recordNow = (): void => {
    if (done.length > 0) c.store.db.transaction(record())();
  };
  let texts: Map<number, string> | null = null;
  try {
    for (const f of files) {
      if (f.state === 'done') continue;
      if (c.signal.aborted) {
        recordNow();
        return null;
      }
      let got = await putEarlier(c.store, c.bucket, row.id, f);
      if (got === null && f.url === null) {
        texts ??= textResults(row);
        const p = await c.bucket.putText(folder, c.download.sanitizeName(f.name), texts.get(f.idx) ?? '', { signal: c.signal });
        got = { ...p, content_type: 'text/plain' };
      } else if (got === null) {
        const d = await c.bucket.fetchFile({ url: f.url!, folder, name: f.name, expectedSize: f.expected_size ?? undefined, signal: c.signal, journal });
        got = { path: d.path, size: d.size, sha256: d.sha256, content_type: d.contentType };
      }
      c.store.setMeta(doneKey(row.id, f.idx), JSON.stringify(got));
      done.push({ idx: f.idx, got });
      Object.assign(f, got, { content_type: got.content_type ?? f.content_type, state: 'done' } satisfies Partial<FileRow>);
    }
  } catch (err) {
    try {
      recordNow();
    } catch {
      // the download error is the one that matters
    }
    throw err;
  }
  await c.bucket.putResult(folder, row.id, resultDocument(row, files));
  return record();
}
