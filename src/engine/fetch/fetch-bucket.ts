/**
 * fetchJob for `--out s3://...`: a finished job's results streamed into the bucket (BucketPort) instead of
 * the disk, with the same records: each file is recorded done with its path (under the prefix), size and
 * sha256 in the caller's `downloading -> done` transaction, or right away when the job stops midway.
 *
 * A file put in the bucket is also noted in the state file (meta `s3_done:<job>:<idx>`) before its object
 * appears under its final key, and before the job is recorded: a run killed between the two finds the note, checks that the bucket holds the
 * object with that size and sha256 (HEAD), and records it without downloading it again. The multipart
 * uploads in flight are kept in meta `s3_uploads` (bucketJournal) for the next run to clear.
 */
import type { FileGot, FileRow, JobRow, WorkStore } from '../../store/index.js';
import type { EngineEvent } from '../events.js';
import type { BucketPort, DownloadPort, UploadJournal, UploadRecord } from '../ports.js';
import { resultDocument, textResults } from './result-doc.js';

type Got = { path: string; size: number; sha256: string; content_type: string | null };

/** The state file's small named values (Store's meta table); the answers may be promises (an asynchronous store). */
export interface MetaNotes {
  getMeta(key: string): string | null | Promise<string | null>;
  setMeta(key: string, value: string | null): void | Promise<void>;
}

/** Meta key of the multipart uploads in flight (a JSON object: temporary key -> UploadId; '' until it is known). */
const UPLOADS_KEY = 's3_uploads';
const doneKey = (jobId: string, idx: number): string => `s3_done:${jobId}:${idx}`;

type Journal = UploadJournal & { pending(): Promise<UploadRecord[]> };
const journals = new WeakMap<object, Journal>();

/**
 * The uploads in flight, kept in one meta value of the state file. One journal per store (`owner`: the store
 * object, `meta` its values when the store is not itself MetaNotes), whose changes are
 * made one after the other (a read, then a write, per change), so uploads of different jobs that start and
 * end together cannot lose each other's record.
 */
export function bucketJournal(owner: object & { worker?: string | null }, meta: MetaNotes = owner as MetaNotes): Journal {
  let journal = journals.get(owner);
  if (!journal) journals.set(owner, (journal = makeJournal(meta, owner.worker ? `${UPLOADS_KEY}:${owner.worker}` : UPLOADS_KEY)));
  return journal;
}

/** `key`: the meta value of this writer's uploads (one per worker on a shared PostgreSQL state, so none clears another's). */
function makeJournal(meta: MetaNotes, key: string): Journal {
  let chain: Promise<unknown> = Promise.resolve();
  const change = (fn: (all: Record<string, string>) => boolean): Promise<void> => {
    const next = chain.then(async () => {
      const all = JSON.parse((await meta.getMeta(key)) ?? '{}') as Record<string, string>;
      if (fn(all)) await meta.setMeta(key, Object.keys(all).length > 0 ? JSON.stringify(all) : null);
    });
    chain = next.catch(() => undefined);
    return next;
  };
  return {
    started: (u) =>
      change((all) => {
        all[u.key] = u.uploadId;
        return true;
      }),
    ended: (key) =>
      change((all) => {
        if (!(key in all)) return false;
        delete all[key];
        return true;
      }),
    pending: async () => Object.entries(JSON.parse((await meta.getMeta(key)) ?? '{}') as Record<string, string>).map(([key, uploadId]) => ({ key, uploadId })),
  };
}

/** What a note of a file put in the bucket holds: the file as recorded, and the task and URL it came from. */
type Noted = Got & { task_id: string | null; url: string | null };

/**
 * A file put in the bucket by a run that stopped before recording it: its note, when it is about this task's
 * file (a job sent again has a new task) and the bucket still holds the object with the noted size and sha256.
 */
async function putEarlier(meta: MetaNotes, bucket: BucketPort, row: JobRow, f: FileRow): Promise<Got | null> {
  const raw = await meta.getMeta(doneKey(row.id, f.idx));
  if (raw === null) return null;
  const { task_id, url, ...got } = JSON.parse(raw) as Noted;
  if (task_id !== row.task_id || url !== f.url) return null;
  return (await bucket.holds(got.path, got.size, got.sha256)) ? got : null;
}

export async function fetchToBucket(
  row: JobRow,
  c: { store: WorkStore; download: DownloadPort; bucket: BucketPort; signal: AbortSignal; emit: (e: EngineEvent) => void; files?: readonly FileRow[] },
): Promise<FileGot[] | null> {
  const folder = c.download.sanitizeName(row.id);
  const files = c.files ?? (await c.store.filesOf(row.id));
  const notes: MetaNotes = c.store;
  const journal = bucketJournal(c.store);
  const done: Array<{ idx: number; got: Got }> = [];
  /** The rows of the files put (recorded by the caller's transition, or by recordNow); their notes are dropped. */
  const settle = async (): Promise<FileGot[]> => {
    for (const d of done) c.emit({ type: 'file', id: row.id, path: d.got.path, size: d.got.size, sha256: d.got.sha256 });
    // Dropped just before the rows are recorded: a kill in between costs one download again (the object is then
    // found in the bucket with the same content and reused), never a wrong record.
    for (const d of done) await notes.setMeta(doneKey(row.id, d.idx), null);
    return done.map((d) => ({ idx: d.idx, ...d.got }));
  };
  const recordNow = async (): Promise<void> => {
    if (done.length > 0) await c.store.recordFiles(row.id, await settle());
  };
  let texts: Map<number, string> | null = null;
  try {
    for (const f of files) {
      if (f.state === 'done') continue;
      if (c.signal.aborted) {
        await recordNow();
        return null;
      }
      let got = await putEarlier(notes, c.bucket, row, f);
      if (got === null && f.url === null) {
        texts ??= textResults(row);
        const p = await c.bucket.putText(folder, c.download.sanitizeName(f.name), texts.get(f.idx) ?? '', { signal: c.signal });
        got = { ...p, content_type: 'text/plain' };
      } else if (got === null) {
        // Noted before the object appears under its key: a run killed once it is there finds it by the note.
        const note = async (g: Got): Promise<void> => notes.setMeta(doneKey(row.id, f.idx), JSON.stringify({ ...g, task_id: row.task_id, url: f.url } satisfies Noted));
        const beforeWrite = (d: { path: string; size: number; sha256: string; contentType: string | null }) => note({ path: d.path, size: d.size, sha256: d.sha256, content_type: d.contentType });
        const d = await c.bucket.fetchFile({ url: f.url!, folder, name: f.name, expectedSize: f.expected_size ?? undefined, signal: c.signal, journal, beforeWrite });
        got = { path: d.path, size: d.size, sha256: d.sha256, content_type: d.contentType };
      }
      // Also for a file reused from an earlier note, or written without one (text results, an object already there).
      await notes.setMeta(doneKey(row.id, f.idx), JSON.stringify({ ...got, task_id: row.task_id, url: f.url } satisfies Noted));
      done.push({ idx: f.idx, got });
      Object.assign(f, got, { content_type: got.content_type ?? f.content_type, state: 'done' } satisfies Partial<FileRow>);
    }
  } catch (err) {
    await recordNow().catch(() => undefined); // the download error is the one that matters
    throw err;
  }
  await c.bucket.putResult(folder, row.id, resultDocument(row, files));
  return settle();
}
