/** Results in S3-compatible object storage (`--out s3://bucket/prefix`): see README.md. */
export { isS3Url, keyUnder, parseS3Url, s3UrlOf, type S3Location } from './url.js';
export { s3ClientFromEnv } from './client.js';
export { ObjectOut, PARTIAL_DIR, PART_SIZE, QUEUE_SIZE, type Placed, type StreamCheck } from './object-out.js';
export type { PendingUpload, UploadJournal } from './journal.js';

import { s3ClientFromEnv } from './client.js';
import { ObjectOut } from './object-out.js';
import { parseS3Url } from './url.js';

/** The ObjectOut of an `s3://bucket/prefix` URL, with the client from the AWS environment. */
export async function openBucket(url: string): Promise<ObjectOut> {
  const loc = parseS3Url(url);
  return new ObjectOut(await s3ClientFromEnv(), loc);
}
export { inertTypeOfObject, openObject } from './read.js';
export { SNIFF_BYTES, inertHeaders, inertType, type InertType } from './inert.js';
export { md5OfEtag, type ObjectInfo } from './proof.js';
