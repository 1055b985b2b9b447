/**
 * Objects under one `s3://bucket/prefix`, written with the guarantees of the disk layout:
 *
 * - A streamed object (putStream) is counted, checked and hashed on the way (the caller's check: the byte
 *   cap, Content-Length, `file_size`). A body of at most PART_SIZE is held in memory and written with one
 *   PutObject (atomic). A larger one goes through a multipart upload (lib-storage `Upload`, parts of
 *   PART_SIZE, QUEUE_SIZE of them in flight: memory is bounded whatever the file's size) to a temporary key
 *   under `<prefix>/.genbatch-partial/`; once complete and checked it is copied server-side to its final
 *   key with its sha256 in the metadata, and the temporary object is deleted. Why a copy: S3 metadata is
 *   fixed when an upload starts, and the sha256 is known only at its end; and so the final key only ever
 *   holds a whole, checked object (a check that fails aborts the upload before CompleteMultipartUpload).
 * - Every object carries `x-amz-meta-sha256` (hex); every write sends its SHA-256 (`ChecksumAlgorithm`) and
 *   counts only once a HEAD proves the bucket holds it (prove, src/storage/proof.ts); a result's type is
 *   its bytes' (src/storage/inert.ts), never the service's.
 * - Nothing is overwritten: a final key that holds other content gets the next numbered name
 *   (`image-1 (2).png`), as on disk; a key holding the same content (same size and sha256) is reused.
 * - Each multipart upload is reported to the caller's journal (its temporary key and UploadId) as soon as
 *   CreateMultipartUpload answers, before any part is sent, and again when it is gone: a run killed midway
 *   leaves the list in its state file, and the next run aborts those uploads and deletes their temporary
 *   objects (abortStale; S3-compatible servers need not list multipart uploads).
 *
 * Errors: StorageError (exit 74) when the bucket refuses (credentials, permission, missing bucket);
 * NetworkError (sent) for a cut connection or a 5xx/429 answer, which the caller's one retry layer retries.
 * The SDK's own retries are off (maxAttempts 1 in client.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { GenbatchError, NetworkError, StorageError } from '../errors.js';
import { withRetry, type RetryPolicy } from '../client/retry.js';
import { numberedName } from '../download/names.js';
import { inertType, type InertType } from './inert.js';
import { journalsFor, type PendingUpload, type UploadJournal } from './journal.js';
import { base64OfHex, md5OfEtag, unproven, type ObjectInfo, type Written } from './proof.js';
import { keyUnder, s3UrlOf, type S3Location } from './url.js';

/** Bytes per part of a multipart upload (also the largest body written with one PutObject). */
export const PART_SIZE = 8 * 1024 * 1024;
/** Parts uploaded at once per object: at most (QUEUE_SIZE + 1) x PART_SIZE bytes held per upload. */
export const QUEUE_SIZE = 2;
/** Names `name (2).ext` ... `name (999).ext` are tried before giving up, as on disk. */
const MAX_NUMBERED = 999;
/** Tries of the writable probe's requests (a bucket's passing 5xx or cut connection is no refusal). */
export const PROBE_RETRY: RetryPolicy = { baseMs: 500, maxMs: 5_000, maxAttempts: 5, jitter: 'full' };
/** Temporary objects of multipart uploads, under the prefix. */
export const PARTIAL_DIR = '.genbatch-partial';

/** The checks of a streamed body (BodyCheck from src/download/check.ts). */
export interface StreamCheck {
  update(buf: Buffer): void;
  finish(): { size: number; sha256: string };
}

export interface Placed {
  /** Path under the prefix (`<job id>/image-1.png`, or a numbered name). */
  rel: string;
  size: number;
  sha256: string;
  /** The key already held the same content: nothing was written. */
  reused: boolean;
}

const sha256Hex = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const md5Hex = (b: Buffer): string => createHash('md5').update(b).digest('hex');

/** The type of a body: genbatch's own document (`contentType`: a report, result.json) as given, a result by its bytes (src/storage/inert.ts). */
const typeOf = async (own: string | null | undefined, head: Buffer): Promise<InertType> => (own ? { contentType: own, disposition: null } : inertType(head));
/** The headers of a type on a PutObject, CopyObject or CreateMultipartUpload. */
const typeParams = (t: InertType) => ({ ContentType: t.contentType, ...(t.disposition !== null ? { ContentDisposition: t.disposition } : {}) });

