import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { dirname, relative, resolve, sep } from 'node:path';
import type { StoredSpec } from '../engine/spec.js';
import { inertType } from '../storage/inert.js';

/**
 * A job's local reference images (the manifest's local paths, uploaded before the submit: the spec's `refs`),
 * for its page: `GET /ref/<job id>/<n>` sends the n-th one. What the state file names is not trusted: the file
 * is opened without following a link, must be a regular file of at most MAX_BYTES, its sha256 must be the one
 * recorded when the run read it (so only the bytes that were sent are shown), and its first bytes an image;
 * it is then sent as that image type, never as anything else.
 */
export interface LocalRef {
  /** Index in the spec's refs. */
  n: number;
  /** The path relative to the manifest's folder, `/`-separated. */
  name: string;
  file: string;
  sha256: string;
}

const MAX_BYTES = 64 << 20;

/** The local (file) references of a job's stored spec, named relative to the manifest's folder. */
export function localRefs(specJson: string, manifest: string): LocalRef[] {
  let refs: unknown;
  try {
    refs = (JSON.parse(specJson) as Partial<StoredSpec>).refs;
  } catch {
    return [];
  }
  if (!Array.isArray(refs)) return [];
  const base = dirname(resolve(manifest));
  const out: LocalRef[] = [];
  refs.forEach((r: Partial<StoredSpec['refs'][number]>, n) => {
    if (r.data || r.remote || typeof r.file !== 'string' || typeof r.sha256 !== 'string') return;
    out.push({ n, name: relative(base, r.file).split(sep).join('/'), file: r.file, sha256: r.sha256.toLowerCase() });
  });
  return out;
}

/** Sends the reference's bytes as their image type; false (nothing sent) when it may not be served. */
export async function sendRef(res: ServerResponse, ref: LocalRef, headOnly: boolean): Promise<boolean> {
  let fd: number;
  try {
    fd = openSync(ref.file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return false;
  }
  let body: Buffer;
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > MAX_BYTES) return false;
    body = Buffer.alloc(st.size);
    let at = 0;
    while (at < body.length) {
      const got = readSync(fd, body, at, body.length - at, at);
      if (got === 0) break;
      at += got;
    }
    body = body.subarray(0, at);
  } finally {
    closeSync(fd);
  }
  if (createHash('sha256').update(body).digest('hex') !== ref.sha256) return false;
  const type = await inertType(body);
  if (type.disposition !== null || !type.contentType.startsWith('image/')) return false;
  res.writeHead(200, { 'content-type': type.contentType, 'content-length': body.length, 'cache-control': 'no-cache' });
  res.end(headOnly ? undefined : body);
  return true;
}
