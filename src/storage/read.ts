/** Reading objects as streams (the view's /files/, export from a bucket): the body is never held whole. */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { SNIFF_BYTES, inertType, type InertType } from './inert.js';
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

/** The type an object's bytes show (its first SNIFF_BYTES, one ranged GET; src/storage/inert.ts), or null when there is none. */
export async function inertTypeOfObject(out: ObjectOut, bucket: string, key: string): Promise<InertType | null> {
  const { GetObjectCommand } = await import('@aws-sdk/client-s3');
  try {
    const r = await out.client.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: `bytes=0-${SNIFF_BYTES - 1}` }));
    return inertType(Buffer.from(await r.Body!.transformToByteArray()));
  } catch (err) {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (e.$metadata?.httpStatusCode === 404 || e.name === 'NoSuchKey') return null;
    // An empty object has no byte 0 (416): no type to read.
    if (e.$metadata?.httpStatusCode === 416 || e.name === 'InvalidRange') return inertType(Buffer.alloc(0));
    throw out.failure(err, 'GET', key);
  }
}

/** The sha256 of an object's bytes, read whole as a stream (null when there is none). */
export async function sha256OfObject(out: ObjectOut, rel: string): Promise<string | null> {
  const got = await openObject(out, rel);
  if (got === null) return null;
  const hash = createHash('sha256');
  try {
    for await (const chunk of got.body) hash.update(chunk as Buffer);
  } catch (err) {
    throw out.failure(err, 'GET', out.keyOf(rel));
  }
  return hash.digest('hex');
}