/** The name of an SDK error and its HTTP status, when it has them. */
function sdkFailure(err: unknown): { name: string; status: number | null; message: string } {
  const e = err as { name?: unknown; message?: unknown; $metadata?: { httpStatusCode?: unknown }; code?: unknown } | null;
  const status = typeof e?.$metadata?.httpStatusCode === 'number' ? e.$metadata.httpStatusCode : null;
  const name = typeof e?.code === 'string' ? e.code : typeof e?.name === 'string' ? e.name : 'Error';
  return { name, status, message: typeof e?.message === 'string' ? e.message : String(err) };
}

export class ObjectOut {
  /** `s3://bucket/prefix`, for messages. */
  readonly where: string;
  private readonly journals: Map<string, UploadJournal>;

  constructor(
    readonly client: S3Client,
    readonly loc: S3Location,
  ) {
    this.where = s3UrlOf(loc);
    this.journals = journalsFor(client);
  }

  /** The full key of a path under the prefix. */
  keyOf(rel: string): string {
    return keyUnder(this.loc, rel);
  }

  /** The error a failed bucket request becomes (see the module comment). */
  failure(err: unknown, what: string, key: string | null): Error {
    if (err instanceof GenbatchError) return err;
    if (err instanceof Error && err.name === 'AbortError') return err;
    const f = sdkFailure(err);
    const where = key === null ? `s3://${this.loc.bucket}` : `s3://${this.loc.bucket}/${key}`;
    const text = `${where}: ${what} failed (${f.status !== null ? `HTTP ${f.status} ` : ''}${f.name}: ${f.message})`;
    if (f.status === null || f.status >= 500 || f.status === 429) return new NetworkError(text, true, { cause: err });
    return new StorageError(text, { cause: err });
  }

  /** One bucket request; its failure becomes failure(). */
  private async call<T>(request: () => Promise<T>, what: string, key: string | null): Promise<T> {
    try {
      return await request();
    } catch (err) {
      throw this.failure(err, what, key);
    }
  }

