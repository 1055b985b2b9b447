import { createHash, randomBytes } from 'node:crypto';
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BodyCheck } from '../src/download/check.js';
import { StorageError } from '../src/errors.js';
import { ObjectOut, PART_SIZE } from '../src/storage/index.js';
import { resultsBucket } from '../src/storage/results.js';
import { startLyingS3, type LyingS3 } from './helpers/lying-s3.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from './helpers/s3.js';

/**
 * ObjectOut through an HTTP proxy before s3rver that answers writes with a success and keeps nothing, or
 * passes them on with other bytes: no write counts until the bucket shows it holds what was sent.
 */

let s3: TestS3;
beforeAll(async () => {
  s3 = await startS3();
}, 60_000);
afterAll(async () => {
  await s3?.stop();
});

const NO_JOURNAL = { started: () => undefined, ended: () => undefined };
const check = (): BodyCheck => new BodyCheck({ where: 'test', declared: null, expected: null, maxBytes: 1e10 });
const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

async function* chunks(b: Buffer): AsyncGenerator<Buffer> {
  for (let i = 0; i < b.length; i += 64 * 1024) yield b.subarray(i, i + 64 * 1024);
}

function outVia(endpoint: string, prefix: string): ObjectOut {
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: S3_KEY_ID, secretAccessKey: S3_SECRET },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 1,
  });
  return new ObjectOut(client, { bucket: s3.bucket, prefix });
}

async function withLiar(mode: 'drop' | 'alter', fn: (liar: LyingS3) => Promise<void>): Promise<void> {
  const liar = await startLyingS3(s3.port, mode);
  try {
    await fn(liar);
  } finally {
    await liar.stop();
  }
}

