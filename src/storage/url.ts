/** `s3://bucket/prefix` output locations: parsing and keys under the prefix. */
import { UsageError } from '../errors.js';

export interface S3Location {
  bucket: string;
  /** The key prefix without leading or trailing slash; '' for the bucket's root. */
  prefix: string;
}

/** True when `out` names a bucket (`s3://...`) rather than a folder. */
export function isS3Url(out: string): boolean {
  return /^s3:\/\//i.test(out);
}

/** Bucket names S3 accepts (3-63 of lower-case letters, digits, dots, hyphens; letters or digits at both ends). */
const BUCKET_RE = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/**
 * `s3://bucket/some/prefix/` -> { bucket: 'bucket', prefix: 'some/prefix' }. A key prefix segment may not be
 * empty, `.` or `..` (keys follow the disk layout, and a prefix synced to a disk must stay a plain folder).
 * Throws UsageError naming the rule broken.
 */
export function parseS3Url(url: string, flag = '--out'): S3Location {
  const m = /^s3:\/\/([^/?#]*)(\/[^?#]*)?$/i.exec(url);
  if (!m) throw new UsageError(`${flag} ${url}: expected s3://bucket/prefix (no query or fragment)`);
  const bucket = m[1] ?? '';
  if (!BUCKET_RE.test(bucket)) throw new UsageError(`${flag} ${url}: "${bucket}" is not a valid bucket name (3-63 lower-case letters, digits, dots and hyphens)`);
  const path = (m[2] ?? '').replace(/^\/+/, '').replace(/\/+$/, '');
  if (path !== '') {
    for (const seg of path.split('/')) {
      if (seg === '' || seg === '.' || seg === '..') throw new UsageError(`${flag} ${url}: the key prefix may not contain empty, "." or ".." segments`);
    }
  }
  return { bucket, prefix: path };
}

/** The key of `rel` (a slash-separated path like `<job id>/image-1.png`) under the prefix. */
export function keyUnder(loc: S3Location, rel: string): string {
  return loc.prefix === '' ? rel : `${loc.prefix}/${rel}`;
}

/** `s3://bucket/prefix` (normalised), for messages and the state file's record of the run. */
export function s3UrlOf(loc: S3Location): string {
  return loc.prefix === '' ? `s3://${loc.bucket}` : `s3://${loc.bucket}/${loc.prefix}`;
}
