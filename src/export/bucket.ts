/**
 * Export from and to a bucket (see README.md, "In a bucket").
 *
 * - From a run whose output is `s3://bucket/prefix`: each file is read from its object (to a folder: streamed
 *   to a temporary file, checked, renamed).
 * - To `--to s3://bucket/prefix`: each file is copied server-side from the run's object (CopyObject with its
 *   sha256 in the metadata and the type its first bytes show; the copy proved held) when the source object
 *   carries the recorded sha256; a file of a run on disk, or an object over 5 GiB (CopyObject's limit), is
 *   streamed into an upload whose sha256 is checked before it completes. The index and `.genbatch-export.json`
 *   are objects under the prefix, each written whole (src/report/objects.ts). A key already holding an object
 *   with the recorded sha256 in its metadata is kept; other content there is replaced only when genbatch
 *   wrote it (the record), else refused.
 */
import { createHash } from 'node:crypto';
import { NO_JOURNAL, objectReports } from '../report/objects.js';
import { StorageError } from '../errors.js';
import { inertTypeOfObject, md5OfEtag, openBucket, openObject, type ObjectInfo, type ObjectOut, type StreamCheck } from '../storage/index.js';
import { ExportProblem, LEDGER, parseLedger, type ExportDest, type ExportSource, type Placement } from './places.js';

/** CopyObject copies at most 5 GiB in one request. */
const MAX_COPY = 5 * 1024 ** 3;

type BucketSource = ExportSource & { out: ObjectOut };

/** A run's prefix in a bucket as the source of an export. */
export async function bucketSource(url: string): Promise<BucketSource> {
  const out = await openBucket(url);
  return {
    where: out.where,
    out,
    file: () => null,
    async open(rel) {
      const got = await openObject(out, rel);
      if (got === null) throw new ExportProblem(`${out.where}/${rel}: recorded but no such object (removed since the run?); not exported`);
      return got.body;
    },
    close: () => out.close(),
  };
}

/** The body's sha256 must be `expected`: checked at its end, before the upload completes (nothing is left otherwise). */
class ShaMismatch extends Error {}
function shaCheck(expected: string): StreamCheck {
  const hash = createHash('sha256');
  let size = 0;
  return {
    update(buf) {
      size += buf.length;
      hash.update(buf);
    },
    finish() {
      const sha256 = hash.digest('hex');
      if (sha256 !== expected) throw new ShaMismatch(`sha256 ${sha256} is not the recorded ${expected} (changed since it was downloaded)`);
      return { size, sha256 };
    },
  };
}

/** A prefix in a bucket as the destination of an export. */
export async function bucketDest(url: string): Promise<ExportDest> {
  const out = await openBucket(url);
  const at = (name: string) => `${out.where}/${name}`;

  /**
   * Server-side copy of the source object `rel` (`src`: its HEAD) to `name`: its sha256 in the metadata, the
   * type its bytes show (never the source's stored type), proved held by the bucket (ObjectOut.copyIn).
   */
  const copy = async (from: BucketSource, rel: string, name: string, src: ObjectInfo & { sha256: string }): Promise<void> => {
    const key = from.out.keyOf(rel);
    const type = await inertTypeOfObject(from.out, from.out.loc.bucket, key);
    if (type === null) throw new StorageError(`s3://${from.out.loc.bucket}/${key}: no such object (removed since the run?)`);
    await out.copyIn(from.out.loc.bucket, key, name, { size: src.size, sha256: src.sha256, md5: md5OfEtag(src.etag), checksum: src.checksum }, type);
  };

  return {
    where: out.where,
    at,
    readLedger: async () => {
      const body = await out.get(LEDGER);
      return parseLedger(body === null ? null : body.toString('utf8'), at(LEDGER));
    },
    exists: async (name) => (await out.head(name)) !== null,
    async place(e, from, ledger): Promise<Placement> {
      const there = await out.head(e.name);
      if (there !== null) {
        if (there.sha256 === e.sha256) return 'kept';
        if (!(e.name in ledger.files)) throw new ExportProblem(`${at(e.name)}: already there and genbatch did not write it; not replaced (job ${String(e.row.job_id)} not exported)`);
      }
      const inBucket = 'out' in from ? (from as BucketSource) : null;
      if (inBucket) {
        const src = await inBucket.out.head(e.rel);
        if (src === null || src.sha256 !== e.sha256 || src.size !== e.size) {
          const why = src === null ? 'recorded but no such object' : src.sha256 !== e.sha256 ? `its sha256 ${src.sha256 ?? '(none)'} is not the recorded ${e.sha256}` : `its size ${src.size} is not the recorded ${e.size}`;
          throw new ExportProblem(`${inBucket.out.where}/${e.rel}: ${why}; not exported`);
        }
        if (src.size <= MAX_COPY) {
          await copy(inBucket, e.rel, e.name, { ...src, sha256: e.sha256 });
          return 'copied';
        }
      }
      const file = from.file(e.rel);
      const body = await from.open(e.rel); // from a folder: opened through its Root (O_NOFOLLOW)
      try {
        await out.putStream(e.name, body, { check: shaCheck(e.sha256), journal: NO_JOURNAL, replace: true });
      } catch (err) {
        // A mismatch found at the end of a multipart upload comes back as the upload's failure, the mismatch its cause.
        const mismatch = err instanceof ShaMismatch ? err : (err as { cause?: unknown }).cause;
        if (!(mismatch instanceof ShaMismatch)) throw err;
        throw new ExportProblem(`${file ?? `${from.where}/${e.rel}`}: ${mismatch.message}; not exported`);
      } finally {
        body.destroy();
      }
      return 'copied';
    },
    async removeIfUnchanged(name, sha256) {
      const h = await out.head(name);
      if (h === null || h.sha256 !== sha256) return false;
      const { DeleteObjectCommand } = await import('@aws-sdk/client-s3');
      const key = out.keyOf(name);
      try {
        await out.client.send(new DeleteObjectCommand({ Bucket: out.loc.bucket, Key: key }));
      } catch (err) {
        throw out.failure(err, 'DELETE', key);
      }
      return true;
    },
    async write(name, produce) {
      const w = await objectReports(out)(name);
      const hash = createHash('sha256');
      try {
        await produce({
          write: async (text) => {
            hash.update(text, 'utf8');
            if (w.push(text)) await w.flush();
          },
        });
        await w.finish();
      } catch (err) {
        await w.abort();
        throw err;
      }
      return hash.digest('hex');
    },
    close: () => out.close(),
  };
}