describe('a bucket that answers writes it did not keep', () => {
  it('a small result (one PutObject) the endpoint drops: StorageError naming the key, nothing recorded as there', async () => {
    await withLiar('drop', async (liar) => {
      const out = outVia(liar.url, 'drop-small');
      const body = randomBytes(5000);
      const err = await out.putStream('job-1/image-1.png', chunks(body), { check: check(), journal: NO_JOURNAL }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageError);
      expect((err as Error).message).toContain('s3://bucket/drop-small/job-1/image-1.png');
      expect((err as Error).message).toContain('holds no object there');
      expect(liar.told.map((t) => t.kind)).toEqual(['put']);
      expect(await s3.keys('drop-small/')).toEqual([]);
      out.close();
    });
  });

  it('a large result (multipart, then a copy to its key) the endpoint drops: StorageError, no object, no upload left', async () => {
    await withLiar('drop', async (liar) => {
      const out = outVia(liar.url, 'drop-big');
      const body = randomBytes(PART_SIZE + 300_000);
      const err = await out.putStream('job-1/video-1.mp4', chunks(body), { check: check(), journal: NO_JOURNAL }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageError);
      expect((err as Error).message).toContain('job-1/video-1.mp4: COPY not held by the bucket');
      expect(liar.told.map((t) => t.kind).sort()).toEqual(['complete', 'copy', 'part', 'part']);
      expect(await s3.keys('drop-big/')).toEqual([]);
      expect(s3.pendingUploads()).toEqual([]);
      out.close();
    });
  });

  it('a small result whose bytes are changed on the way: refused (the MD5 the bucket shows is not the one sent), the changed object deleted', async () => {
    await withLiar('alter', async (liar) => {
      const out = outVia(liar.url, 'alter-small');
      const body = randomBytes(5000);
      const err = await out.putStream('job-1/image-1.png', chunks(body), { check: check(), journal: NO_JOURNAL }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageError);
      expect((err as Error).message).toMatch(/PUT not held by the bucket: the bucket's MD5 of the bytes it holds \(ETag\) is [0-9a-f]{32}, not [0-9a-f]{32}/);
      expect(await s3.keys('alter-small/')).toEqual([]);
      out.close();
    });
  });

  it('a large result whose parts are changed on the way: refused after the copy, the final key left empty', async () => {
    await withLiar('alter', async (liar) => {
      const out = outVia(liar.url, 'alter-big');
      const body = randomBytes(PART_SIZE + 300_000);
      const err = await out.putStream('job-1/video-1.mp4', chunks(body), { check: check(), journal: NO_JOURNAL }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageError);
      expect((err as Error).message).toContain('job-1/video-1.mp4: COPY not held by the bucket');
      expect(await s3.keys('alter-big/')).toEqual([]);
      out.close();
    });
  });

  it('a report (replaced in place) whose new write is dropped: refused, the earlier report left as it was', async () => {
    const earlier = Buffer.from('{"report": 1}');
    const honest = outVia(s3.endpoint, 'replace');
    await honest.putSmall('report.json', earlier, { contentType: 'application/json' });
    honest.close();
    await withLiar('drop', async (liar) => {
      const out = outVia(liar.url, 'replace');
      const err = await out.putSmall('report.json', '{"report": 2}', { contentType: 'application/json' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageError);
      expect((err as Error).message).toContain(`report.json: PUT not held by the bucket: the object there has sha256 metadata ${sha256(earlier)}`);
      expect((await s3.get('replace/report.json')).equals(earlier)).toBe(true);
      out.close();
    });
  });

  it('an object with the right size and sha256 metadata but other bytes is not reused: the result goes to a numbered name', async () => {
    await withLiar('alter', async (liar) => {
      const body = randomBytes(5000);
      const liarOut = outVia(liar.url, 'reuse');
      const { PutObjectCommand } = await import('@aws-sdk/client-s3');
      // Other bytes stored under the key with the metadata of `body` (what a lying write leaves).
      await liarOut.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'reuse/job-1/image-1.png', Body: body, Metadata: { sha256: sha256(body) } }));
      liarOut.close();
      const out = outVia(s3.endpoint, 'reuse');
      const placed = await out.putStream('job-1/image-1.png', chunks(body), { check: check(), journal: NO_JOURNAL });
      expect(placed).toMatchObject({ rel: 'job-1/image-1 (2).png', reused: false });
      expect(sha256(await s3.get('reuse/job-1/image-1 (2).png'))).toBe(sha256(body));
      out.close();
    });
  });

  it('a file a killed run noted as put is taken as held only if its bytes are the noted ones (read back when the bucket gives no SHA-256)', async () => {
    const body = randomBytes(5000);
    const other = Buffer.from(body);
    other[100] ^= 0xff;
    const { PutObjectCommand } = await import('@aws-sdk/client-s3');
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'noted/job-1/a.png', Body: other, Metadata: { sha256: sha256(body) } }));
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'noted/job-1/b.png', Body: body, Metadata: { sha256: sha256(body) } }));
    const out = outVia(s3.endpoint, 'noted');
    const bucket = resultsBucket(out, (fn) => fn());
    expect(await bucket.holds('job-1/a.png', body.length, sha256(body))).toBe(false);
    expect(await bucket.holds('job-1/b.png', body.length, sha256(body))).toBe(true);
    out.close();
  });

  it('checkWritable: an endpoint that drops the probe stops the run before anything (exit 74, naming the bucket)', async () => {
    await withLiar('drop', async (liar) => {
      const out = outVia(liar.url, 'probe');
      const err = await out.checkWritable().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageError);
      expect((err as StorageError).exitCode).toBe(74);
      expect((err as Error).message).toContain('bucket "bucket" does not keep what it is sent');
      out.close();
    });
  });

  it('the same writes through an honest endpoint are proved and kept (the proof is no false alarm on s3rver)', async () => {
    const out = outVia(s3.endpoint, 'honest');
    await out.checkWritable();
    for (const size of [0, 5000, PART_SIZE + 300_000]) {
      const body = randomBytes(size);
      const placed = await out.putStream(`job-1/f-${size}.bin`, chunks(body), { check: check(), journal: NO_JOURNAL });
      expect(sha256(await s3.get(`honest/${placed.rel}`))).toBe(sha256(body));
    }
    await out.move(['job-1/f-5000.bin'], ['job-1/previous-1/f-5000.bin']);
    expect(await s3.keys('honest/')).toEqual(['honest/job-1/f-0.bin', `honest/job-1/f-${PART_SIZE + 300_000}.bin`, 'honest/job-1/previous-1/f-5000.bin']);
    out.close();
  });
});
