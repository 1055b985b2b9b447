/**
 * The engine's BucketPort (src/engine/ports.ts) over an ObjectOut: result files streamed from the service
 * (src/download/to-bucket.ts) into the bucket, text results, result.json, earlier results kept in
 * `<job>/previous-<n>/` as on disk.
 */
import { downloadToStore } from '../download/index.js';
import type { BucketPort } from '../engine/ports.js';
import type { ObjectOut } from './object-out.js';
import { unproven } from './proof.js';
import { sha256OfObject } from './read.js';

/** `retry`: the one retry layer, around each whole file (a new GET and a new upload each time). */
export function resultsBucket(out: ObjectOut, retry: <T>(fn: () => Promise<T>, signal?: AbortSignal) => Promise<T>): BucketPort {
  /** The first `<folder>/previous-<n>/` that holds nothing. */
  const previousFolder = async (folder: string): Promise<string> => {
    const taken = new Set<number>();
    for (const rel of await out.list(folder)) {
      const m = /^[^/]+\/previous-(\d+)\//.exec(rel);
      if (m) taken.add(Number(m[1]));
    }
    let n = 1;
    while (taken.has(n)) n++;
    return `${folder}/previous-${n}`;
  };
  return {
    where: out.where,
    fetchFile: (o) =>
      retry(async () => {
        const placed = await downloadToStore({ url: o.url, name: o.name, expectedSize: o.expectedSize ?? null, ...(o.signal ? { signal: o.signal } : {}) }, (b) =>
          out.putStream(`${o.folder}/${b.name}`, b.body, {
            // No contentType: the service's label is not passed on; the object's type is its bytes' (inert.ts).
            check: b.check,
            journal: o.journal,
            ...(o.signal ? { signal: o.signal } : {}),
            ...(o.beforeWrite ? { beforeWrite: (p) => o.beforeWrite!({ path: p.rel, size: p.size, sha256: p.sha256, contentType: b.contentType }) } : {}),
          }).then((p) => ({ ...p, contentType: b.contentType })),
        );
        return { path: placed.rel, size: placed.size, sha256: placed.sha256, contentType: placed.contentType };
      }, o.signal),
    putText: async (folder, name, text, o = {}) => {
      // Text is stored as a download (application/octet-stream, attachment), never as a page.
      const p = await out.putNew(`${folder}/${name}`, text, o.signal ? { signal: o.signal } : {});
      return { path: p.rel, size: p.size, sha256: p.sha256 };
    },
    putResult: async (folder, jobId, text) => {
      const rel = `${folder}/result.json`;
      const there = await out.get(rel);
      if (there !== null && !ownResult(there, jobId)) await out.move([rel], [`${await previousFolder(folder)}/result.json`]);
      await out.putSmall(rel, text, { contentType: 'application/json' });
    },
    // Asked for a file a killed run noted as put: the HEAD's proof, and the bytes read back and hashed when the
    // bucket gives no SHA-256 of its own (the MD5 of the bytes sent is not in the note).
    holds: async (path, size, sha256) => {
      const h = await out.head(path);
      if (unproven(h, { size, sha256, md5: null }) !== null) return false;
      return h!.checksum !== null || (await sha256OfObject(out, path)) === sha256;
    },
    abortStale: (pending, journal) => out.abortStale(pending, journal),
    moveAside: async (folder) => {
      const all = (await out.list(folder)).filter((rel) => !/^[^/]+\/previous-\d+\//.test(rel));
      if (all.length === 0) return null;
      const dest = await previousFolder(folder);
      await out.move(all, all.map((rel) => `${dest}/${rel.slice(folder.length + 1)}`));
      return `${out.where}/${dest}`;
    },
  };
}

/** True when `body` is a result.json genbatch wrote for `jobId`. */
function ownResult(body: Buffer, jobId: string): boolean {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as unknown;
    return typeof parsed === 'object' && parsed !== null && (parsed as { job_id?: unknown }).job_id === jobId;
  } catch {
    return false;
  }
}
