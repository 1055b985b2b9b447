/** Reading objects as streams (the view's /files/, export from a bucket): the body is never held whole. */
import type { Readable } from 'node:stream';
import type { ObjectOut } from './object-out.js';

/** The object at `rel` under the prefix as a stream with its size and sha256 metadata, or null when there is none. */
export async function openObject(out: ObjectOut, rel: string): Promise<{ body: Readable; size: number; sha256: string | null } | null> {
  const { GetObjectCommand } = await import('@aws-sdk/client-s3');
  const key = out.keyOf(rel);
  try {
    const r = await out.client.send(new GetObjectCommand({ Bucket: out.loc.bucket, Key: key }));
    return { body: r.Body as Readable, size: r.ContentLength ?? 0, sha256: r.Metadata?.sha256 ?? null };
  } catch (err) {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (e.$metadata?.httpStatusCode === 404 || e.name === 'NoSuchKey') return null;
    throw out.failure(err, 'GET', key);
  }
}
