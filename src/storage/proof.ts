/**
 * What a bucket must show, after a write, before the object counts as held (a HEAD of the final key, with
 * `ChecksumMode: ENABLED`). A 200 to a PUT is not enough: an endpoint (or a proxy before it) may answer and
 * keep nothing, or keep other bytes.
 *
 * - Always: an object is there, with the size written and the sha256 metadata written.
 * - The bytes, where the endpoint shows it: the SHA-256 the bucket computed of what it holds (the
 *   `x-amz-checksum-sha256` of a full-object checksum: AWS S3 and the services that verify the checksum sent
 *   with the write) must be the sha256 written; else an ETag of the MD5 form (32 hex digits: a single-part
 *   object on s3rver, MinIO, Ceph and most S3-compatible servers without encryption) must be the MD5 of
 *   the bytes written.
 * - An endpoint that shows neither (a composite checksum and a multipart ETag, or an ETag that is not an
 *   MD5) proves the size and the metadata only: what it holds is as good as its word.
 */
/** What the bucket holds under a key. */
export interface ObjectInfo {
  size: number;
  /** `x-amz-meta-sha256`, or null when the object has none (not written by genbatch). */
  sha256: string | null;
  contentType: string | null;
  /** The ETag, without quotes (an MD5 of the bytes on most servers for a single-part object). */
  etag: string | null;
  /** The bucket's own full-object SHA-256 of the bytes (base64), when it gives one (ChecksumMode ENABLED). */
  checksum: string | null;
}

/** What was written, as the bucket should show it. `md5` (hex): null when not known (a copy of an unknown source). */
export interface Written {
  size: number;
  sha256: string | null;
  md5: string | null;
  /** The bucket's SHA-256 (base64) of the source of a copy, when it gave one: the copy's must be the same. */
  checksum?: string | null;
}

const MD5_ETAG = /^[0-9a-f]{32}$/;

/** The base64 of a hex digest (how S3 writes checksums). */
export const base64OfHex = (hex: string): string => Buffer.from(hex, 'hex').toString('base64');

/** An ETag as hex without its quotes, when it has the form of an MD5; else null. */
export function md5OfEtag(etag: string | null | undefined): string | null {
  const e = (etag ?? '').replace(/^W\//, '').replace(/"/g, '').toLowerCase();
  return MD5_ETAG.test(e) ? e : null;
}

/** Why `held` does not prove the object `written`, or null when it does (as far as the endpoint shows: see above). */
export function unproven(held: ObjectInfo | null, written: Written): string | null {
  if (held === null) return 'the bucket answered the write but holds no object there';
  if (held.size !== written.size) return `the bucket holds ${held.size} bytes there, not the ${written.size} written`;
  if (held.sha256 !== written.sha256) return `the object there has sha256 metadata ${held.sha256 ?? '(none)'}, not the ${written.sha256 ?? '(none)'} written`;
  const want = written.checksum ?? (written.sha256 !== null ? base64OfHex(written.sha256) : null);
  if (held.checksum !== null && want !== null) {
    return held.checksum === want ? null : `the bucket's SHA-256 of the bytes it holds is ${held.checksum} (base64), not ${want} of the bytes written`;
  }
  const etag = md5OfEtag(held.etag);
  if (etag !== null && written.md5 !== null && etag !== written.md5) return `the bucket's MD5 of the bytes it holds (ETag) is ${etag}, not ${written.md5} of the bytes written`;
  return null;
}