  /** What the bucket holds at `rel`, or null when nothing. */
  async head(rel: string, signal?: AbortSignal): Promise<ObjectInfo | null> {
    const { HeadObjectCommand } = await import('@aws-sdk/client-s3');
    const key = this.keyOf(rel);
    try {
      const head = new HeadObjectCommand({ Bucket: this.loc.bucket, Key: key, ChecksumMode: 'ENABLED' });
      const h = await this.client.send(head, signal ? { abortSignal: signal } : {});
      // A composite checksum (of the parts: `...-N`) is no SHA-256 of the whole object.
      const checksum = h.ChecksumSHA256 && !h.ChecksumSHA256.includes('-') && h.ChecksumType !== 'COMPOSITE' ? h.ChecksumSHA256 : null;
      return { size: h.ContentLength ?? 0, sha256: h.Metadata?.sha256 ?? null, contentType: h.ContentType ?? null, etag: h.ETag?.replace(/"/g, '') ?? null, checksum };
    } catch (err) {
      const f = sdkFailure(err);
      if (f.status === 404 || f.name === 'NotFound' || f.name === 'NoSuchKey') return null;
      throw this.failure(err, 'HEAD', key);
    }
  }

  /** An object's whole body (for small objects: result.json, reports). Null when there is none. */
  async get(rel: string, signal?: AbortSignal): Promise<Buffer | null> {
    const { GetObjectCommand } = await import('@aws-sdk/client-s3');
    const key = this.keyOf(rel);
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.loc.bucket, Key: key }), signal ? { abortSignal: signal } : {});
      return Buffer.from(await r.Body!.transformToByteArray());
    } catch (err) {
      const f = sdkFailure(err);
      if (f.status === 404 || f.name === 'NoSuchKey') return null;
      throw this.failure(err, 'GET', key);
    }
  }

  /**
   * After a write: the bucket must show that it holds `written` at `rel` (src/storage/proof.ts), else a
   * StorageError naming the key and the reason (the caller's job is not done). `drop`: an object there that
   * carries the written sha256 (what this write left, with other bytes or size) is deleted first (best
   * effort), so the key never holds an unproved object under genbatch's sha256; another object there (the
   * earlier report a write that was dropped did not replace) is left as it is.
   */
  async prove(rel: string, written: Written, what: string, o: { signal?: AbortSignal; drop?: boolean } = {}): Promise<void> {
    const held = await this.head(rel, o.signal);
    const why = unproven(held, written);
    if (why === null) return;
    if (o.drop && held !== null && held.sha256 === written.sha256) {
      const { DeleteObjectCommand } = await import('@aws-sdk/client-s3');
      await this.client.send(new DeleteObjectCommand({ Bucket: this.loc.bucket, Key: this.keyOf(rel) })).catch(() => undefined);
    }
    throw new StorageError(`${this.where}/${rel}: ${what} not held by the bucket: ${why}`);
  }

  /**
   * Writes a small body at `rel` with one PutObject, its sha256 in the metadata and as the request's
   * checksum (`x-amz-checksum-sha256`: a bucket that verifies refuses other bytes), then proves it held.
   * `contentType`: genbatch's own document; without it the type is the bytes' (src/storage/inert.ts).
   * Replaces what is there: the caller decides (putNew never replaces).
   */
  async putSmall(rel: string, body: Buffer | string, o: { contentType?: string | null; signal?: AbortSignal } = {}): Promise<{ size: number; sha256: string }> {
    const { PutObjectCommand } = await import('@aws-sdk/client-s3');
    const buf = typeof body === 'string' ? Buffer.from(body) : body;
    const sha256 = sha256Hex(buf);
    const key = this.keyOf(rel);
    const type = await typeOf(o.contentType, buf);
    const put = new PutObjectCommand({
      Bucket: this.loc.bucket,
      Key: key,
      Body: buf,
      ContentLength: buf.length,
      Metadata: { sha256 },
      ChecksumAlgorithm: 'SHA256',
      ChecksumSHA256: base64OfHex(sha256),
      ...typeParams(type),
    });
    await this.call(() => this.client.send(put, o.signal ? { abortSignal: o.signal } : {}), 'PUT', key);
    await this.prove(rel, { size: buf.length, sha256, md5: md5Hex(buf) }, 'PUT', { ...(o.signal ? { signal: o.signal } : {}), drop: true });
    return { size: buf.length, sha256 };
  }

  /** A small body at `rel`, or at the first numbered name free or holding the same content (never replacing). */
  async putNew(rel: string, body: Buffer | string, o: { contentType?: string | null; signal?: AbortSignal } = {}): Promise<Placed> {
    const buf = typeof body === 'string' ? Buffer.from(body) : body;
    return this.place(rel, { size: buf.length, sha256: sha256Hex(buf), md5: md5Hex(buf) }, (to) => this.putSmall(to, buf, o).then(() => undefined), o.signal);
  }

  /**
   * Streams `body` to `rel` (see the module comment): checked by `check` on the way and at the end,
   * placed under `rel` or a numbered name, never replacing other content.
   */
  async putStream(
    rel: string,
    body: AsyncIterable<Buffer>,
    o: { check: StreamCheck; contentType?: string | null; journal: UploadJournal; signal?: AbortSignal; replace?: boolean; beforeWrite?: (p: Placed) => Promise<void> },
  ): Promise<Placed> {
    // `replace` (the reports): written to `rel` whatever it holds, the whole object replaced at once.
    const placeAny = o.replace ? this.replacing.bind(this) : this.place.bind(this);
    // `beforeWrite`: told the final key, size and sha256 once they are known and before the object appears under
    // that key (the caller notes it: a run killed after the write finds the object by its note).
    const place: typeof placeAny = (to, w, write, signal) =>
      placeAny(to, w, async (at) => {
        await o.beforeWrite?.({ rel: at, size: w.size, sha256: w.sha256, reused: false });
        await write(at);
      }, signal);
    const it = body[Symbol.asyncIterator]();
    const head: Buffer[] = [];
    let headBytes = 0;
    // The MD5 of the bytes sent, for the proof after the write (an ETag is an MD5 on most servers).
    const md5 = createHash('md5');
    for (;;) {
      const next = await it.next();
      if (next.done) {
        const { size, sha256 } = o.check.finish();
        const whole = Buffer.concat(head, headBytes);
        return place(rel, { size, sha256, md5: md5.digest('hex') }, (to) => this.putSmall(to, whole, o).then(() => undefined), o.signal);
      }
      o.check.update(next.value);
      md5.update(next.value);
      head.push(next.value);
      headBytes += next.value.length;
      if (headBytes > PART_SIZE) break;
    }
    // The end-of-body checks run before the generator ends: one that fails aborts the upload before
    // CompleteMultipartUpload (lib-storage completes only after the body ended without error).
    let checked: { size: number; sha256: string } | null = null;
    const type = await typeOf(o.contentType, Buffer.concat(head, headBytes));
    const rest = async function* (): AsyncGenerator<Buffer> {
      yield* head.splice(0);
      for (;;) {
        const next = await it.next();
        if (next.done) break;
        o.check.update(next.value);
        md5.update(next.value);
        yield next.value;
      }
      checked = o.check.finish();
    };
    const tmp = this.keyOf(`${PARTIAL_DIR}/${randomBytes(8).toString('hex')}`);
    // The temporary key is recorded before the upload is created (no UploadId yet: a run killed before the
    // answer arrives leaves an upload that only a listing finds), then again with its UploadId.
    await o.journal.started({ key: tmp, uploadId: '' });
    const uploadId = await this.multipart(tmp, Readable.from(rest(), { objectMode: false }), o);
    const done = checked as { size: number; sha256: string } | null;
    try {
      if (done === null) throw new StorageError(`${this.where}: the upload of "${rel}" ended before its body did`);
      const written = { ...done, md5: md5.digest('hex') };
      const placed = await place(rel, written, (to) => this.copyFrom(tmp, to, written, type, o.signal), o.signal);
      await this.clearPending({ key: tmp, completed: true }, o.journal);
      return placed;
    } catch (err) {
      // The upload may not have been completed, whatever the endpoint answered: aborted too (one gone is fine).
      await this.clearPending({ key: tmp, uploadId }, o.journal).catch(() => undefined);
      throw err;
    }
  }

  /**
   * One multipart upload (lib-storage) of `body` to the temporary key `tmp`. The body's checks run as it is
   * read. Each part carries its SHA-256 (`ChecksumAlgorithm`: the SDK hashes each part, a Buffer, into the
   * `x-amz-checksum-sha256` header; no trailer), which a bucket that verifies checks.
   */
  private async multipart(tmp: string, body: Readable, o: { journal: UploadJournal }): Promise<string | null> {
    const { Upload } = await import('@aws-sdk/lib-storage');
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.loc.bucket, Key: tmp, Body: body, ChecksumAlgorithm: 'SHA256' },
      partSize: PART_SIZE,
      queueSize: QUEUE_SIZE,
      // The upload is aborted here (clearPending), not by lib-storage: its abort's failure would hide the
      // error that failed the upload (s3rver, for one, has no AbortMultipartUpload).
      leavePartsOnError: true,
    });
    let uploadId: string | null = null;
    this.journals.set(tmp, {
      started: (u) => {
        uploadId = u.uploadId;
        return o.journal.started(u);
      },
      ended: (key) => o.journal.ended(key),
    });
    // A stop (the signal) is not passed to the Upload: the download it reads is cut by the same signal, so its
    // body fails and lib-storage stops, once the parts in flight have settled; only then is the upload aborted
    // (an AbortMultipartUpload racing parts still being sent may leave parts behind).
    try {
      await upload.done();
      return uploadId;
    } catch (err) {
      body.destroy();
      // Aborted and its temporary object deleted; when the bucket refuses, the journal keeps it for the next run.
      await this.clearPending({ key: tmp, uploadId }, o.journal).catch(() => undefined);
      throw this.failure(err, 'multipart upload', tmp);
    } finally {
      this.journals.delete(tmp);
    }
  }

  /** Server-side copy of the temporary object to its final key (copyIn), then proved held. */
  private async copyFrom(tmp: string, rel: string, written: Written & { sha256: string }, type: InertType, signal?: AbortSignal): Promise<void> {
    await this.copyIn(this.loc.bucket, tmp, rel, written, type, signal);
  }

  /**
   * Server-side copy of `bucket`/`key` to `rel` under the prefix: the metadata replaced (the sha256), the
   * type given, the bucket asked for its own SHA-256 of the copy (`ChecksumAlgorithm`); then proved held
   * with the size, sha256 and MD5 (when known) of `written`.
   */
  async copyIn(bucket: string, key: string, rel: string, written: Written & { sha256: string }, type: InertType, signal?: AbortSignal): Promise<void> {
    const { CopyObjectCommand } = await import('@aws-sdk/client-s3');
    const to = this.keyOf(rel);
    const source = `${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
    const copy = new CopyObjectCommand({
      Bucket: this.loc.bucket,
      Key: to,
      CopySource: source,
      MetadataDirective: 'REPLACE',
      Metadata: { sha256: written.sha256 },
      ChecksumAlgorithm: 'SHA256',
      ...typeParams(type),
    });
    await this.call(() => this.client.send(copy, signal ? { abortSignal: signal } : {}), 'COPY', to);
    await this.prove(rel, written, 'COPY', { ...(signal ? { signal } : {}), drop: true });
  }

  /**
   * Puts content of `size` bytes and `sha256` under `rel`, or under the first numbered name that is free
   * (`write`) or already holds the same content (reused). Never replaces an object.
   */
  private async place(rel: string, w: Written & { sha256: string }, write: (rel: string) => Promise<void>, signal?: AbortSignal): Promise<Placed> {
    const { size, sha256 } = w;
    for (let n = 1; n <= MAX_NUMBERED; n++) {
      const candidate = n === 1 ? rel : numberedName(rel, n);
      const there = await this.head(candidate, signal);
      if (there === null) {
        await write(candidate);
        return { rel: candidate, size, sha256, reused: false };
      }
      // Reused only when the bucket shows the same content (an object with this sha256 metadata but other
      // bytes, left by a write it did not prove, is other content).
      if (unproven(there, w) === null) return { rel: candidate, size, sha256, reused: true };
    }
    throw new StorageError(`${this.where}: "${rel}" and ${MAX_NUMBERED - 1} numbered variants are all taken`);
  }

  /** Writes content of `size` bytes and `sha256` to `rel`, replacing what is there (putStream's `replace`). */
  private async replacing(rel: string, w: Written & { sha256: string }, write: (rel: string) => Promise<void>): Promise<Placed> {
    await write(rel);
    return { rel, size: w.size, sha256: w.sha256, reused: false };
  }

  /**
   * Clears what an upload may have left: its multipart upload (aborted, unless `completed`; one already gone
   * is fine) and its temporary object (deleted; none is fine); then the journal forgets it. Throws when the bucket refused,
   * leaving the record for the next run.
   */
  async clearPending(u: { key: string; uploadId?: string | null; completed?: boolean }, journal: UploadJournal): Promise<void> {
    const { AbortMultipartUploadCommand, DeleteObjectCommand } = await import('@aws-sdk/client-s3');
    // No UploadId recorded: the upload may have been created without its answer arriving; it is looked up.
    const uploads = u.completed ? [] : u.uploadId ? [u.uploadId] : await this.uploadsOf(u.key);
    for (const uploadId of uploads) {
      try {
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.loc.bucket, Key: u.key, UploadId: uploadId }));
      } catch (err) {
        const f = sdkFailure(err);
        if (f.status !== 404 && f.name !== 'NoSuchUpload') throw this.failure(err, 'abort of a multipart upload', u.key);
      }
    }
    const del = new DeleteObjectCommand({ Bucket: this.loc.bucket, Key: u.key });
    await this.call(() => this.client.send(del), 'DELETE', u.key);
    await journal.ended(u.key);
  }

  /**
   * The multipart uploads in progress for exactly `key` (ListMultipartUploads). A server that cannot list
   * them (s3rver, some S3-compatible services: 405 or 501) gives none: nothing more can be found.
   */
  private async uploadsOf(key: string): Promise<string[]> {
    const { ListMultipartUploadsCommand } = await import('@aws-sdk/client-s3');
    try {
      const list = await this.client.send(new ListMultipartUploadsCommand({ Bucket: this.loc.bucket, Prefix: key }));
      return (list.Uploads ?? []).filter((up) => up.Key === key && up.UploadId).map((up) => up.UploadId!);
    } catch (err) {
      const f = sdkFailure(err);
      if (f.status === 405 || f.status === 501 || f.name === 'NotImplemented' || f.name === 'MethodNotAllowed') return [];
      throw this.failure(err, 'listing of multipart uploads', key);
    }
  }

  /** Clears the uploads a stopped run left (see clearPending); stops at the first the bucket refuses. */
  async abortStale(pending: readonly PendingUpload[], journal: UploadJournal): Promise<number> {
    for (const u of pending) await this.clearPending(u, journal);
    return pending.length;
  }

  /** The paths (under the prefix) of every object under `<folder>/`. */
  async list(folder: string): Promise<string[]> {
    const { ListObjectsV2Command } = await import('@aws-sdk/client-s3');
    const base = this.keyOf(`${folder}/`);
    const cut = this.loc.prefix === '' ? 0 : this.loc.prefix.length + 1;
    const out: string[] = [];
    let token: string | undefined;
    do {
      const list = new ListObjectsV2Command({ Bucket: this.loc.bucket, Prefix: base, ...(token ? { ContinuationToken: token } : {}) });
      const page = await this.call(() => this.client.send(list), 'LIST', base);
      for (const c of page.Contents ?? []) if (c.Key) out.push(c.Key.slice(cut));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return out;
  }

  /**
   * Moves objects (server-side copy, then delete) from `from[i]` to `to[i]`, paths under the prefix. Nothing
   * is deleted before every copy is proved held (size, sha256 metadata, the bucket's checksum or MD5 ETag
   * equal to the source's).
   */
  async move(from: readonly string[], to: readonly string[]): Promise<void> {
    const { CopyObjectCommand, DeleteObjectCommand } = await import('@aws-sdk/client-s3');
    for (let i = 0; i < from.length; i++) {
      const src = this.keyOf(from[i]!);
      const dst = this.keyOf(to[i]!);
      const was = await this.head(from[i]!);
      if (was === null) throw new StorageError(`${this.where}/${from[i]}: no object there to move to ${to[i]}`);
      const source = `${this.loc.bucket}/${src.split('/').map(encodeURIComponent).join('/')}`;
      const copy = new CopyObjectCommand({ Bucket: this.loc.bucket, Key: dst, CopySource: source, MetadataDirective: 'COPY', ChecksumAlgorithm: 'SHA256' });
      await this.call(() => this.client.send(copy), 'COPY', dst);
      await this.prove(to[i]!, { size: was.size, sha256: was.sha256, md5: md5OfEtag(was.etag), checksum: was.checksum }, 'COPY');
    }
    for (const rel of from) {
      const del = new DeleteObjectCommand({ Bucket: this.loc.bucket, Key: this.keyOf(rel) });
      await this.call(() => this.client.send(del), 'DELETE', this.keyOf(rel));
    }
  }

  /**
   * Before anything is submitted: a small probe object is written under the prefix (with its checksum),
   * proved held (an endpoint that answers 200 and keeps nothing, or other bytes, is found here) and
   * deleted, so wrong credentials, a missing bucket, a read-only key or a lying endpoint stop the run here
   * (StorageError, exit 74, naming the bucket), not after credits were spent.
   */
  async checkWritable(policy: RetryPolicy = PROBE_RETRY): Promise<void> {
    const { DeleteObjectCommand, PutObjectCommand } = await import('@aws-sdk/client-s3');
    const rel = `${PARTIAL_DIR}/probe-${randomBytes(8).toString('hex')}`;
    const key = this.keyOf(rel);
    const body = randomBytes(32);
    const sha256 = sha256Hex(body);
    const refuse = (err: unknown, what: string): StorageError => {
      const f = sdkFailure(err instanceof GenbatchError && err.cause !== undefined ? err.cause : err);
      return new StorageError(
        `--out ${this.where}: bucket "${this.loc.bucket}" is not writable (${what}: ${f.status !== null ? `HTTP ${f.status} ` : ''}${f.name}: ${f.message}); check the credentials, region and endpoint (AWS_* environment, profile)`,
        { cause: err },
      );
    };
    // A 5xx, a 429 or a cut connection is tried again (the one retry layer; the probe's requests are idempotent):
    // a bucket's passing fault is no refusal. A 4xx (credentials, permission, no such bucket) is one at once.
    const tried = <T>(what: string, request: () => Promise<T>): Promise<T> => withRetry(() => this.call(request, what, key), { policy, method: 'GET' });
    try {
      const put = { Bucket: this.loc.bucket, Key: key, Body: body, ContentLength: body.length, Metadata: { sha256 }, ChecksumAlgorithm: 'SHA256' as const, ChecksumSHA256: base64OfHex(sha256) };
      await tried('PUT', () => this.client.send(new PutObjectCommand({ ...put, ContentType: 'application/octet-stream' })));
    } catch (err) {
      throw refuse(err, 'PUT of a probe object');
    }
    const why = unproven(await withRetry(() => this.head(rel), { policy, method: 'GET' }), { size: body.length, sha256, md5: md5Hex(body) });
    if (why !== null) {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.loc.bucket, Key: key })).catch(() => undefined);
      throw new StorageError(`--out ${this.where}: bucket "${this.loc.bucket}" does not keep what it is sent (a probe object ${key}: ${why}); check the endpoint (AWS_ENDPOINT_URL_S3, a proxy before it)`);
    }
    try {
      await tried('DELETE', () => this.client.send(new DeleteObjectCommand({ Bucket: this.loc.bucket, Key: key })));
    } catch (err) {
      throw refuse(err, `DELETE of the probe object ${key}`);
    }
  }

  close(): void {
    this.client.destroy();
  }
}
